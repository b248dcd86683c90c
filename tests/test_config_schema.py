"""The configuration has one schema (sylvie/schema/config.schema.yaml) and checked-in classes, one per section
(sylvie/config_sections.py, sylvie/config_dataset.py); they are kept equal here: every knob's type, enum, default,
description, bounds and ``resumable`` flag. Editors read the JSON copy of the schema (config.schema.json), which must
be up to date, and which every config file names on its first line and satisfies."""
import copy
import dataclasses
import json
import types
import typing
from pathlib import Path

import jsonschema
import pytest
from support.commands import REPO

from sylvie.config import (
    JSON_SCHEMA_PATH,
    SECTION_CLASSES,
    SECTIONS,
    editor_schema,
    editor_schema_text,
    properties,
    resumable_keys,
    schema,
    section,
)
from sylvie.config_file import load_config
from sylvie.config_sections import SectionRuleError, TrainConfig
from sylvie.errors import SylvieError

pytestmark = pytest.mark.unit

BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
_KINDS = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _shape_of_type(tp) -> str:
    """A Python annotation in words a JSON Schema node also gives (``_shape_of_node``): ``integer``,
    ``string|null``, ``string enum ['full', 'sampled']``, ``array<integer|object<integer>>``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "null"
    if tp is typing.Any:
        return "any"
    if tp in _KINDS:
        return _KINDS[tp]
    if origin is typing.Literal:
        kinds = {_KINDS[type(a)] for a in args}
        assert len(kinds) == 1, tp
        return f"{kinds.pop()} enum {list(args)}"
    if origin in (typing.Union, types.UnionType):
        return "|".join(sorted(_shape_of_type(a) for a in args))
    if origin is list:
        return f"array<{_shape_of_type(args[0])}>"
    if origin is dict:
        assert args[0] is str, tp
        return f"object<{_shape_of_type(args[1])}>"
    raise AssertionError(f"{tp}: no JSON Schema type for it")


def _shape_of_node(node: dict) -> str:
    if "oneOf" in node:
        return "|".join(sorted(_shape_of_node(n) for n in node["oneOf"]))
    kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
    out = []
    for kind in kinds:
        if kind == "null":
            out.append("null")
        elif "enum" in node:
            out.append(f"{kind} enum {node['enum']}")
        elif kind == "array":
            out.append(f"array<{_shape_of_node(node['items'])}>")
        elif kind == "object":
            values = node.get("additionalProperties")
            if isinstance(values, dict):
                out.append(f"object<{_shape_of_node(values)}>")
            else:  # an object of named properties: of one type, or of any
                shapes = {_shape_of_node(n) for n in node.get("properties", {}).values()}
                out.append(f"object<{shapes.pop() if len(shapes) == 1 else 'any'}>")
        else:
            out.append(kind)
    return "|".join(sorted(out))


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _exact(value) -> str:
    """A value with its types (10 is not 10.0 here: a default's type reaches the command lines and files)."""
    return json.dumps(value, sort_keys=True)


def differences(cls: type, knobs: dict) -> list[str]:
    """Where class ``cls`` and the schema's ``knobs`` (a section's properties) disagree, one line each."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    out = [f"{k}: in the schema, not a field of {cls.__name__}" for k in knobs if k not in fields]
    out += [f"{k}: a field of {cls.__name__}, not in the schema" for k in fields if k not in knobs]
    if not out and list(fields) != list(knobs):
        out.append(f"the fields' order {list(fields)} is not the schema's {list(knobs)}")
    for key in [k for k in knobs if k in fields]:
        spec, f = knobs[key], fields[key]
        node_shape, field_shape = _shape_of_node(spec), _shape_of_type(hints[key])
        if "default" not in spec:  # the section leaves it unset (a dataset's source: inferred from its name)
            node_shape = "|".join(sorted({*node_shape.split("|"), "null"}))
            if _default(f) is not None:
                out.append(f"{key}: the schema has no default, so the field's must be None, not {_default(f)!r}")
        elif _exact(_default(f)) != _exact(spec["default"]):
            out.append(f"{key}: default {_exact(_default(f))} in the class, {_exact(spec['default'])} in the schema")
        if field_shape != node_shape:
            out.append(f"{key}: type {field_shape} in the class, {node_shape} in the schema")
        if f.metadata.get("description") != spec.get("description"):
            out.append(f"{key}: the descriptions differ:\n  class:  {f.metadata.get('description')!r}\n"
                       f"  schema: {spec.get('description')!r}")
        ours = {b: f.metadata[b] for b in BOUNDS if b in f.metadata}
        theirs = {b: spec[b] for b in BOUNDS if b in spec}
        if _exact(ours) != _exact(theirs):
            out.append(f"{key}: bounds {ours} in the class, {theirs} in the schema")
        if bool(f.metadata.get("resumable")) != bool(spec.get("resumable")):
            out.append(f"{key}: resumable {bool(f.metadata.get('resumable'))} in the class, "
                       f"{bool(spec.get('resumable'))} in the schema")
    return out


def test_every_section_of_the_schema_has_its_class():
    sections = {k for k in schema()["$defs"] if k != "run"}
    assert set(SECTION_CLASSES) == sections
    assert set(properties("run")) - {"dataset"} == set(SECTIONS)


@pytest.mark.parametrize("name", sorted(SECTION_CLASSES))
def test_each_class_says_what_the_schema_says(name):
    cls = SECTION_CLASSES[name]
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    found = differences(cls, properties(name))
    assert not found, (f"{cls.__module__}.{cls.__name__} and sylvie/schema/config.schema.yaml ($defs.{name}) "
                       f"disagree; change both alike:\n" + "\n".join(found))


@pytest.mark.parametrize("change, said", [
    (lambda k: k["lr"].update(default=0.1), "lr: default 0.01 in the class, 0.1 in the schema"),
    (lambda k: k["epochs"].update(default=200.0), "epochs: default 200 in the class, 200.0 in the schema"),
    (lambda k: k["lr"].update(type=["number", "null"]), "lr: type number in the class, null|number in the schema"),
    (lambda k: k["mode"]["enum"].append("hybrid"), "mode: type string enum ['full', 'sampled'] in the class, "
                                                    "string enum ['full', 'sampled', 'hybrid'] in the schema"),
    (lambda k: k["seeds"]["items"].update(type="number"), "seeds: type array<integer> in the class, "
                                                           "array<number> in the schema"),
    (lambda k: k["lr"].update(description="the learning rate"), "lr: the descriptions differ"),
    (lambda k: k["lr"].update(exclusiveMinimum=0.0), "lr: bounds {'exclusiveMinimum': 0} in the class, "
                                                      "{'exclusiveMinimum': 0.0} in the schema"),
    (lambda k: k["warmup_epochs"].pop("maximum"), "warmup_epochs: bounds {'minimum': 0, 'maximum': 2147483647} in "
                                                   "the class, {'minimum': 0} in the schema"),
    (lambda k: k["timeout"].update(resumable=True), "timeout: resumable False in the class, True in the schema"),
    (lambda k: k.update(momentum={"type": "number", "default": 0.9}), "momentum: in the schema, not a field"),
    (lambda k: k.pop("tensorboard"), "tensorboard: a field of TrainConfig, not in the schema"),
    (lambda k: k.update({"lr": k.pop("lr")}), "the fields' order"),
], ids=["default", "default-type", "nullable", "enum", "items", "description", "bound-type", "bound", "resumable",
        "knob-added", "knob-removed", "order"])
def test_a_disagreement_is_found(change, said):
    """The comparison fails on each way a class and the schema can part: each change of the schema's train knobs
    (which the class does not follow) is named."""
    knobs = copy.deepcopy(properties("train"))
    change(knobs)
    found = differences(TrainConfig, knobs)
    assert any(line.startswith(said) for line in found), found


def test_a_field_that_differs_from_the_schema_is_found():
    """The other side: a class whose field parts from its knob."""
    @dataclasses.dataclass(frozen=True)
    class Partial:
        method: typing.Literal["metis", "random", "kahip"] = dataclasses.field(
            default="metis", metadata={"description": "partitioner"})

    found = differences(Partial, {"method": properties("partition")["method"]})
    assert found == ["method: type string enum ['metis', 'random', 'kahip'] in the class, string enum "
                     "['metis', 'random'] in the schema"]


def test_resumable_knobs_are_the_fields_said_resumable():
    for name, cls in SECTION_CLASSES.items():
        assert resumable_keys(name) == tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("resumable"))


def test_section_returns_the_checked_in_class_with_the_schemas_defaults_and_presets():
    for name, cls in SECTION_CLASSES.items():
        built = section(name)
        assert type(built) is cls
        assert built == cls()  # the class's defaults are the schema's
    products = section("dataset", {"preset": "products", "nodes": 5000})
    assert (products.nodes, products.structure, products.classes) == (5000, "nested", 47)  # a preset's knobs win
    assert section("train", section("train", {"lr": 0.5})).lr == 0.5  # a section passes through


def test_a_rule_within_one_section_is_the_classes_and_names_where_the_section_was_given():
    with pytest.raises(SectionRuleError, match=r"^train.divergence_factor 0.5: must be above 1"):
        TrainConfig(divergence_factor=0.5)
    with pytest.raises(SectionRuleError, match=r"^train.boundary_sampling is 0.5, but boundary-node sampling"):
        TrainConfig(mode="sampled", boundary_sampling=0.5)
    with pytest.raises(SylvieError, match=r"^config: runs.a: train.divergence_factor 1: must be above 1"):
        section("train", {"divergence_factor": 1}, where="config: runs.a.train")
    with pytest.raises(SylvieError, match=r"^train settings: train.divergence_factor 0.5"):
        section("train", {"divergence_factor": 0.5})
    assert TrainConfig(divergence_factor=0).divergence_factor == 0  # 0: the check is off
    assert TrainConfig(mode="sampled", boundary_sampling=1).mode == "sampled"  # 1: boundary sampling is off


def test_the_train_commands_flags_are_the_classes_fields():
    """The flags come from the schema (one source), so they are the classes' fields, with their descriptions."""
    from sylvie.cli import build_parser

    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "train")[1]
    flags = {a.dest: a for a in train._actions if "." in a.dest}
    wanted = {f"{name}.{f.name}": f for name in ("model", "train", "comm", "sampling", "cache", "features", "link")
              for f in dataclasses.fields(SECTION_CLASSES[name]) if (name, f.name) != ("train", "seeds")}
    assert set(flags) == set(wanted)
    for dest, action in flags.items():
        assert action.help.replace("%%", "%") == wanted[dest].metadata["description"], dest
        assert _exact(action.default) == _exact(_default(wanted[dest])), dest


# ---- the JSON Schema editors read --------------------------------------------------------------------------

CONFIG_FILES = sorted([*(REPO / "config").glob("*.yaml"), *(REPO / "tests" / "configs").glob("*.yaml")])
MODELINE = "# yaml-language-server: $schema="


def test_the_json_schema_is_up_to_date():
    assert JSON_SCHEMA_PATH.read_text() == editor_schema_text(), (
        f"{JSON_SCHEMA_PATH} is not config.schema.yaml's; run: python -m sylvie.config --write-json-schema")


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[str(p.relative_to(REPO)) for p in CONFIG_FILES])
def test_a_config_file_names_the_json_schema_and_satisfies_it(path: Path):
    first = path.read_text().splitlines()[0]
    assert first.startswith(MODELINE), f"{path}: the first line must be {MODELINE}<relative path to the JSON schema>"
    assert (path.parent / first.removeprefix(MODELINE)).resolve() == JSON_SCHEMA_PATH.resolve()
    config = load_config(path)
    # as the file says it (2020-12), and as an editor that knows draft 7 only reads it
    for validator in (jsonschema.Draft202012Validator, jsonschema.Draft7Validator):
        errors = list(validator(editor_schema()).iter_errors(config))
        assert not errors, f"{path}: {errors[0].message} at {'.'.join(map(str, errors[0].absolute_path))}"


@pytest.mark.parametrize("config, where", [
    ({"runs": {"a": {"train": {"lr": 0}}}}, "runs.a.train.lr"),
    ({"runs": {"a": {"model": {"arch": "gin"}}}}, "runs.a.model.arch"),
    ({"defaults": {"sampling": {"fanouts": [{"cites": 0}]}}}, "defaults.sampling.fanouts.0"),
    ({"datasets": {"d": {"source": "synthetic", "nodes": 1}}}, "datasets.d.nodes"),
    ({"launch": {"allocator": "jemalloc"}}, "launch.allocator"),
    ({"runs": {"a": {"train": {"learning_rate": 0.1}}}}, "runs.a.train"),
], ids=["bound", "enum", "one-of", "dataset", "launch", "unknown-knob"])
def test_the_json_schema_refuses_what_the_pipeline_refuses(config, where):
    for validator in (jsonschema.Draft202012Validator, jsonschema.Draft7Validator):
        errors = list(validator(editor_schema()).iter_errors(config))
        assert where in {".".join(map(str, e.absolute_path)) for e in errors}, (validator, errors)
