"""``sylvie evaluate --score-pairs``: a link model's scores of a user's pairs, the same as evaluation's scores of the
held-out pairs; pairs naming nodes the graph lacks, a node-classification model and a user's file at --out refused,
nothing written."""
import numpy as np
import pytest
import torch
from support.commands import refused_line

from sylvie import cli
from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.evaluate.trained_model import model_for_inference
from sylvie.evaluate.whole_graph import pair_scores, whole_graph_inputs
from sylvie.formats.model_file import load_model
from sylvie.formats.pair_scores import read_pair_scores
from sylvie.train.job import TrainingJob
from sylvie.train.run import run_training

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def link_model(cora_link_partitions, tmp_path_factory):
    out = tmp_path_factory.mktemp("score-pairs") / "run"
    run_training(TrainingJob(cora_link_partitions[1], out, section("model", {"arch": "sage", "hidden": 8}),
                             section("train", {"task": "link", "epochs": 2, "checkpoint_every": 0,
                                               "progress": False}), section("comm"), 0,
                             link=section("link", {"decoder": "mlp"})))
    return out / "model.pt"


def test_scores_are_the_models_scores_of_those_pairs(cora_link_dir, link_model, tmp_path):
    graph = load_graph(cora_link_dir)
    val = graph.link.indices("val")[:50]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(graph.link.src[val], graph.link.dst[val])))
    out = tmp_path / "scores.parquet"
    assert cli.main(["evaluate", "--dataset", str(cora_link_dir), "--model", str(link_model), "--score-pairs",
                     str(pairs), "--pair-columns", "a", "b", "--out", str(out)]) == 0
    table = read_pair_scores(out)
    assert table.column("src").to_pylist() == graph.link.src[val].tolist()
    saved = load_model(link_model)
    model, cfg = model_for_inference(saved, link_model, graph.info["fingerprint"], cora_link_dir)
    held_out = pair_scores(graph, model, *whole_graph_inputs(graph, cfg))["val"][0][:50]
    np.testing.assert_allclose(table.column("score").to_numpy(), held_out.numpy(), rtol=1e-6)
    np.testing.assert_allclose(table.column("probability").to_numpy(),
                               torch.sigmoid(held_out).numpy(), rtol=1e-5)


def test_bad_pairs_and_outputs_are_refused_with_nothing_written(cora_link_dir, cora_dir, link_model, tmp_path,
                                                                 capsys):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("src,dst\n0,1\n2,99999\n")
    out = tmp_path / "scores.csv"
    base = ["evaluate", "--dataset", str(cora_link_dir), "--model", str(link_model), "--score-pairs", str(pairs)]
    line = refused_line([*base, "--out", str(out)], capsys)
    assert "pairs.csv, line 3" in line and "99999" in line and not out.exists()
    pairs.write_text("src,dst\n0,1\n")
    users = tmp_path / "mine.csv"
    users.write_text("x,y\n1,2\n")
    assert "is not scores written by sylvie evaluate --score-pairs" in refused_line([*base, "--out", str(users)],
                                                                                   capsys)
    assert users.read_text() == "x,y\n1,2\n"
    assert ".parquet, .csv or .tsv" in refused_line([*base, "--out", str(tmp_path / "s.json")], capsys)
    assert "--partition" in refused_line([*base, "--out", str(out), "--partition", str(tmp_path)], capsys)
