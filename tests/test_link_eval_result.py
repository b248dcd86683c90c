"""eval.json of a link-prediction run (sylvie/formats/eval_result.py): the task, the ranking metrics per split under
``link``, each split's headline (MRR, else Hits@50) as its ``{split}_acc``; a round trip gives back what was written,
a file from before the task (no ``task``) reads as node classification, and an edited one is refused."""
import json
import math
import re

import pytest

from sylvie.errors import SylvieError
from sylvie.formats import eval_result
from sylvie.formats.checksum import with_checksum
from sylvie.formats.eval_result import (
    EvalResult,
    foreign,
    headline,
    link_accuracies,
    read_eval_result,
    write_eval_result,
)

pytestmark = pytest.mark.unit

PER_PAIR = {"val": {"mrr": 0.41, "hits@1": 0.3, "hits@10": 0.62, "hits@50": 0.8, "hits@100": 0.9, "auc": 0.93},
            "test": {"mrr": 0.39, "hits@1": 0.28, "hits@10": 0.6, "hits@50": 0.79, "hits@100": 0.88, "auc": 0.92}}
SHARED = {"val": {"hits@10": 0.2, "hits@50": 0.45, "hits@100": 0.6, "auc": 0.95},
          "test": {"hits@10": math.nan, "hits@50": math.nan, "hits@100": math.nan, "auc": math.nan}}  # no pairs


def _link(link=PER_PAIR, **changes) -> EvalResult:
    fields = dict(dataset="ogbl-citation2", evaluator="ogb", inference="whole graph, one process",
                  accuracies=link_accuracies(link) if link is not None else None,
                  model={"arch": "sage"}, train={"seed": 1, "task": "link"},
                  summary={"best_epoch": 4, "num_parts": 2}, comm={"bits": 1, "pipeline": True}, task="link",
                  link_cfg={"decoder": "dot", "negatives": 1},
                  link=link)
    return EvalResult(**{**fields, **changes})


def _node(**changes) -> EvalResult:
    fields = dict(dataset="cora", evaluator="accuracy", inference="whole graph, one process",
                  accuracies={"train": 0.9, "val": 0.8, "test": 0.7}, model={"arch": "gcn"}, train={"seed": 0},
                  summary={"best_epoch": 3, "num_parts": 4}, comm={"bits": 8, "pipeline": False})
    return EvalResult(**{**fields, **changes})


def _same_metrics(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[s].keys() == b[s].keys() and all(x == y or (math.isnan(x) and math.isnan(y))
                                           for x, y in zip(a[s].values(), b[s].values())) for s in a)


def test_headline_is_mrr_else_hits_at_50():
    assert headline(PER_PAIR["val"]) == 0.41 and headline(SHARED["val"]) == 0.45
    assert math.isnan(headline({"hits@10": 0.5, "auc": 0.9}))
    acc = link_accuracies(PER_PAIR)
    assert math.isnan(acc["train"]) and (acc["val"], acc["test"]) == (0.41, 0.39)  # the train split is not ranked


@pytest.mark.parametrize("link", [PER_PAIR, SHARED], ids=["per-pair", "shared"])
def test_a_link_eval_json_round_trips(tmp_path, link):
    written = write_eval_result(tmp_path / "eval.json", _link(link))
    on_disk = json.loads((tmp_path / "eval.json").read_text())
    assert list(on_disk)[:4] == ["format_version", "dataset", "task", "evaluator"] and on_disk["task"] == "link"
    assert on_disk["format_version"] == eval_result.FORMAT_VERSION == 1  # old files stay readable: no new version
    assert on_disk["train_acc"] is None  # not ranked
    assert on_disk["val_acc"] == link["val"].get("mrr", link["val"]["hits@50"])  # the headline, for older readers
    assert list(on_disk["link"]) == ["val", "test"] and list(on_disk["link"]["val"]) == list(link["val"])
    assert on_disk["link_cfg"] == {"decoder": "dot", "negatives": 1}  # the run's link section, beside the metrics
    if link is SHARED:
        assert on_disk["test_acc"] is None and on_disk["link"]["test"]["auc"] is None  # no pairs: null
        assert "mrr" not in on_disk["link"]["val"]
    assert written["link"] is link
    back = read_eval_result(tmp_path / "eval.json")
    assert back.task == "link" and _same_metrics(back.link, link) and back.num_parts == 2
    assert back == _link(back.link, accuracies=back.accuracies)
    assert foreign(tmp_path / "eval.json") is None  # evaluate may replace it


def test_a_node_eval_json_says_its_task_and_has_no_link(tmp_path):
    write_eval_result(tmp_path / "eval.json", _node())
    on_disk = json.loads((tmp_path / "eval.json").read_text())
    assert on_disk["task"] == "node" and "link" not in on_disk and "link_cfg" not in on_disk
    back = read_eval_result(tmp_path / "eval.json")
    assert back == _node() and back.task == "node" and back.link is None


def test_an_eval_json_from_before_the_task_reads_as_node_classification(tmp_path):
    """As the writer before link prediction wrote it: the same fields without ``task``, sealed by its checksum."""
    write_eval_result(tmp_path / "eval.json", _node())
    old = {k: v for k, v in json.loads((tmp_path / "eval.json").read_text()).items() if k not in ("task", "checksum")}
    (tmp_path / "eval.json").write_text(json.dumps(with_checksum(old), indent=2))
    back = read_eval_result(tmp_path / "eval.json")
    assert back.task == "node" and back.link is None and back == _node()
    assert "task" not in back.summary


@pytest.mark.parametrize("edit", [
    lambda d: d["link"]["test"].update(mrr=0.99),
    lambda d: d.update(test_acc=0.99),
    lambda d: d.update(task="node"),
    lambda d: d.pop("link"),
], ids=["a metric", "the headline", "the task", "the link metrics removed"])
def test_an_edited_link_eval_json_is_refused(tmp_path, edit):
    write_eval_result(tmp_path / "eval.json", _link())
    content = json.loads((tmp_path / "eval.json").read_text())
    edit(content)
    (tmp_path / "eval.json").write_text(json.dumps(content))
    with pytest.raises(SylvieError) as e:
        read_eval_result(tmp_path / "eval.json")
    said = str(e.value)
    assert said.startswith(f"{tmp_path / 'eval.json'}: ") and said.endswith("rerun `sylvie evaluate` (it writes "
                                                                            "eval.json)"), said
    assert "was changed after" in said or "no 'link'" in said, said


@pytest.mark.parametrize("content, problem", [
    ({"task": "graph"}, "'task': 'graph' is not one of ['node', 'link']"),
    ({"link": {"val": {"mrr": "high"}}}, "'link.val.mrr' is \"high\", not a number"),
    ({"link": {"val": {"recall": 0.5}}}, "'link.val'"),
    ({"link": {"validation": {}}}, "'link'"),
], ids=["unknown task", "a metric a word", "an unknown metric", "an unknown split"])
def test_a_link_eval_json_not_of_its_fields_is_named(tmp_path, content, problem):
    write_eval_result(tmp_path / "eval.json", _link())
    d = {**json.loads((tmp_path / "eval.json").read_text()), **content}
    (tmp_path / "eval.json").write_text(json.dumps(d))
    with pytest.raises(SylvieError, match=re.escape(problem)):
        read_eval_result(tmp_path / "eval.json")
    assert foreign(tmp_path / "eval.json") == "not of its fields"


def test_a_link_result_is_consistent_or_not_made():
    with pytest.raises(ValueError, match="task 'edge'"):
        _node(task="edge")
    with pytest.raises(ValueError, match="link metrics for a link run"):
        _node(link=PER_PAIR)
    with pytest.raises(ValueError, match="link metrics for a link run"):
        _link(link=None, accuracies=link_accuracies(PER_PAIR))
    with pytest.raises(ValueError, match=re.escape("link_accuracies(link)")):
        _link(accuracies={"train": math.nan, "val": 0.8, "test": 0.39})  # val_acc not the validation MRR
    with pytest.raises(ValueError, match="metrics mrr, auc and hits@K"):
        _link(link={"val": {"precision": 0.3}}, accuracies={"train": math.nan, "val": math.nan, "test": math.nan})
    with pytest.raises(ValueError, match="would overwrite eval.json's own fields"):
        _link(summary={"num_parts": 1, "link": {}}).content()
