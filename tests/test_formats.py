"""Each on-disk format's module writes and reads it: a round trip gives back what was written, and a file of another
version (or, where the format says so, of none) is a clear error naming the file and what to do."""
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from sylvie.errors import SylvieError
from sylvie.formats import eval_result, model_file, partition_manifest, vip_file
from sylvie.formats.eval_result import EvalResult, read_eval_result, write_eval_result
from sylvie.formats.model_file import ModelFile, load_model, save_model
from sylvie.formats.partition_manifest import manifest_checksum, read_manifest, write_manifest
from sylvie.formats.predictions import read_predictions, write_predictions
from sylvie.formats.recognise import looks_like
from sylvie.formats.splits import SPLITS
from sylvie.formats.vip_file import read_vip, write_vip_analysis
from sylvie.output_dir import identify

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "sylvie"


def _edit_json(path: Path, **changes) -> None:
    """Change fields of a JSON file; a field changed to None is removed."""
    d = {**json.loads(path.read_text()), **changes}
    path.write_text(json.dumps({k: v for k, v in d.items() if k not in changes or v is not None}))


# ---- the split names ---------------------------------------------------------------------------------------------

def test_the_split_names_are_defined_once():
    literal = re.compile(r"""\(\s*(["'])train\1\s*,\s*(["'])val\2\s*,\s*(["'])test\3\s*\)""")
    elsewhere = [str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
                 if p.name != "splits.py" and literal.search(p.read_text())]
    assert SPLITS == ("train", "val", "test") and elsewhere == []


# ---- VIP analysis ------------------------------------------------------------------------------------------------

def _vip_dir(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    arrays = [np.linspace(0, 1, 7), np.linspace(1, 0, 7)]
    d = tmp_path / "vip"
    d.mkdir()
    m = write_vip_analysis(d, [10, 5], 32, "abc", ((a, 16.5) for a in arrays))
    assert m["format_version"] == vip_file.FORMAT_VERSION and [p["file"] for p in m["parts"]] == ["vip-0.npy",
                                                                                                   "vip-1.npy"]
    return d, arrays


def test_vip_analysis_round_trip(tmp_path):
    d, arrays = _vip_dir(tmp_path)
    for k, a in enumerate(arrays):
        np.testing.assert_array_equal(read_vip(d, k, "abc", [10, 5], 32), a)
    assert identify(d).startswith("a VIP analysis ")
    with pytest.raises(SylvieError, match="written for another partition"):
        read_vip(d, 0, "other", [10, 5], 32)


@pytest.mark.parametrize("version", [None, 0, 2, "1"])
def test_a_vip_analysis_of_another_version_says_rerun_sylvie_vip(tmp_path, version):
    d, _ = _vip_dir(tmp_path)
    _edit_json(d / "manifest.json", format_version=version)
    if version is None:  # as written before the format had a version
        m = json.loads((d / "manifest.json").read_text())
        assert "format_version" not in m
    with pytest.raises(SylvieError) as e:
        read_vip(d, 0, "abc", [10, 5], 32)
    assert str(e.value).startswith(f"{d / 'manifest.json'}: ") and "rerun `sylvie vip`" in str(e.value)
    assert ("before the format had a version" if version is None else f"version {version!r}") in str(e.value)


# ---- model file --------------------------------------------------------------------------------------------------

def _model(sampled: bool) -> ModelFile:
    return ModelFile(weights={"w": torch.arange(6.0).reshape(2, 3)}, model_cfg={"arch": "gcn", "hidden": 3},
                     train_cfg={"lr": 0.01, "seed": 3}, in_feats=3, num_classes=2, dataset_fingerprint="f00",
                     summary={"best_epoch": 1, "num_parts": 2}, comm_cfg={} if sampled else {"bits": 32},
                     **({"sampling_cfg": {"fanouts": [5]}, "cache_cfg": {"policy": "vip"},
                         "features_cfg": {"gpu_fraction": 0.0}} if sampled else {}))


def _same(a: ModelFile, b: ModelFile) -> bool:
    return a.weights.keys() == b.weights.keys() and all(torch.equal(a.weights[k], b.weights[k]) for k in a.weights) \
        and {**a.__dict__, "weights": None} == {**b.__dict__, "weights": None}


@pytest.mark.parametrize("sampled", [False, True])
def test_model_file_round_trip(tmp_path, sampled):
    saved = _model(sampled)
    save_model(tmp_path / "model.pt", saved)
    content = torch.load(tmp_path / "model.pt", weights_only=False)
    assert content["format_version"] == model_file.FORMAT_VERSION
    assert ("sampling_cfg" in content) == sampled and "model" in content  # the weights, under their old key
    assert _same(load_model(tmp_path / "model.pt"), saved)
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # written atomically: no temporary left


def test_a_model_file_written_before_the_version_loads_as_version_1(tmp_path):
    """As ``sylvie train`` wrote it before: the same keys without format_version (a full-graph run)."""
    saved = _model(False)
    torch.save({"model": saved.weights, "model_cfg": saved.model_cfg, "train_cfg": saved.train_cfg,
                "comm_cfg": saved.comm_cfg, "in_feats": 3, "num_classes": 2, "dataset_fingerprint": "f00",
                "summary": saved.summary}, tmp_path / "model.pt")
    assert _same(load_model(tmp_path / "model.pt"), saved)


def test_a_model_file_of_another_version_or_not_ours_is_named(tmp_path):
    save_model(tmp_path / "model.pt", _model(False))
    content = torch.load(tmp_path / "model.pt", weights_only=False)
    torch.save({**content, "format_version": 2}, tmp_path / "model.pt")
    with pytest.raises(SylvieError, match=re.escape(f"{tmp_path / 'model.pt'}: a model file of format version 2; "
                                                    "this sylvie reads version 1: rerun `sylvie train`")):
        load_model(tmp_path / "model.pt")
    torch.save({"identity": {}, "epoch": 3}, tmp_path / "last.pt")
    with pytest.raises(SylvieError, match="last.pt: a training checkpoint, not a model written by `sylvie train`"):
        load_model(tmp_path / "last.pt")
    with pytest.raises(SylvieError, match="trained model not found"):
        load_model(tmp_path / "none.pt")


# ---- eval result -------------------------------------------------------------------------------------------------

def _result(**changes) -> EvalResult:
    fields = dict(dataset="cora", evaluator="accuracy", inference="whole graph, one process",
                  accuracies={"train": 0.9, "val": 0.8, "test": math.nan}, model={"arch": "gcn"},
                  train={"seed": 0, "lr": 0.01}, summary={"best_epoch": 3, "num_parts": 4},
                  comm={"bits": 8, "pipeline": False})
    return EvalResult(**{**fields, **changes})


def test_eval_result_round_trip(tmp_path):
    result = _result(comm={}, sampling={"fanouts": [5]}, cache={"policy": "vip", "alpha": 0.2}, features={})
    written = write_eval_result(tmp_path / "eval.json", result)
    on_disk = json.loads((tmp_path / "eval.json").read_text())
    assert list(on_disk)[0] == "format_version" and on_disk["format_version"] == eval_result.FORMAT_VERSION
    assert on_disk["test_acc"] is None and math.isnan(written["test_acc"])  # no test nodes: null in the file
    assert on_disk["num_parts"] == 4 and "summary" not in on_disk  # the training summary at the top level
    back = read_eval_result(tmp_path / "eval.json")
    assert math.isnan(back.accuracies["test"]) and back.num_parts == 4
    assert back == _result(comm={}, sampling={"fanouts": [5]}, cache={"policy": "vip", "alpha": 0.2}, features={},
                           accuracies=back.accuracies) and back.accuracies["val"] == 0.8


def test_an_eval_json_written_before_the_version_reads_as_version_1(tmp_path):
    write_eval_result(tmp_path / "eval.json", _result())
    # the oldest had no inference (nor a checksum)
    _edit_json(tmp_path / "eval.json", format_version=None, inference=None, checksum=None)
    back = read_eval_result(tmp_path / "eval.json")
    assert back.inference is None and back.comm == {"bits": 8, "pipeline": False} and back.sampling is None


def test_an_eval_json_of_another_version_is_named(tmp_path):
    write_eval_result(tmp_path / "eval.json", _result())
    _edit_json(tmp_path / "eval.json", format_version=2)
    with pytest.raises(SylvieError, match=re.escape(f"{tmp_path / 'eval.json'}: an evaluation of format version 2; "
                                                    "this sylvie reads version 1: rerun `sylvie evaluate`")):
        read_eval_result(tmp_path / "eval.json")


def test_an_eval_json_that_is_another_of_our_files_says_which(tmp_path):
    (tmp_path / "eval.json").write_text(json.dumps({"reason": "diverged", "epoch": 2, "message": "m"}))
    with pytest.raises(SylvieError, match="it looks like a run failure record"):
        read_eval_result(tmp_path / "eval.json", fix="do this")
    assert looks_like({"epoch": 0, "loss": 1.0}, "eval.json") == "; it looks like an epoch record of metrics.jsonl " \
                                                                  "(`sylvie train`)"
    assert looks_like(_result().content(), "eval.json") == ""


def test_a_training_summary_never_overwrites_eval_jsons_fields():
    with pytest.raises(ValueError, match="test_acc"):
        _result(summary={"num_parts": 1, "test_acc": 1.0}).content()


def test_predictions_round_trip(tmp_path):
    write_predictions(tmp_path / "p.npy", np.array([2, 0, 1], dtype=np.int32))
    assert read_predictions(tmp_path / "p.npy").tolist() == [2, 0, 1]
    np.save(tmp_path / "f.npy", np.zeros(3))
    with pytest.raises(SylvieError, match="f.npy: float64 array"):
        read_predictions(tmp_path / "f.npy")


# ---- partition manifest ------------------------------------------------------------------------------------------

def _partition_manifest(tmp_path: Path) -> Path:
    write_manifest(tmp_path, {"dataset": "toy", "dataset_fingerprint": "f00", "num_parts": 1, "num_features": 3,
                              "num_classes": 2, "num_train": 1, "id_bits": 32,
                              "parts": [{"part": 0, "file": "part-0.arrow"}]})
    return tmp_path / "manifest.json"


def test_partition_manifest_round_trip(tmp_path):
    path = _partition_manifest(tmp_path)
    m = read_manifest(tmp_path)
    assert m["format_version"] == partition_manifest.FORMAT_VERSION and m["checksum"] == manifest_checksum(m)
    assert m == json.loads(path.read_text()) and m["parts"][0]["file"] == "part-0.arrow"


def test_a_partition_manifest_of_another_version_or_edited_is_named(tmp_path):
    path = _partition_manifest(tmp_path)
    m = json.loads(path.read_text())
    m["num_train"] = 2
    path.write_text(json.dumps(m))
    with pytest.raises(SylvieError, match=re.escape(f"{path}: was changed after `sylvie partition` wrote it")):
        read_manifest(tmp_path)
    m["format_version"] = 1
    m["checksum"] = manifest_checksum(m)
    path.write_text(json.dumps(m))
    with pytest.raises(SylvieError, match=re.escape(f"{path}: format_version 1, this sylvie reads 2, 3, 4 and 5; rerun "
                                                    "`sylvie partition`")):
        read_manifest(tmp_path)
    m["format_version"], m["id_bits"] = 3, 16
    m["checksum"] = manifest_checksum(m)
    path.write_text(json.dumps(m))
    with pytest.raises(SylvieError, match=re.escape(f"{path}: id_bits 16, expected 32 or 64")):
        read_manifest(tmp_path)


# ---- the canonical graph's meta.json ----------------------------------------------------------------------------

def _restamped(path: Path, **changes) -> None:
    """A hand edit of a JSON file that restamps its checksum (a field changed to None is removed)."""
    from sylvie.formats.checksum import with_checksum

    d = {k: v for k, v in {**json.loads(path.read_text()), **changes}.items() if k != "checksum"}
    path.write_text(json.dumps(with_checksum({k: v for k, v in d.items() if v is not None})))


@pytest.mark.parametrize("version", [0, 2, 99, "1", 1.5])
def test_a_canonical_graph_of_another_version_is_refused(cora_dir, tmp_path, version):
    """As every other format: a version this sylvie does not read is one line naming the file and the version,
    even where the checksum was restamped."""
    import shutil

    from sylvie.data.graph import load_graph

    g = tmp_path / "cora"
    shutil.copytree(cora_dir, g)
    _restamped(g / "meta.json", format_version=version)
    with pytest.raises(SylvieError, match=re.escape(f"{g / 'meta.json'}: format_version {version!r}, this sylvie "
                                                    f"reads 1; the graph was written by another version")):
        load_graph(g)


def test_a_canonical_graph_written_before_the_version_reads_as_version_1(cora_dir, tmp_path):
    import shutil

    from sylvie.data.graph import load_graph

    g = tmp_path / "cora"
    shutil.copytree(cora_dir, g)
    _restamped(g / "meta.json", format_version=None)
    assert load_graph(g).num_nodes == load_graph(cora_dir).num_nodes
