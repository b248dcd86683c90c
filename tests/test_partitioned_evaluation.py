"""Partition-parallel evaluation (one rank per part, fp32 halo exchange per layer) against whole-graph evaluation
in one process, on Cora in 4 parts: the same predictions for every node and the same eval.json, for a full-graph
and a sampled model; and the wrong number of ranks refused, naming the partition."""
import re
from dataclasses import replace

import numpy as np
import pytest
from support.commands import BIN, ranks, run

from sylvie.atomic import read_jsonl
from sylvie.formats.eval_result import read_eval_result
from sylvie.formats.predictions import read_predictions

pytestmark = pytest.mark.slow
FULL = ["--arch", "gcn", "--epochs", "8"]
# 10 epochs of 1-2 steps a rank: with torch's initialisation (small logits at first) 4 epochs left GraphSAGE near
# chance (19.5% test), below the check that the model learned something
SAMPLED = ["--mode", "sampled", "--arch", "sage", "--no-self-loop", "--fanouts", "10", "10", "--batch-size", "32",
           "--policy", "none", "--alpha", "0", "--epochs", "10"]


@pytest.mark.parametrize("regime", ["full", "sampled"])
def test_partitioned_and_whole_graph_evaluation_agree(regime, cora_dir, cora_partitions, tmp_path):
    part = cora_partitions[4]
    ranks(4, "--no-python", "sylvie", "train", "--partition", part, "--out", tmp_path / "run", "--no-progress",
             *(FULL if regime == "full" else SAMPLED))
    model = tmp_path / "run" / "model.pt"
    run([str(BIN / "sylvie"), "evaluate", "--dataset", str(cora_dir), "--model", str(model),
         "--out", str(tmp_path / "whole.json"), "--predictions", str(tmp_path / "whole.npy")])
    p = ranks(4, "--no-python", "sylvie", "evaluate", "--partition", part, "--model", model,
                 "--out", tmp_path / "parts.json", "--predictions", tmp_path / "parts.npy")
    assert "partition-parallel, 4 ranks" in p.stderr
    whole, parts = read_predictions(tmp_path / "whole.npy"), read_predictions(tmp_path / "parts.npy")
    assert whole.shape == (2708,) and np.array_equal(whole, parts)
    a, b = read_eval_result(tmp_path / "whole.json"), read_eval_result(tmp_path / "parts.json")
    assert a.inference == "whole graph, one process" and b.inference == "partition-parallel, 4 ranks"
    assert replace(a, inference=None) == replace(b, inference=None) and 0.3 < a.accuracies["test"] < 1.0


def test_partitioned_evaluation_needs_one_rank_per_part(cora_partitions, tmp_path):
    ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", tmp_path / "run",
             "--no-progress", "--epochs", "2")
    p = ranks(4, "--no-python", "sylvie", "evaluate", "--partition", cora_partitions[2], "--model",
                 tmp_path / "run" / "model.pt", "--out", tmp_path / "eval.json", check=False)
    assert p.returncode != 0 and "has 2 parts but 4 ranks were started" in p.stderr
    assert not (tmp_path / "eval.json").exists()


def test_a_training_job_evaluates_its_model_as_an_evaluation_job_would(cora_dir, cora_partitions, tmp_path):
    """`sylvie train --eval-out`: the eval.json `sylvie evaluate` writes of the kept model, from the training job
    itself: on the whole graph in rank 0 (--eval-dataset) byte for byte, or partition-parallel on its ranks (the same
    but for how it inferred). Run again once finished (its model and eval.json gone, as Snakemake removes a job's
    outputs), it resumes after its last epoch, trains none, and writes the same model and evaluation."""
    part, run_dir = cora_partitions[2], tmp_path / "run"
    args = ["--no-python", "sylvie", "train", "--partition", part, "--out", run_dir, "--no-progress", *FULL,
            "--checkpoint-every", "3"]
    first = ranks(2, *args, "--eval-out", tmp_path / "in-job.json", "--eval-dataset", cora_dir)
    assert "whole graph, one process) -> " in first.stderr
    run([str(BIN / "sylvie"), "evaluate", "--dataset", str(cora_dir), "--model", str(run_dir / "model.pt"),
         "--out", str(tmp_path / "job.json")])
    assert (tmp_path / "in-job.json").read_bytes() == (tmp_path / "job.json").read_bytes()
    model, losses = (run_dir / "model.pt").read_bytes(), [r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl")]
    (run_dir / "model.pt").unlink()
    again = ranks(2, *args, "--eval-out", tmp_path / "parts.json")
    assert f"resuming from {run_dir / 'checkpoints' / 'last.pt'} after epoch 8" in again.stderr
    assert not re.search(r"^epoch +\d+/8 ", again.stderr, re.M)  # no epoch trained
    assert (run_dir / "model.pt").read_bytes() == model
    assert [r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl")] == losses
    whole, parts = read_eval_result(tmp_path / "job.json"), read_eval_result(tmp_path / "parts.json")
    assert parts.inference == "partition-parallel, 2 ranks" and replace(parts, inference=None) == replace(
        whole, inference=None)
