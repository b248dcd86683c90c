"""Our JSON files read with one-line errors, for the formats' readers: the file's text (missing, a directory,
unreadable, not UTF-8), strict JSON (NaN and Infinity refused where our writers write null) and the type of each
field a reader needs. Every error names the file, says what is wrong and ends with the reader's ``fix``."""
from __future__ import annotations

import json
from pathlib import Path

from sylvie.errors import SylvieError

NUMBER = (int, float)
_TYPE_WORDS = {int: "an integer", str: "a string", dict: "an object", bool: "true or false"}


def read_text(path: Path, what: str, fix: str) -> str:
    """The file's text; a missing, unreadable or non-UTF-8 file is a one-line error."""
    if path.is_dir():
        raise SylvieError(f"{path}: {what} expected here, found a directory; {fix}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SylvieError(f"{path}: {what} not found; {fix}") from None
    except OSError as e:
        raise SylvieError(f"{path}: {what} cannot be read ({e.strerror or e}); {fix}") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SylvieError(f"{path}: not UTF-8 text (byte {e.start}), so no {what}: the file is damaged; "
                          f"{fix}") from e


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def loads_strict(text: str, path: Path, fix: str):
    """``text`` as strict JSON (NaN, Infinity refused); invalid JSON is a one-line error naming ``path``."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise SylvieError(f"{path}: not valid JSON ({e}); the file is damaged or cut short: {fix}") from e


def type_problem(obj: dict, fields: dict) -> str | None:
    """The first field of ``fields`` (dotted key -> accepted types; an optional key ends in '?') that ``obj`` lacks
    or holds with another type, in words, or None."""
    for spec, types in fields.items():
        key, optional = spec.rstrip("?"), spec.endswith("?")
        value, present = obj, True
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                present = False
                break
            value = value[part]
        if not present:
            if optional:
                continue
            return f"no '{key}'"
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):  # true is no number
            wanted = "a number" if float in types else _TYPE_WORDS[types[0]]
            return f"'{key}' is {json.dumps(value)[:40]}, not {wanted}"
    return None
