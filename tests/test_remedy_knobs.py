"""A refusal's remedy names the knob that would help (issue 70, class H): a malformed JSON flag is answered with
that knob's own example (the schema's ``examples``), and a model too large for memory with the knob of its larger
term (the layers' width, or the learnt embeddings' width)."""
import json

import pytest

from sylvie import memory_budget
from sylvie.cli import build_parser

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("command", "flag", "knob"), [
    (["download", "x", "--out", "o"], "--node-tables", ("dataset", "node_tables")),
    (["download", "x", "--out", "o"], "--relations", ("dataset", "relations", "items")),
    (["download", "x", "--out", "o"], "--relation-homophily", ("dataset", "relation_homophily")),
    (["train", "--partition", "p", "--out", "o"], "--optimizer-args", ("train", "optimizer_args")),
    (["train", "--partition", "p", "--out", "o"], "--lr-schedule-args", ("train", "lr_schedule_args")),
    (["train", "--partition", "p", "--out", "o"], "--fanouts", ("sampling", "fanouts", "items", "oneOf", 1)),
])
@pytest.mark.parametrize("text", ["{paper: x}", "[1, 2]"])
def test_a_malformed_json_flag_gets_its_own_knobs_example(capsys, command, flag, knob, text):
    from sylvie.config import properties

    node = properties(knob[0])[knob[1]]
    for step in knob[2:]:
        node = node[step]
    example = json.dumps(node["examples"][0])
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*command, flag, text])
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"sylvie {command[0]}: error: argument {flag}: ") and f"'{example}'" in last, last
    assert ("momentum" in last) == (flag == "--optimizer-args"), last


@pytest.mark.parametrize(("values", "knob"), [
    ({"hidden": 100_000, "layers": 3}, "lower model.hidden (or heads, layers)"),
    ({"embedding_width": 2_000_000_000}, "lower model.embedding_width"),
])
def test_a_model_too_large_is_answered_with_the_knob_of_its_larger_term(small_mag_partitions, monkeypatch, values,
                                                                         knob):
    from sylvie.config import section
    from sylvie.errors import SylvieError
    from sylvie.formats.partition_manifest import read_manifest
    from sylvie.train.memory_need import check_training_fits

    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 12 * 10**9)
    model = section("model", {"arch": "rgcn", **values})
    with pytest.raises(SylvieError) as e:
        check_training_fits(model, read_manifest(small_mag_partitions[2]), 0, sampled=True)
    assert knob in str(e.value), str(e.value)
