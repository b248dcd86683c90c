"""Configuration as data: the schema validates it and defines the CLI flags; each section reaches the code as a
checked-in frozen dataclass (``sylvie.config_sections``, ``sylvie.config_dataset``).

The Snakefile and every ``sylvie <stage>`` read knobs from the same schema (``sylvie/schema/config.schema.yaml``,
linked from ``workflow/schemas/``); ``tests/test_config_schema.py`` keeps each class's fields equal to it (types,
defaults, descriptions, bounds). Editors validate a config file with the JSON copy of the schema
(``sylvie/schema/config.schema.json``), written by ``python -m sylvie.config --write-json-schema``.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, overload

import jsonschema
import yaml

from sylvie.config_dataset import DatasetConfig
from sylvie.config_sections import (
    CacheConfig,
    CommConfig,
    EvaluateConfig,
    FeaturesConfig,
    LinkConfig,
    ModelConfig,
    PartitionConfig,
    SamplingConfig,
    SectionRuleError,
    TrainConfig,
)
from sylvie.errors import SylvieError

SCHEMA_PATH = Path(__file__).parent / "schema" / "config.schema.yaml"
JSON_SCHEMA_PATH = SCHEMA_PATH.with_suffix(".json")
SECTIONS = ("partition", "model", "train", "comm", "sampling", "cache", "features", "link", "evaluate")
# the class of each section section() builds: the run's sections and a dataset's options
SECTION_CLASSES: dict[str, type] = {
    "partition": PartitionConfig, "model": ModelConfig, "train": TrainConfig, "comm": CommConfig,
    "sampling": SamplingConfig, "cache": CacheConfig, "features": FeaturesConfig, "link": LinkConfig,
    "evaluate": EvaluateConfig,
    "dataset": DatasetConfig,
}
Section = (PartitionConfig | ModelConfig | TrainConfig | CommConfig | SamplingConfig | CacheConfig | FeaturesConfig
           | LinkConfig | EvaluateConfig | DatasetConfig)
SectionValues = Mapping[str, Any] | Section | None
# the sections a run of each training mode ignores: the other mode's settings
OTHER_MODE_SECTIONS = {"full": ("sampling", "cache", "features"), "sampled": ("comm",)}


@lru_cache(maxsize=1)
def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def properties(name: str) -> dict:
    """The schema of each knob of run section ``name`` (``dataset``, ``train``, ...)."""
    return schema()["$defs"][name]["properties"]



def _non_finite(instance, path=()):
    """The path and value of the first NaN or infinity in ``instance`` (YAML's .nan, .inf; ``--lr nan``), if any:
    JSON Schema's bounds let them through (every comparison with NaN is false)."""
    if isinstance(instance, float) and not math.isfinite(instance):
        return path, instance
    items = instance.items() if isinstance(instance, dict) else enumerate(instance) \
        if isinstance(instance, list) else ()
    for k, v in items:
        found = _non_finite(v, (*path, k))
        if found:
            return found
    return None


def _allowed(node: dict) -> str:
    """The range a bounded number knob allows, in words ("0 to 4294967295", "above 0 and below 1")."""
    if "minimum" in node and "maximum" in node:
        return f"{node['minimum']} to {node['maximum']}"
    words = {"minimum": "at least", "exclusiveMinimum": "above", "maximum": "at most", "exclusiveMaximum": "below"}
    return " and ".join(f"{w} {node[k]}" for k, w in words.items() if k in node)


def _raise_invalid(instance, schema_node, where: str, field: str | None = None) -> None:
    """A SylvieError naming the first invalid field of ``instance`` (``field``: the name of ``instance`` itself,
    where it is one value)."""
    bad = _non_finite(instance)
    if bad:
        path, value = bad
        name = ".".join(str(p) for p in path) or field or "(top level)"
        raise SylvieError(f"{where}: invalid value for '{name}': {value} is not a finite number; give a finite "
                          f"number")
    errors = sorted(jsonschema.Draft202012Validator(schema_node).iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        name = ".".join(str(p) for p in e.absolute_path) or field or "(top level)"
        message = e.message
        if e.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            message += f" (allowed: {_allowed(e.schema)})"
        elif e.validator == "uniqueItems":
            message += "; give each value once"
        raise SylvieError(f"{where}: invalid value for '{name}': {message}")


def _deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


@dataclass(frozen=True)
class Run:
    """One run of the pipeline: each section its checked-in class (``run.train.epochs``, ``run.comm.bits``)."""
    name: str
    dataset: str
    partition: PartitionConfig
    model: ModelConfig
    train: TrainConfig
    comm: CommConfig
    sampling: SamplingConfig
    cache: CacheConfig
    features: FeaturesConfig
    link: LinkConfig
    evaluate: EvaluateConfig

    @property
    def partition_id(self) -> str:
        """The partition's directory name, from everything that shapes it (METIS: also what it balances, and
        within what tolerance)."""
        p = self.partition
        shaped = f"{p.method}-p{p.parts}-s{p.seed}"
        return f"{shaped}-{p.balance}-t{p.tolerance:g}" if p.method == "metis" else shaped

    @property
    def sampled(self) -> bool:
        return self.train.mode == "sampled"

    @property
    def vip_id(self) -> str:
        """The VIP analysis a sampled run needs, named by what shapes it: fanouts and batch size."""
        s = self.sampling
        return f"f{fanouts_id(s.fanouts)}-b{s.batch_size}"


def fanouts_id(fanouts) -> str:
    """A short name of a fanouts setting for a directory name: ``15-10-5``, or where a hop's fanouts are a map per
    relation, ``m`` and a hash of the whole setting."""
    if all(not isinstance(f, dict) for f in fanouts):
        return "-".join(map(str, fanouts))
    return "m" + hashlib.sha256(json.dumps(list(fanouts), sort_keys=True).encode()).hexdigest()[:10]


def resolve_regime(balance: str, train_mode: str | None = None) -> str:
    """The regime whose constraints a partition balances (``partition.balance``: full or sampled,
    ``sylvie.partition.balance``): ``balance`` itself, or for ``auto`` the run's ``train_mode`` (full when there is
    none: ``sylvie partition`` alone)."""
    return (train_mode or "full") if balance == "auto" else balance


def check_sampling(model: ModelConfig, train: TrainConfig, sampling: SamplingConfig, where: str) -> None:
    """Sampled training needs one fanout per model layer."""
    if train.mode == "sampled" and len(sampling.fanouts) != model.layers:
        raise SylvieError(f"{where}: sampling.fanouts has {len(sampling.fanouts)} entries {list(sampling.fanouts)} "
                          f"but model.layers is {model.layers}; give one fanout per layer (DGL's order: input layer "
                          f"first)")


def check_boundary_sampling(train: TrainConfig, comm: CommConfig | None, where: str) -> None:
    """``train.boundary_sampling`` below 1 samples the halo rows of full-graph training: refused with
    ``comm.smoothing``, which blends one epoch's halo rows into the next epoch's, rows that differ from epoch to epoch
    under sampling. (In sampled training, which has no halo exchange: ``TrainConfig`` refuses it.)"""
    p = train.boundary_sampling
    if p >= 1:
        return
    if comm is not None and comm.smoothing > 0:
        raise SylvieError(f"{where}: train.boundary_sampling {p:g} cannot be combined with comm.smoothing "
                          f"{comm.smoothing:g}: smoothing blends each epoch's halo rows into the next epoch's, and "
                          f"under boundary-node sampling every epoch keeps other halo rows. Set comm.smoothing to 0 "
                          f"or train.boundary_sampling to 1")


def check_sampled_link(train: TrainConfig, link: LinkConfig, where: str) -> None:
    """Sampled link training computes every pair end's embedding on its own rank (its input rows fetched at
    ``sampling.remote_bits``): ``link.pair_bits``, how full-graph training fetches pair ends' embeddings, is refused
    there."""
    if train.task == "link" and train.mode == "sampled" and link.pair_bits != 32:
        raise SylvieError(f"{where}: link.pair_bits {link.pair_bits} sets how full-graph training fetches pair ends' "
                          f"embeddings from their owners; sampled training computes every pair end's embedding on its "
                          f"own rank (its input rows fetched at sampling.remote_bits): set link.pair_bits to 32, or "
                          f"train.mode to full")


def check_run(model: ModelConfig, train: TrainConfig, comm: CommConfig, sampling: SamplingConfig, link: LinkConfig,
              where: str) -> None:
    """The rules between a run's sections that the schema does not state: the one check of a config's runs
    (``resolve_runs``, when the pipeline is planned) and of ``sylvie train``'s flags (``run_training``), so that
    the two refuse the same combinations. (The rules within one section: its class's ``__post_init__``, met when
    ``section`` builds it; a dataset's: ``registry.check_dataset``, for the config and ``sylvie download`` alike.)"""
    check_sampling(model, train, sampling, where)
    check_boundary_sampling(train, comm, where)
    check_sampled_link(train, link, where)


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
        dataset = merged.get("dataset", properties("run")["dataset"]["default"])
        if dataset not in config["datasets"]:
            raise SylvieError(f"{where}: invalid value for 'runs.{name}.dataset': '{dataset}' is not a key of "
                              f"datasets ({', '.join(config['datasets'])}); add it under datasets")
        at = f"{where}: runs.{name}"
        run = Run(name=name, dataset=dataset,  # each section its class, in the order of SECTIONS
                  partition=section("partition", merged.get("partition"), where=f"{at}.partition"),
                  model=section("model", merged.get("model"), where=f"{at}.model"),
                  train=section("train", merged.get("train"), where=f"{at}.train"),
                  comm=section("comm", merged.get("comm"), where=f"{at}.comm"),
                  sampling=section("sampling", merged.get("sampling"), where=f"{at}.sampling"),
                  cache=section("cache", merged.get("cache"), where=f"{at}.cache"),
                  features=section("features", merged.get("features"), where=f"{at}.features"),
                  link=section("link", merged.get("link"), where=f"{at}.link"),
                  evaluate=section("evaluate", merged.get("evaluate"), where=f"{at}.evaluate"))
        mode = run.train.mode
        ignored = [s for s in OTHER_MODE_SECTIONS[mode] if (override or {}).get(s)]
        if ignored:
            other = "sampled" if mode == "full" else "full"
            names = {"full": "full-graph", "sampled": "sampled"}
            raise SylvieError(f"{where}: runs.{name}.{ignored[0]}: a setting of {names[other]} training (train.mode "
                              f"{other}), which this run (train.mode {mode}) ignores; remove runs.{name}.{ignored[0]} "
                              f"or set runs.{name}.train.mode to {other}")
        check_run(run.model, run.train, run.comm, run.sampling, run.link, at)
        if run.train.task == "link":
            _check_link_dataset(config["datasets"][dataset] or {}, dataset, f"{at}.train.task")
        # balance auto: the constraints of the run's regime
        runs[name] = dataclasses.replace(run, partition=dataclasses.replace(
            run.partition, balance=resolve_regime(run.partition.balance, mode)))
    return runs


def _check_link_dataset(options: dict, dataset: str, where: str) -> None:
    """A link-prediction run's dataset gives an edge split (drawn, or the user's own, OGB's for ogbl-*, or the
    citation structure's own, which its generator holds out), else a SylvieError naming ``where`` (the run's
    train.task) and the dataset."""
    given = (options.get("edge_split") or options.get("edge_split_column")
             or (options.get("val_edges") and options.get("test_edges")))
    options = with_preset("dataset", options)  # a preset's knobs (its structure) where the options name one
    own_split = (options.get("name") or dataset).startswith("ogbl-") or options.get("structure") == "citation"
    if not given and not own_split:
        raise SylvieError(f"{where}: link prediction needs an edge split, and dataset '{dataset}' gives none; set "
                          f"datasets.{dataset}.edge_split (e.g. [0.05, 0.1]: shares of the edges held out for "
                          f"validation and test), or for files edge_split_column or val_edges and test_edges; or "
                          f"set train.task: node")


def dataset_options(config: dict, name: str) -> DatasetConfig:
    """Options of dataset ``name`` (a ``DatasetConfig``), defaults filled in."""
    config = validate(config)
    if name not in config["datasets"]:
        raise SylvieError(f"config: unknown dataset '{name}'; datasets has {', '.join(config['datasets'])}")
    return section("dataset", config["datasets"][name], where=f"config: datasets.{name}")


# ---- section classes ------------------------------------------------------------------------------

@overload
def section(name: Literal["partition"], values: SectionValues = None, where: str | None = None) -> PartitionConfig: ...
@overload
def section(name: Literal["model"], values: SectionValues = None, where: str | None = None) -> ModelConfig: ...
@overload
def section(name: Literal["train"], values: SectionValues = None, where: str | None = None) -> TrainConfig: ...
@overload
def section(name: Literal["comm"], values: SectionValues = None, where: str | None = None) -> CommConfig: ...
@overload
def section(name: Literal["sampling"], values: SectionValues = None, where: str | None = None) -> SamplingConfig: ...
@overload
def section(name: Literal["cache"], values: SectionValues = None, where: str | None = None) -> CacheConfig: ...
@overload
def section(name: Literal["features"], values: SectionValues = None, where: str | None = None) -> FeaturesConfig: ...
@overload
def section(name: Literal["link"], values: SectionValues = None, where: str | None = None) -> LinkConfig: ...
@overload
def section(name: Literal["evaluate"], values: SectionValues = None, where: str | None = None) -> EvaluateConfig: ...
@overload
def section(name: Literal["dataset"], values: SectionValues = None, where: str | None = None) -> DatasetConfig: ...
@overload
def section(name: str, values: SectionValues = None, where: str | None = None) -> Section: ...


def section(name: str, values: SectionValues = None, where: str | None = None) -> Section:
    """Section ``name`` as its frozen dataclass (``SECTION_CLASSES``): ``values`` (a mapping, or already a section)
    validated against the schema, a preset's knobs and the defaults filled in, and checked by the class's rules
    between its knobs."""
    if dataclasses.is_dataclass(values):
        values = dataclasses.asdict(values)
    values = {k: v for k, v in (values or {}).items() if v is not None}  # unset: the default
    node = {k: v for k, v in {**schema()["$defs"][name], "$defs": schema()["$defs"]}.items() if k != "default"}
    _raise_invalid(values, node, where or f"{name} settings")
    preset = with_preset(name, values)
    if preset != values:  # the preset's own knobs, checked as the user's are
        _raise_invalid(preset, node, where or f"{name} settings")
    try:
        return SECTION_CLASSES[name](**preset)
    except SectionRuleError as e:
        # the rule names its knobs in full (train.divergence_factor): said where the section lies, not in it
        raise SylvieError(f"{(where or f'{name} settings').removesuffix('.' + name)}: {e}") from None


def with_preset(name: str, values: dict) -> dict:
    """``values`` over the knobs of the preset they name (``preset``, where section ``name`` has presets: the
    schema's ``x-presets``), which stand in for the schema's defaults: a knob set explicitly wins."""
    presets = schema()["$defs"][name].get("x-presets", {})
    return {**presets.get(values.get("preset"), {}), **values}


def as_dict(cfg: Section | Mapping[str, Any]) -> dict:
    """A section's knobs as a plain dict (for files and CLI flags)."""
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)


def resumable_keys(name: str) -> tuple[str, ...]:
    """Knobs of section ``name`` that may change between a run and its resumption (``resumable: true`` in the
    schema, next to the knob)."""
    return tuple(k for k, spec in properties(name).items() if spec.get("resumable"))


def top_level_properties(name: str) -> dict:
    """The knobs of a top-level section that is not a run section (``launch``, ``report``)."""
    return schema()["properties"][name]["properties"]


# ---- CLI flags from the schema -------------------------------------------------------------------

def _example(spec: dict) -> str:
    """An object knob's example as JSON (the schema's first ``examples``; {} where it gives none)."""
    return json.dumps((spec.get("examples") or [{}])[0])


def _json_object_for(spec: dict):
    """The type of an object knob's flag (or of an object item's): a JSON object, a malformed one refused with the
    knob's own example (the schema's ``examples``)."""
    example = _example(spec)

    def json_object(text: str) -> dict:
        try:
            value = json.loads(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"not JSON ({e}): give an object, e.g. '{example}'") from None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"{text!r} is a JSON {type(value).__name__}, not an object, e.g. "
                                             f"'{example}'")
        return value

    return json_object


_TYPES = {"integer": int, "number": float, "string": str}


def _flag_type(spec: dict):
    """The argparse type of a knob (or item) of this schema node: a JSON object for an object, an integer or a
    JSON object where it may be either (``--fanouts 15 '{"cites": 10, "writes": 5}' 5``)."""
    kinds = spec.get("type") or [k["type"] for k in spec.get("oneOf", [])]
    kinds = kinds if isinstance(kinds, list) else [kinds]
    kinds = [k for k in kinds if k != "null"]
    if sorted(kinds) == ["integer", "object"]:
        alternative = next(k for k in spec["oneOf"] if k["type"] == "object")
        objects = _json_object_for(alternative)
        example = _example(alternative)

        def integer_or_object(text: str) -> int | dict:
            if text.lstrip().startswith("{"):
                return objects(text)
            try:
                return int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r} is neither an integer nor a JSON object, e.g. 10 or "
                                                 f"'{example}'") from None

        return integer_or_object
    return _json_object_for(spec) if kinds[0] == "object" else _TYPES[kinds[0]]


_GIVEN = "_given_flags"  # attribute of the parsed arguments: dest -> the option string the user wrote


def _note_given(namespace: argparse.Namespace, dest: str, option_string: str | None) -> None:
    setattr(namespace, _GIVEN, {**getattr(namespace, _GIVEN, {}), dest: option_string})


class _Store(argparse.Action):
    """argparse's store, remembering that the flag was given (its default is the schema's either way)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        _note_given(namespace, self.dest, option_string)


class _BooleanOptional(argparse.BooleanOptionalAction):
    """``--flag`` / ``--no-flag``, remembering that one was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        _note_given(namespace, self.dest, option_string)


def given_flags(args: argparse.Namespace, section: str) -> dict[str, str]:
    """The knobs of ``section`` the user set on the command line (not left at their defaults): knob -> flag as
    written (``--no-pipeline``)."""
    prefix = section + "."
    return {k[len(prefix):]: flag for k, flag in getattr(args, _GIVEN, {}).items() if k.startswith(prefix)}


def add_section_arguments(parser: argparse.ArgumentParser, section: str, skip: tuple[str, ...] = (),
                          knobs: dict | None = None) -> None:
    """One ``--flag`` per knob of ``section`` (or of ``knobs``), with the schema's default, type, choices and
    description; the flags the user gives are noted (``given_flags``)."""
    group = parser.add_argument_group(f"{section} settings")
    for key, spec in (knobs or properties(section)).items():
        if key in skip:
            continue
        flag = "--" + key.replace("_", "-")
        kind = spec["type"][0] if isinstance(spec["type"], list) else spec["type"]
        help_text = spec.get("description", "").replace("%", "%%")  # argparse formats help with %
        kwargs = {"dest": f"{section}.{key}", "default": spec.get("default"), "help": help_text}
        if kind == "boolean":
            group.add_argument(flag, action=_BooleanOptional, **kwargs)
        elif kind == "array":  # e.g. --fanouts 15 10 5
            group.add_argument(flag, action=_Store, type=_flag_type(spec["items"]), nargs="+",
                               metavar=key.upper(), **kwargs)
        else:
            metavar = None if "enum" in spec else key.upper()  # choices show themselves
            group.add_argument(flag, action=_Store, type=_flag_type(spec), choices=spec.get("enum"), metavar=metavar,
                               **kwargs)


_Skip = tuple[str, ...]


@overload
def section_from_args(args: argparse.Namespace, name: Literal["partition"], skip: _Skip = ()) -> PartitionConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["model"], skip: _Skip = ()) -> ModelConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["train"], skip: _Skip = ()) -> TrainConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["comm"], skip: _Skip = ()) -> CommConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["sampling"], skip: _Skip = ()) -> SamplingConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["cache"], skip: _Skip = ()) -> CacheConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["features"], skip: _Skip = ()) -> FeaturesConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["link"], skip: _Skip = ()) -> LinkConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: Literal["dataset"], skip: _Skip = ()) -> DatasetConfig: ...
@overload
def section_from_args(args: argparse.Namespace, name: str, skip: _Skip = ()) -> Section: ...


def section_from_args(args: argparse.Namespace, name: str, skip: tuple[str, ...] = ()) -> Section:
    """Section ``name`` (its class) from parsed arguments, validated against the schema; ``skip``: knobs that are not
    flags of this command (they keep their defaults)."""
    prefix = name + "."
    given = given_flags(args, name)
    defaults = {k: spec.get("default") for k, spec in properties(name).items()}
    # a knob left at its default is left out, so that a preset's value stands in for it
    values = {k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix)}
    values = {k: v for k, v in values.items() if k not in skip and (k in given or v != defaults.get(k))}
    return section(name, values, where=f"sylvie {name} options")


def check_item(name: str, key: str, value, where: str, field: str) -> None:
    """``value`` checked as one item of the array knob ``key`` of section ``name`` (``sylvie train --seed`` is one
    of train.seeds); ``field`` names it in the error."""
    _raise_invalid(value, properties(name)[key]["items"], where, field=field)


def cli_arguments(section: str, values, skip: tuple[str, ...] = ()) -> str:
    """The flags that reproduce ``values`` (a section or a mapping) on the command line (inverse of
    add_section_arguments)."""
    values = as_dict(values)
    out = []
    for key in properties(section):
        if key in skip or key not in values or values[key] is None:
            continue
        flag = "--" + key.replace("_", "-")
        v = values[key]
        if isinstance(v, bool):
            out.append(flag if v else "--no-" + key.replace("_", "-"))
        elif isinstance(v, list):  # items that are objects (a typed graph's relations) as JSON, as they are read
            out += [flag, *(json.dumps(x) if isinstance(x, dict) else str(x) for x in v)]
        elif isinstance(v, dict):
            if v:  # {} is every object knob's default
                out += [flag, json.dumps(v)]
        else:
            out += [flag, str(v)]
    return shlex.join(out)


# ---- the schema for editors ------------------------------------------------------------------------

def editor_schema() -> dict:
    """The schema as JSON Schema of one config file, for editors (a config file's first line,
    ``# yaml-language-server: $schema=...``, points VS Code's YAML extension at ``config.schema.json``): the YAML
    schema less its top-level ``required``, since a file given after another to Snakemake (``--configfile a.yaml
    b.yaml``, merged in order) may leave ``runs`` to the first."""
    out = copy.deepcopy(schema())
    out.pop("required", None)
    return {"$comment": "Generated from config.schema.yaml by `python -m sylvie.config --write-json-schema`; edit that "
                        "file, then rerun the command.", **out}


def editor_schema_text() -> str:
    return json.dumps(editor_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m sylvie.config --write-json-schema``: (re)write ``sylvie/schema/config.schema.json`` from the YAML
    schema."""
    parser = argparse.ArgumentParser(prog="python -m sylvie.config", description=main.__doc__)
    parser.add_argument("--write-json-schema", action="store_true", required=True,
                        help=f"write {JSON_SCHEMA_PATH.name} beside {SCHEMA_PATH.name}")
    parser.parse_args(argv)
    JSON_SCHEMA_PATH.write_text(editor_schema_text())
    print(f"wrote {JSON_SCHEMA_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
