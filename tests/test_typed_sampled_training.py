"""Sampled training of a typed graph (R-GAT, R-GCN) under torchrun on the igbh preset (2 parts): the cache and the
feature store change only where rows come from, across node types; Low-bit remote rows send fewer bytes; the VIP
stage and the trainer take fanouts per relation; a fanout for an unknown relation and a relation left out are refused
in one line naming the key; types without features learn embeddings sampled (the mag preset)."""
import json

import pytest
from support.commands import BIN, REPO, ranks, run

from sylvie.atomic import read_jsonl
from sylvie.cli import main

pytestmark = pytest.mark.slow
# a map for the input layer (each relation its own fanout), one number for the others
FANOUTS = [{"cites": 4, "written_by": 3, "affiliated_to": 2, "topic": 3, "rev-cites": 4, "rev-written_by": 3,
            "rev-affiliated_to": 2, "rev-topic": 2}, 4]
SECTIONS = {"model": {"arch": "rgat", "layers": 2, "hidden": 16, "heads": 2, "dropout": 0.2},
            "train": {"mode": "sampled", "epochs": 4, "log_every": 1, "progress": False, "weight_decay": 0.0},
            "sampling": {"fanouts": FANOUTS, "batch_size": 64}}


@pytest.fixture(scope="module")
def igbh(tmp_path_factory):
    # its own graph: the igbh preset (features on every node type: the cache and the store's tiers for each)
    root = tmp_path_factory.mktemp("igbh")
    assert main(["download", "igbh", "--source", "synthetic", "--preset", "igbh", "--nodes", "6000", "--features",
                 "16", "--classes", "6", "--out", str(root / "graph")]) == 0
    assert main(["partition", str(root / "graph"), "--out", str(root / "p2"), "--parts", "2"]) == 0
    flags = ["--fanouts", *(json.dumps(f) if isinstance(f, dict) else str(f) for f in FANOUTS), "--batch-size", "64"]
    run([str(BIN / "sylvie"), "vip", str(root / "p2"), "--out", str(root / "vip"), *flags])
    return root


def test_the_typed_cache_changes_only_where_rows_come_from(igbh):
    """Same seed: no cache, VIP, degree and random caches at alpha 0.5 (a budget in bytes across the four node
    types), every row everywhere, and R-GCN beside R-GAT: identical losses within an arch; the caches hold rows of
    several types and fetch fewer, VIP fewest."""
    settings = {"none": {"cache": {"alpha": 0}}, "vip": {"cache": {"alpha": 0.5}},
                "degree": {"cache": {"alpha": 0.5, "policy": "degree"}},
                "random": {"cache": {"alpha": 0.5, "policy": "random"}},
                "all": {"cache": {"alpha": 2}, "sampling": {**SECTIONS["sampling"], "prefetch": 0}},
                "rgcn": {"cache": {"alpha": 0.5}, "model": {**SECTIONS["model"], "arch": "rgcn"}},
                "lowbit": {"cache": {"alpha": 0}, "sampling": {**SECTIONS["sampling"], "remote_bits": 2}}}
    jobs = [{"partition": str(igbh / "p2"), "out": str(igbh / "runs" / name), "seed": 0, "vip": str(igbh / "vip"),
             "dataset": str(igbh / "graph"), **SECTIONS, **extra} for name, extra in settings.items()]
    (igbh / "jobs.json").write_text(json.dumps(jobs))
    ranks(2, REPO / "tests" / "workers" / "runs_worker.py", igbh / "jobs.json")
    records = {name: read_jsonl(igbh / "runs" / name / "metrics.jsonl") for name in settings}
    base = records["none"]
    remote = {name: sum(r["rows_remote"] for r in recs) for name, recs in records.items()}
    for name in ("vip", "degree", "random", "all"):
        assert [r["loss"] for r in records[name]] == [r["loss"] for r in base], name
        assert [r["val_acc"] for r in records[name]] == [r["val_acc"] for r in base], name
    assert all(r["rows_cached"] == 0 and r["rows_remote"] > 0 for r in base)
    assert remote["all"] == 0 and remote["vip"] < min(remote["degree"], remote["random"]) < remote["none"]
    assert base[-1]["loss"] < base[0]["loss"] and records["rgcn"][-1]["loss"] < records["rgcn"][0]["loss"]
    low = records["lowbit"]
    assert low[-1]["bytes_sent"] < 0.3 * base[-1]["bytes_sent"] and low[-1]["val_acc"] > 0.5  # ids travel in 64 bits
    assert json.loads((igbh / "vip" / "manifest.json").read_text())["fanouts"] == FANOUTS
    whole = json.loads((igbh / "runs" / "none" / "eval.json").read_text())  # `sylvie evaluate`, one process
    assert whole["val_acc"] > 0.5


@pytest.mark.parametrize("fanouts, key, says", [
    (['{"citez": 4}', "4"], "sampling.fanouts[0]", "names relation 'citez', which the graph does not have"),
    (["4", '{"cites": 4, "written_by": 3}'], "sampling.fanouts[1]", "gives no fanout for relation 'affiliated_to'"),
])
def test_fanouts_that_do_not_fit_the_graphs_relations_are_refused_in_one_line(igbh, fanouts, key, says):
    out = igbh / "refused"
    p = ranks(2, "--no-python", "sylvie", "train", "--partition", igbh / "p2", "--out", out, "--mode", "sampled",
              "--arch", "rgat", "--layers", "2", "--fanouts", *fanouts, "--policy", "degree", "--no-progress",
              check=False)
    assert p.returncode != 0 and f"{key} {says}" in p.stderr.strip().splitlines()[-2]  # (the last: forked_ranks')
    assert not out.exists()
    p = run([str(BIN / "sylvie"), "vip", str(igbh / "p2"), "--out", str(igbh / "vip-refused"), "--fanouts",
             *fanouts], check=False)
    assert p.returncode == 2 and f"{key} {says}" in p.stderr and not (igbh / "vip-refused").exists()


def test_types_without_features_learn_embeddings_sampled_and_resume_bit_for_bit(learnable_mag, tmp_path):
    """The mag preset (authors, institutions and fields learnt as embeddings, partitioned with their nodes): sampled
    R-GCN on 2 ranks pulls its input rows from their owners and pushes their gradients back; it learns, its model
    evaluates the same on the whole graph as partition-parallel, and a run resumed from its checkpoint (the tables
    and their Adam moments whole) repeats the uninterrupted one's epochs."""
    args = ["--partition", learnable_mag / "p2", "--mode", "sampled", "--arch", "rgcn", "--layers", "2", "--hidden",
            "16", "--fanouts", "5", "5", "--batch-size", "128", "--epochs", "4", "--policy", "degree", "--alpha", "0.3",
            "--weight-decay", "0", "--lr", "0.02", "--embedding-width", "16", "--log-every", "1", "--no-progress"]
    out = tmp_path / "run"
    ranks(2, "--no-python", "sylvie", "train", "--out", out, *args, "--checkpoint-every", "3")
    first = read_jsonl(out / "metrics.jsonl")
    assert first[-1]["loss"] < 0.5 * first[0]["loss"] and first[-1]["val_acc"] > 0.5
    assert main(["evaluate", "--dataset", str(learnable_mag / "graph"), "--model", str(out / "model.pt"), "--out",
                 str(tmp_path / "whole.json")]) == 0
    ranks(2, "--no-python", "sylvie", "evaluate", "--partition", learnable_mag / "p2", "--model", out / "model.pt",
          "--out", tmp_path / "parts.json")
    whole, parts = (json.loads((tmp_path / f).read_text()) for f in ("whole.json", "parts.json"))
    assert whole["val_acc"] == parts["val_acc"] and whole["test_acc"] == parts["test_acc"]
    again = ranks(2, "--no-python", "sylvie", "train", "--out", out, *args, "--checkpoint-every", "3")
    assert "resuming from" in again.stderr
    second = read_jsonl(out / "metrics.jsonl")
    assert [(r["loss"], r["val_acc"]) for r in second] == [(r["loss"], r["val_acc"]) for r in first]
