"""Configuration as data: the schema validates it, supplies every default, and defines the CLI flags.

The Snakefile and every ``sylvie <stage>`` read knobs from the same schema
(``workflow/schemas/config.schema.yaml``), so a default or description lives in one place.
"""
from __future__ import annotations

import argparse
import copy
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema
import yaml

from sylvie.errors import SylvieError

SCHEMA_PATH = Path(__file__).parent / "schema" / "config.schema.yaml"
SECTIONS = ("partition", "model", "train", "comm")


@lru_cache(maxsize=1)
def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _properties(name: str) -> dict:
    return schema()["$defs"][name]["properties"]


def section_defaults(name: str) -> dict:
    """Defaults of one section (``dataset``, ``partition``, ``model`` or ``train``)."""
    return {k: copy.deepcopy(v["default"]) for k, v in _properties(name).items() if "default" in v}


def _raise_invalid(instance, schema_node, where: str) -> None:
    errors = sorted(jsonschema.Draft202012Validator(schema_node).iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        field = ".".join(str(p) for p in e.absolute_path) or "(top level)"
        raise SylvieError(f"{where}: invalid value for '{field}': {e.message}")


def _deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


@dataclass(frozen=True)
class Run:
    name: str
    dataset: str
    partition: dict
    model: dict
    train: dict
    comm: dict

    @property
    def partition_id(self) -> str:
        p = self.partition
        return f"{p['method']}-p{p['parts']}-s{p['seed']}"


def validate(config: dict, where: str = "config") -> dict:
    """Validate a whole pipeline config; returns it with top-level defaults filled in."""
    if not isinstance(config, dict):
        raise SylvieError(f"{where}: must be a mapping with at least 'runs'")
    root = schema()
    _raise_invalid(config, root, where)
    config = copy.deepcopy(config)
    for key, spec in root["properties"].items():
        if key not in config and "default" in spec:
            config[key] = copy.deepcopy(spec["default"])
    for section in ("report", "launch"):
        config[section] = {**section_defaults_of(root["properties"][section]), **config[section]}
    return config


def section_defaults_of(node: dict) -> dict:
    return {k: v["default"] for k, v in node.get("properties", {}).items() if "default" in v}


def resolve_runs(config: dict, where: str = "config") -> dict[str, Run]:
    """Every run with defaults merged and filled in, checked against the datasets it names."""
    config = validate(config, where)
    runs = {}
    for name, override in config["runs"].items():
        merged = _deep_merge(config["defaults"], override)
        dataset = merged.get("dataset", _properties("run")["dataset"]["default"])
        if dataset not in config["datasets"]:
            raise SylvieError(f"{where}: invalid value for 'runs.{name}.dataset': '{dataset}' is not a key of "
                              f"datasets ({', '.join(config['datasets'])}); add it under datasets")
        sections = {s: {**section_defaults(s), **merged.get(s, {})} for s in SECTIONS}
        runs[name] = Run(name=name, dataset=dataset, **sections)
    return runs


def dataset_options(config: dict, name: str) -> dict:
    """Options of dataset ``name`` with defaults filled in."""
    config = validate(config)
    if name not in config["datasets"]:
        raise SylvieError(f"config: unknown dataset '{name}'; datasets has {', '.join(config['datasets'])}")
    return {**section_defaults("dataset"), **config["datasets"][name]}


def load_config(path: str | Path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise SylvieError(f"{p}: config file not found")
    try:
        return yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(p)
        what = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or str(e)
        raise SylvieError(f"{where}: not valid YAML: {what}; fix the file there") from None


# ---- CLI flags from the schema -------------------------------------------------------------------

_TYPES = {"integer": int, "number": float, "string": str}


def add_section_arguments(parser: argparse.ArgumentParser, section: str, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per knob of ``section``, with the schema's default, type, choices and description."""
    group = parser.add_argument_group(f"{section} settings")
    for key, spec in _properties(section).items():
        if key in skip:
            continue
        flag = "--" + key.replace("_", "-")
        kind = spec["type"][0] if isinstance(spec["type"], list) else spec["type"]
        kwargs = {"dest": f"{section}.{key}", "default": spec.get("default"), "help": spec.get("description", "")}
        if kind == "boolean":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            group.add_argument(flag, type=_TYPES[kind], choices=spec.get("enum"), **kwargs)


def section_from_args(args: argparse.Namespace, section: str) -> dict:
    """The section's values from parsed arguments, validated against the schema."""
    prefix = section + "."
    values = {k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix)}
    node = {**schema()["$defs"][section], "$defs": schema()["$defs"]}
    node = {k: v for k, v in node.items() if k != "default"}
    _raise_invalid({k: v for k, v in values.items() if v is not None}, node, f"sylvie {section} options")
    return values


def cli_arguments(section: str, values: dict, skip: tuple[str, ...] = ()) -> str:
    """The flags that reproduce ``values`` on the command line (inverse of add_section_arguments)."""
    out = []
    for key in _properties(section):
        if key in skip or key not in values or values[key] is None:
            continue
        flag = "--" + key.replace("_", "-")
        v = values[key]
        if isinstance(v, bool):
            out.append(flag if v else "--no-" + key.replace("_", "-"))
        else:
            out += [flag, str(v)]
    return shlex.join(out)
