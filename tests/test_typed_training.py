"""A typed graph through the stages by their commands: ``sylvie download`` (the mag preset), ``partition``,
``train`` on 2 ranks (R-GCN and R-GAT, fp32 and 1-bit pipelined), ``evaluate`` on the whole graph and
partition-parallel (the same class for every paper); a checkpoint of a run with embedding tables resumes to the same
epochs bit for bit."""
import json

import numpy as np
import pytest
from support.commands import ranks

from sylvie.atomic import read_jsonl
from sylvie.cli import main

pytestmark = pytest.mark.slow

RUNS = {
    "rgcn-fp32": ["--arch", "rgcn", "--bits", "32", "--no-pipeline"],
    "rgcn-1bit-pipelined": ["--arch", "rgcn", "--bits", "1", "--pipeline", "--num-bases", "2"],
    "rgat-1bit-pipelined": ["--arch", "rgat", "--bits", "1", "--pipeline", "--heads", "2"],
}
COMMON = ["--hidden", "16", "--layers", "2", "--epochs", "6", "--seed", "0", "--no-progress", "--lr", "0.02",
          "--embedding-width", "16", "--dropout", "0.2"]


@pytest.fixture(scope="module")
def typed(learnable_mag):
    """The session's mag graph that six epochs learn (graph/, by `sylvie download`; p2/, by `sylvie partition`)."""
    return learnable_mag


@pytest.mark.parametrize("name", list(RUNS))
def test_a_typed_graph_trains_and_evaluates_both_ways(typed, name):
    out = typed / name
    ranks(2, "--no-python", "sylvie", "train", "--partition", typed / "p2", "--out", out, *RUNS[name], *COMMON)
    records = read_jsonl(out / "metrics.jsonl")
    assert len(records) == 6 and all(np.isfinite(r["loss"]) for r in records)
    assert records[-1]["loss"] < records[0]["loss"]
    if "1bit" in name:
        assert records[-1]["bytes_sent"] < records[-1]["fp32_bytes_sent"] / 8
    assert main(["evaluate", "--dataset", str(typed / "graph"), "--model", str(out / "model.pt"), "--out",
                 str(out / "whole.json"), "--predictions", str(out / "whole.npy")]) == 0
    ranks(2, "--no-python", "sylvie", "evaluate", "--partition", typed / "p2", "--model", out / "model.pt", "--out",
          out / "parts.json", "--predictions", out / "parts.npy")
    whole, parts = (json.loads((out / f).read_text()) for f in ("whole.json", "parts.json"))
    papers = json.loads((typed / "graph" / "meta.json").read_text())["type_counts"][0]
    assert np.load(out / "whole.npy").shape == (papers,)  # the target type's nodes
    assert np.array_equal(np.load(out / "whole.npy"), np.load(out / "parts.npy"))
    for key in ("train_acc", "val_acc", "test_acc"):
        assert whole[key] == parts[key]
    assert whole["val_acc"] > 2 / 8  # well above chance (1/8) after six epochs


def test_a_typed_run_resumes_from_its_checkpoint_bit_for_bit(typed):
    """The checkpoint holds the embedding tables and their Adam moments whole; each rank takes its rows back."""
    out = typed / "resumed"
    args = ["--partition", typed / "p2", "--out", out, "--arch", "rgcn", "--checkpoint-every", "3", "--log-every", "1",
            *COMMON]
    ranks(2, "--no-python", "sylvie", "train", *args)
    first = read_jsonl(out / "metrics.jsonl")
    again = ranks(2, "--no-python", "sylvie", "train", *args)  # the same run: resumes after epoch 3
    assert "resuming from" in again.stderr
    second = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in second] == list(range(6))
    for a, b in zip(first, second, strict=True):
        assert (a["loss"], a["val_acc"]) == (b["loss"], b["val_acc"])


def test_predictions_of_a_typed_graph_from_files_name_the_target_types_own_ids(small_mag_one_way, tmp_path):
    """The papers' own ids (the target type's node_key) in the predictions, whole-graph and partition-parallel."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    from support.graphs import write_files

    from sylvie.config import section
    from sylvie.data.registry import download

    mag = small_mag_one_way
    download("mine", tmp_path / "g", section("dataset", write_files(mag, tmp_path / "in")))
    assert main(["partition", str(tmp_path / "g"), "--out", str(tmp_path / "p"), "--parts", "2"]) == 0
    ranks(2, "--no-python", "sylvie", "train", "--partition", tmp_path / "p", "--out", tmp_path / "run", "--arch",
          "rgcn", "--epochs", "2", "--no-progress", "--hidden", "8")
    assert main(["evaluate", "--dataset", str(tmp_path / "g"), "--model", str(tmp_path / "run" / "model.pt"),
                 "--out", str(tmp_path / "whole.json"), "--predictions", str(tmp_path / "whole.csv")]) == 0
    ranks(2, "--no-python", "sylvie", "evaluate", "--partition", tmp_path / "p", "--model",
          tmp_path / "run" / "model.pt", "--out", tmp_path / "parts.json", "--predictions", tmp_path / "parts.csv",
          "--dataset", tmp_path / "g")
    whole, parts = (pacsv.read_csv(tmp_path / f).to_pydict() for f in ("whole.csv", "parts.csv"))
    assert whole == parts and len(whole["node"]) == mag.node_counts[0]
    # the papers' ids in their table's row order
    assert whole["node"] == pq.read_table(tmp_path / "in" / "paper.parquet").column("id").to_pylist()
