"""A config file as the pipeline reads it: JSON, else YAML 1.1 (PyYAML, as Snakemake reads a ``--configfile``),
refused in one line naming the file and line where it cannot be read or reads otherwise than it is written.
``python -m sylvie.config_file FILE...`` checks files so; ``make run CONFIG=`` runs ``sylvie.pipeline_config``, which
also checks what they configure, before Snakemake starts."""
from __future__ import annotations

import datetime
import json
import math
import re
from pathlib import Path

import yaml

from sylvie.config import schema
from sylvie.errors import SylvieError


def load_config(path: str | Path) -> dict:
    """The config file at ``path`` as Snakemake reads it (JSON, else YAML 1.1: PyYAML), refused in one line naming
    the file (and line) where it cannot be read, is not a mapping, or reads otherwise than it is written
    (``yaml_as_written``)."""
    p = Path(path)
    if p.is_dir():
        raise SylvieError(f"{p}: a folder, not a config file; give a YAML file (e.g. config/config.yaml)")
    if not p.exists():
        raise SylvieError(f"{p}: no such config file; check the path (relative paths are from {Path.cwd()}), or start "
                          f"from the repository's config/config.yaml")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SylvieError(f"{p}: cannot read the config file ({e.strerror}); check its permissions") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SylvieError(f"{p}, line {line}: not UTF-8 text; save the config as UTF-8") from None
    try:
        config = json.loads(text, object_pairs_hook=lambda pairs: _json_object(pairs, p))  # Snakemake tries JSON
        # first: a JSON file means what it says
    except ValueError:
        config = yaml_as_written(text, p)
    if config is None:
        raise SylvieError(f"{p}: the config file is empty; a config is a mapping with at least 'runs:' (the "
                          f"repository's config/config.yaml is one to start from)")
    if not isinstance(config, dict):
        kind = {list: "a list", str: "a text"}.get(type(config), f"a {type(config).__name__}")
        raise SylvieError(f"{p}: its top level is {kind}, not a mapping of settings (datasets:, defaults:, runs:, "
                          f"...); start from the repository's config/config.yaml")
    return config


def _json_object(pairs: list, path: Path) -> dict:
    """A JSON object of a config file, refused where it gives a key twice (JSON keeps the last without a word)."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise SylvieError(f"{path}: the key \"{key}\" is given twice in one object, and the last would win; keep "
                              f"one")
        seen.add(key)
    return dict(pairs)


def main(argv: list[str] | None = None) -> int:
    """``python -m sylvie.config_file FILE...``: each config file read as the pipeline reads it, a bad one named in one
    line (exit 2). ``make run CONFIG=`` runs it first: Snakemake reads a ``--configfile`` before the Snakefile, and
    meets a missing file or a folder with a traceback."""
    import sys

    try:
        for path in sys.argv[1:] if argv is None else argv:
            load_config(path)
    except SylvieError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


# ---- what a YAML config file says --------------------------------------------------------------------------
# Snakemake reads YAML 1.1 (PyYAML), in which a plain (unquoted) `yes`, `no`, `on`, `off` are booleans, `010` is 8,
# `1_000` is 1000, `2026-11-29` a date and `1e-3` a text; YAML 1.2, and what a reader expects, differ. Each plain
# scalar is checked against the schema's types where it stands, so that what the config holds is what the file says.

_MEANS = "YAML 1.1, as Snakemake reads a config"
# YAML 1.2's core schema: a plain scalar's value in YAML 1.2 (any other is a text)
_YAML_12 = (
    (re.compile(r"(?:null|Null|NULL|~)?"), lambda t: None),
    (re.compile(r"true|True|TRUE|false|False|FALSE"), lambda t: t.lower() == "true"),
    (re.compile(r"[-+]?[0-9]+"), int),
    (re.compile(r"0o[0-7]+"), lambda t: int(t[2:], 8)),
    (re.compile(r"0x[0-9a-fA-F]+"), lambda t: int(t[2:], 16)),
    (re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"), float),
    (re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"), lambda t: float(t.replace(".", ""))),
)
_ANY = {}  # a place the schema says nothing of (an optimiser's keyword arguments): any value


def _yaml_12(text: str):
    return next((read(text) for pattern, read in _YAML_12 if pattern.fullmatch(text)), text)


def yaml_as_written(text: str, path: Path):
    """The YAML document ``text`` (of file ``path``) read as Snakemake reads it, refused naming the line where that
    reading is not what the line says: a key that is not a text (``on:`` is the boolean true), a key given twice
    (the last would win), a plain scalar that is not of the type its knob takes where its text would be
    (``split_column: yes`` is the boolean true; ``lr: 1e-3`` the text '1e-3'), or one that YAML 1.1 and 1.2 read as
    two different values (``parts: 010``: 8 or 10)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node(loader, node, schema(), (), path, set())
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        what = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or str(e)
        raise SylvieError(f"{where}: not valid YAML: {what}; fix the file there") from None
    finally:
        loader.dispose()


def _check_node(loader, node, spec, at: tuple, path: Path, open_nodes: set) -> None:
    """``node`` (at config path ``at``, schema ``spec``: None where the schema refuses the key itself) and what it
    holds, checked as ``yaml_as_written`` says."""
    if spec is None or id(node) in open_nodes:  # an unknown key (the schema names it), or an alias of an ancestor
        return
    open_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = _scalar(loader, key_node, at, path)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str) and _plain(loader, key_node):
                raise SylvieError(f"{path}, line {line}: {_dotted(at, key_node.value)}: the key {key_node.value} is "
                                  f"read ({_MEANS}) as {_described(key)}, not a name; quote it: "
                                  f"{_quoted(key_node.value)}")
            if key in seen:
                raise SylvieError(f"{path}, line {line}: {_dotted(at, key)} is given twice (lines {seen[key]} and "
                                  f"{line}); YAML would keep the last without a word; give it once")
            seen[key] = line
            _check_node(loader, value_node, _member(spec, key), (*at, key), path, open_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_node(loader, item, _item(spec), (*at, i), path, open_nodes)
    elif _plain(loader, node):
        _check_scalar(_scalar(loader, node, at, path), node, spec, at, path)
    open_nodes.discard(id(node))


def _scalar(loader, node, at: tuple, path: Path):
    """The value YAML reads from scalar ``node``."""
    try:
        return loader.construct_object(node)
    except ValueError:  # `2026-13-45`: a date to YAML 1.1, but none
        raise SylvieError(f"{path}, line {node.start_mark.line + 1}: {_dotted(at)}: {node.value} is a date to "
                          f"{_MEANS}, but not a valid one; quote it: {_quoted(node.value)}") from None


def _check_scalar(value, node, spec, at: tuple, path: Path) -> None:
    text, kinds = node.value, _kinds(spec)
    other = _yaml_12(text)
    line = f"{path}, line {node.start_mark.line + 1}: {_dotted(at)}: {text}"
    if _fits(value, kinds):
        # the same in both YAMLs, or a spelling of the knob's type only YAML 1.1 knows (`yes` for true, `1_000`)
        if _same(value, other) or (kinds is not None and not _fits(other, kinds)):
            return
        raise SylvieError(f"{line} is read ({_MEANS}) as {_described(value)}, in YAML 1.2 as {_described(other)}; "
                          f"write {_spelled(value, kinds)} or {_spelled(other, kinds)}, whichever you mean")
    takes = f", but the setting takes {_wanted(kinds)}" if kinds else ""
    if _fits(other, kinds) and not isinstance(other, str):  # `lr: 1e-3`: a number only in YAML 1.2
        raise SylvieError(f"{line} is read ({_MEANS}) as {_described(value)}{takes}; write {_spelled(other, kinds)}")
    if _fits(text, kinds):  # `split_column: yes`: a name YAML reads as true; a date, which no knob takes
        raise SylvieError(f"{line} is read ({_MEANS}) as {_described(value)}{takes}; quote it: {_quoted(text)}")
    # else a value of the wrong type however read: the schema's check names it


def _plain(loader, node) -> bool:
    """Whether ``node`` is a plain scalar whose type YAML inferred (not quoted, no explicit tag)."""
    return (isinstance(node, yaml.ScalarNode) and node.style is None
            and node.tag == loader.resolve(yaml.ScalarNode, node.value, (True, False)))


def _resolved(spec):
    """``spec`` with a ``$ref`` followed; its alternatives (``oneOf``, ``anyOf``) as a list."""
    while isinstance(spec, dict) and "$ref" in spec:
        spec = schema()["$defs"][spec["$ref"].rsplit("/", 1)[-1]]
    if not isinstance(spec, dict):
        return []
    return [spec] + [b for k in ("oneOf", "anyOf") for alt in spec.get(k, ()) for b in _resolved(alt)]


def _kinds(spec) -> set | None:
    """The JSON types the schema allows at ``spec`` (from ``type``, ``enum``, ``const``); None: any."""
    kinds = set()
    for s in _resolved(spec):
        t = s.get("type", ())
        kinds |= {t} if isinstance(t, str) else set(t)
        kinds |= {_json_type(v) for v in [*s.get("enum", ()), *([s["const"]] if "const" in s else [])]}
    return kinds or None


def _member(spec, key):
    """The schema of member ``key`` of the mapping at ``spec``; None where ``key`` is not allowed there."""
    if spec is _ANY:
        return _ANY
    for s in _resolved(spec):
        if "object" in (_kinds(s) or ()) or "properties" in s or "additionalProperties" in s:
            if key in s.get("properties", {}):
                return s["properties"][key]
            extra = s.get("additionalProperties", _ANY)
            return None if extra is False else _ANY if extra is True else extra
    return _ANY if _kinds(spec) is None else None


def _item(spec):
    if spec is _ANY:
        return _ANY
    return next((s.get("items", _ANY) for s in _resolved(spec) if "array" in (_kinds(s) or ())), None)


def typed_overrides(overrides: dict) -> dict:
    """Snakemake's ``--config`` overrides read by the schema's types: Snakemake hands a nested value over as text
    (``--config 'defaults={train: {epochs: 5}}'`` gives epochs '5'), so a text where its knob takes no text, or
    takes any value (an optimiser's keyword arguments), is read as YAML 1.2 reads it where that gives a value the
    knob takes (``'5'``, ``'1e-3'``, ``'false'``, ``'null'``, ``'[1, 2]'``); a text the knob takes stays one."""
    return _typed(overrides, schema())


def _typed(value, spec):
    if spec is None:  # a key the schema has no place for: left for the validation to name
        return value
    if isinstance(value, dict):
        return {k: _typed(v, _member(spec, k)) for k, v in value.items()}
    if isinstance(value, list):
        item = _item(spec)
        return [_typed(v, item) for v in value]
    if not isinstance(value, str):
        return value
    kinds = None if spec is _ANY else _kinds(spec)
    if kinds is not None and "string" in kinds:
        return None if "null" in kinds and value in ("null", "Null", "NULL", "~") else value
    parsed = _yaml_12(value.strip())
    if isinstance(parsed, str) and parsed.lstrip()[:1] in ("[", "{"):
        try:
            parsed = yaml.safe_load(parsed)
        except yaml.YAMLError:
            return value
    if isinstance(parsed, (dict, list)):
        return _typed(parsed, spec) if _fits(parsed, kinds) else value
    return parsed if _fits(parsed, kinds) else value


def _json_type(value) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", type(None): "null", list: "array",
            dict: "object"}.get(type(value))


def _fits(value, kinds) -> bool:
    """Whether ``value`` is of one of the JSON types ``kinds`` (None: any); as JSON Schema, an integer is a number
    and a number without a fraction an integer."""
    kind = _json_type(value)
    if kind is None:  # a date, which JSON has not
        return False
    if kinds is None:
        return True
    return kind in kinds or (kind == "integer" and "number" in kinds) or (
        kind == "number" and "integer" in kinds and math.isfinite(value) and value == int(value))


def _same(a, b) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))  # NaN is NaN


def _described(value) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null (no value)"
    if isinstance(value, str):
        return f"the text {_quoted(value)}"
    kind = {int: "the integer", float: "the number", datetime.date: "the date"}.get(type(value), "the time")
    return f"{kind} {value}"


def _spelled(value, kinds) -> str:
    """``value`` as YAML 1.1 reads it back as itself (an integral number as an integer where the knob takes one)."""
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, float) and kinds and "integer" in kinds and "number" not in kinds and math.isfinite(value):
        value = int(value)
    return yaml.safe_dump(value).split("\n")[0]


def _wanted(kinds) -> str:
    words = {"string": "a text", "null": "null", "boolean": "true or false", "integer": "an integer",
             "number": "a number", "array": "a list", "object": "a mapping"}
    return " or ".join(words[k] for k in sorted(kinds, key=list(words).index))


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _dotted(at: tuple, last=None) -> str:
    return ".".join(str(k) for k in (*at, *(() if last is None else (last,)))) or "(top level)"


if __name__ == "__main__":
    raise SystemExit(main())
