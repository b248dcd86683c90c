"""Link prediction trains with every value the ``link`` section offers (decoders, losses, negative samplers, the pair
ends' widths), with every architecture and the halo exchange's modes, on 2 ranks; every trained model is evaluated
partition-parallel and on the whole graph, which must give the same metrics; and a model learns."""
import json

import numpy as np
import pytest
from support.commands import REPO, ranks
from support.no_dgl import NoDGL

from sylvie.config import section
from sylvie.evaluate import evaluate
from sylvie.formats.eval_result import read_eval_result
from sylvie.formats.model_file import load_model
from sylvie.train.job import TrainingJob
from sylvie.train.run import run_training

pytestmark = pytest.mark.slow

SMALL = {"hidden": 8, "heads": 2}
# each cell: a run's overrides; together they train every value of the link section (tests/test_model_matrix.py
# holds the schema to it)
CELLS = {
    "sage-dot-bce-uniform": {"model": {"arch": "sage", **SMALL}},
    "gcn-mlp-contrastive-local-1bit": {"model": {"arch": "gcn", **SMALL},
                                       "link": {"decoder": "mlp", "loss": "contrastive", "negative_sampler": "local",
                                                "negatives": 3, "pair_bits": 1}},
    "gat-distmult-joint-2bit": {"model": {"arch": "gat", **SMALL},
                                "link": {"decoder": "distmult", "negative_sampler": "joint", "negatives": 4,
                                         "pair_bits": 2}},
    "rgcn-pipelined-4bit": {"model": {"arch": "rgcn", **SMALL}, "comm": {"bits": 1, "pipeline": True, "staleness": 2},
                            "link": {"pair_bits": 4}},
    "rgat-8bit": {"model": {"arch": "rgat", **SMALL}, "link": {"pair_bits": 8, "negatives": 2}},
}
EPOCHS = 3


@pytest.fixture(scope="module")
def link_runs(cora_link_dir, cora_link_partitions, tmp_path_factory):
    """Every cell trained on 2 ranks (one launch, without DGL) and evaluated partition-parallel there, then on the
    whole graph here."""
    root = tmp_path_factory.mktemp("link-runs")
    cells = {n: {**c, "train": {"epochs": EPOCHS, "checkpoint_every": 0}} for n, c in CELLS.items()}
    no_dgl = NoDGL(root / "no-dgl")
    ranks(2, REPO / "tests" / "workers" / "link_runs_worker.py", cora_link_partitions[2], root, json.dumps(cells),
          env=no_dgl.env)
    no_dgl.assert_sylvie_never_asked(2)
    for name in CELLS:
        evaluate(cora_link_dir, root / name / "model.pt", root / name / "whole.json")
    return root


@pytest.mark.parametrize("name", list(CELLS))
def test_every_link_setting_trains_and_evaluates_alike_both_ways(name, link_runs):
    run = link_runs / name
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == EPOCHS
    assert all(np.isfinite(m["loss"]) and m["metric"] == "mrr" and m["train_acc"] is None for m in metrics)
    assert all(0 < m["val_acc"] <= 1 and 0 < m["test_acc"] <= 1 for m in metrics)
    saved = load_model(run / "model.pt")
    # every line, the model and both evaluations name the run, and the model its epochs (the report checks them)
    assert saved.summary["epochs_recorded"] == EPOCHS and {m["run"] for m in metrics} == {saved.summary["run"]}
    assert read_eval_result(run / "whole.json").summary["run"] == saved.summary["run"]
    assert saved.link_cfg == {**vars(section("link")), **CELLS[name].get("link", {})}
    whole, parts = read_eval_result(run / "whole.json"), read_eval_result(run / "parts.json")
    assert whole.task == parts.task == "link" and whole.evaluator == "ranking"
    assert whole.link.keys() == {"val", "test"}
    for split in ("val", "test"):
        assert set(whole.link[split]) == {"mrr", "hits@1", "hits@10", "hits@50", "hits@100", "auc"}
        for metric, value in whole.link[split].items():  # the same scores, summed in another order
            assert value == pytest.approx(parts.link[split][metric], abs=1e-6), (split, metric)
    best = saved.summary["best_epoch"]
    assert whole.link["val"]["mrr"] == pytest.approx(metrics[best]["val_acc"], abs=1e-6)


def test_graphsage_learns_to_rank_the_held_out_edges(cora_link_partitions, tmp_path):
    """One process, 60 epochs: the validation MRR against the split's 20 negatives a pair ends well above what random
    scores give (the mean of 1/rank over ranks 1..21 uniform: about 0.17)."""
    out = tmp_path / "run"
    run_training(TrainingJob(cora_link_partitions[1], out, section("model", {"arch": "sage", "hidden": 32,
                                                                               "dropout": 0.2}),
                             section("train", {"task": "link", "epochs": 60, "checkpoint_every": 0,
                                               "weight_decay": 0}), section("comm"), 0,
                             link=section("link", {"negatives": 3})))
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    random_mrr = np.mean(1 / np.arange(1, 22))
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    assert max(m["val_acc"] for m in metrics) > 2 * random_mrr
