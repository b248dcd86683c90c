"""A graph with an empty split: without validation nodes there is nothing to choose an epoch by, so the run keeps its
last epoch's model and the log, model.pt's summary and the report say so; without test nodes, the test accuracy is
"n/a", never NaN. (Before: "best val nan at epoch 1", and model.pt held epoch 1's weights.)"""
import json

import pytest
import torch
from support.commands import BIN, run

from sylvie.formats.model_file import BY_LAST_EPOCH, BY_VALIDATION

pytestmark = pytest.mark.slow
EPOCHS = 12


def sylvie(*args, check=True):
    return run([str(BIN / "sylvie"), *map(str, args)], check=check)


@pytest.fixture(scope="module")
def no_validation(tmp_path_factory):
    """A 400-node graph without validation nodes (80% train, 20% test), as one part."""
    base = tmp_path_factory.mktemp("no-validation")
    return _graph(base, 0.8, 0.0)


def _graph(base, train_fraction: float, val_fraction: float):
    data, parts = base / "graph", base / "parts"
    sylvie("download", "synthetic", "--out", data, "--nodes", 400, "--train-fraction", train_fraction,
           "--val-fraction", val_fraction, "--seed", 3)
    sylvie("partition", data, "--out", parts, "--parts", 1)
    return data, parts


def _train(parts, out, mode: str = "full") -> str:
    extra = ["--mode", "sampled", "--fanouts", 5, 5, "--batch-size", 64] if mode == "sampled" else []
    return sylvie("train", "--partition", parts, "--out", out, "--epochs", EPOCHS, "--no-progress", "--lr", 0.05,
                  *extra).stderr


def test_without_validation_nodes_the_last_epoch_is_kept_and_said(no_validation, tmp_path):
    data, parts = no_validation
    out = tmp_path / "run"
    log = _train(parts, out)
    assert f"no validation nodes: kept the last epoch's model (epoch {EPOCHS})" in log, log
    assert "nan" not in log.lower(), log
    saved = torch.load(out / "model.pt", weights_only=False)
    assert saved["summary"]["model_chosen_by"] == BY_LAST_EPOCH and saved["summary"]["best_epoch"] == EPOCHS - 1
    assert saved["summary"]["best_val_acc"] is None
    last = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["val_acc"] is None and last["test_acc"] > 0.5  # the model learnt; these are its weights:
    sylvie("evaluate", "--dataset", data, "--model", out / "model.pt", "--out", out / "eval.json")
    ev = json.loads((out / "eval.json").read_text())
    assert ev["test_acc"] == pytest.approx(last["test_acc"], abs=1e-9) and ev["val_acc"] is None
    assert ev["model_chosen_by"] == BY_LAST_EPOCH
    sylvie("report", out, "--out", tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    assert "no validation nodes" in page and "the model of their last epoch" in page


def test_a_sampled_run_without_validation_nodes_keeps_its_last_epoch(no_validation, tmp_path):
    log = _train(no_validation[1], tmp_path / "run", "sampled")
    assert f"no validation nodes: kept the last epoch's model (epoch {EPOCHS})" in log and "nan" not in log.lower()
    summary = torch.load(tmp_path / "run" / "model.pt", weights_only=False)["summary"]
    assert summary["model_chosen_by"] == BY_LAST_EPOCH and summary["best_epoch"] == EPOCHS - 1


def test_without_test_nodes_the_test_accuracy_is_na_and_validation_chooses(tmp_path):
    _, parts = _graph(tmp_path, 0.7, 0.3)
    log = _train(parts, tmp_path / "run")
    assert "best val" in log and "test n/a (no test nodes)" in log and "nan" not in log.lower(), log
    assert "no validation nodes" not in log
    summary = torch.load(tmp_path / "run" / "model.pt", weights_only=False)["summary"]
    assert summary["model_chosen_by"] == BY_VALIDATION and summary["test_acc_at_best_val"] is None
