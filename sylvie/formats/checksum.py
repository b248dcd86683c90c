"""The checksum a file of ours carries inside it, so that a stage reading it back knows it is what we wrote.

A ``checksum`` field holds the sha256 of the content without it (canonical JSON; a tensor by dtype, shape and
bytes), written in the same atomic write, so one check serves JSON and torch files alike. A file written before its
format carried one is read unchecked, said once per format.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging

from sylvie.errors import SylvieError

FIELD = "checksum"
log = logging.getLogger(__name__)
_SAID_UNCHECKED: set[str] = set()  # the formats whose unchecked files this process has warned about


def _key(k) -> str:
    return k if isinstance(k, str) else f"<{type(k).__name__}>{k}"  # an optimiser's int keys apart from strings


def _plain(x):
    """``x`` as JSON values: a tensor or array by its dtype, shape and the sha256 of its bytes."""
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    if isinstance(x, dict):
        return {_key(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, bytes):
        return {"bytes": hashlib.sha256(x).hexdigest()}
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        data = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        return {"array": str(x.dtype), "shape": list(x.shape), "sha256": hashlib.sha256(data).hexdigest()}
    import torch  # only where there are torch objects: `sylvie report` checks JSON files and need not start torch

    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy()
        return {"tensor": str(t.dtype), "shape": list(t.shape), "sha256": hashlib.sha256(data).hexdigest()}
    if isinstance(x, (torch.dtype, torch.device)):
        return str(x)
    raise TypeError(f"no checksum for a {type(x).__name__} in a file's content")


def load_torch(path):
    """The content of a torch file of ours (``torch.load``: weights only, onto the CPU). An ``OSError`` is the system
    refusing the read; anything else (``ValueError`` included) means the file is not one torch reads: cut short,
    damaged, another file. (Torch's reader says a cut-short file with an OSError of EINVAL: the file's fault, so it
    is raised as a ValueError.)"""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise ValueError(f"torch's reader: {e.strerror or e}") from None
        raise


def content_sha256(content) -> str:
    """sha256 of ``content`` (JSON values, tensors, arrays) as canonical JSON: keys sorted, compact."""
    text = json.dumps(_plain(content), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def with_checksum(content: dict) -> dict:
    """``content`` with its ``checksum`` (of everything else in it), to be written as the file's content. A JSON
    file's content must be what the file will hold (``sylvie.atomic.json_safe`` applied: NaN written as null)."""
    body = {k: v for k, v in content.items() if k != FIELD}
    return {**body, FIELD: content_sha256(body)}


def checked(content: dict, where, writer: str, fix: str, what: str | None = None) -> dict:
    """``content`` (a file's, read back) less its checksum, once the checksum matches the rest; one that does not is
    a one-line error: ``where`` (the file; a line of it) "was changed after ``writer`` wrote it", ending with ``fix``.
    Content without a checksum (written before its format carried one) is returned as it is; ``what`` (the format,
    in words) says so in a warning, once per format in a process (None: the caller says so)."""
    if FIELD not in content:
        if what is not None and what not in _SAID_UNCHECKED:
            _SAID_UNCHECKED.add(what)
            log.warning(f"{where}: written before {what} carried a checksum, so it is read without that check "
                        f"(said once for all such files)")
        return content
    body = {k: v for k, v in content.items() if k != FIELD}
    if content[FIELD] != content_sha256(body):
        raise SylvieError(f"{where}: was changed after `{writer}` wrote it (its checksum does not match its content: "
                          f"the file is damaged or was edited); {fix}")
    return body
