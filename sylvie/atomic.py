"""Atomic outputs: write under a temporary name in the same directory, then rename.

A stage that fails part-way leaves nothing at the final path, so Snakemake (and users) never see
half-written files.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, directory: bool = False):
    """Yield a temporary path beside ``path``; on success move it into place, on error remove it."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{final.name}.tmp-"
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=final.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, dir=final.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if directory and final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike, what: str):
    """Read a JSON file, turning a missing or malformed file into a clear error."""
    from sylvie.errors import SylvieError

    p = Path(path)
    if not p.is_file():
        raise SylvieError(f"{p}: {what} not found; run the stage that produces it first")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise SylvieError(f"{p}: {what} is not valid JSON ({e}); delete it and rerun its stage") from e
