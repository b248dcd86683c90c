"""Our JSON files read with one-line errors, for the formats' readers: the file's text (missing, a directory,
unreadable, not UTF-8), strict JSON (NaN and Infinity refused where our writers write null) and the fields a reader
needs, as each format's JSON Schema says (``schema_problem``). Every error names the file, says what is wrong and
ends with the reader's ``fix``."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from sylvie.errors import SylvieError

_VALIDATORS: dict[int, jsonschema.Draft202012Validator] = {}  # a format's schema -> its validator, made once


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


def schema_problem(obj, schema: dict) -> str | None:
    """What is wrong with ``obj`` against its format's JSON Schema (draft 2020-12), in words, as one clause (the
    first problem; ``None`` when there is none): "no 'train.seed'", "'test_acc' is "high", not a number",
    "'rank_wait_time' is a list with non-numbers, not a list of numbers"."""
    validator = _VALIDATORS.get(id(schema))
    if validator is None:
        validator = _VALIDATORS[id(schema)] = jsonschema.Draft202012Validator(schema)
    errors = list(validator.iter_errors(obj))
    if not errors:
        return None
    e = min(errors, key=lambda e: [str(p) for p in e.absolute_path])  # the outermost, then in key order
    path = [str(p) for p in e.absolute_path]
    if e.validator == "required":
        missing = next(k for k in e.validator_value if not (isinstance(e.instance, dict) and k in e.instance))
        return f"no '{'.'.join([*path, missing])}'"
    if e.validator == "type" and path and isinstance(e.absolute_path[-1], int):  # an item of a list
        items = _type_words(e.validator_value).split(" ", 1)[-1] + "s"
        return f"'{'.'.join(path[:-1])}' is a list with non-{items}, not a list of {items}"
    if e.validator == "type":
        return f"'{'.'.join(path) or '(top level)'}' is {json.dumps(e.instance)[:40]}, not " \
               f"{_type_words(e.validator_value)}"
    return f"'{'.'.join(path) or '(top level)'}': {e.message}"


_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string", "object": "an object",
               "boolean": "true or false", "array": "a list"}


def _type_words(types) -> str:
    """The type a field should have, in words (null, where allowed, left unsaid)."""
    types = [types] if isinstance(types, str) else [t for t in types if t != "null"]
    return _TYPE_WORDS.get(types[0], types[0]) if types else "null"
