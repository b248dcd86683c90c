"""The pipeline (what `make run` runs) on a fresh copy of the repository, then rerun semantics.

The copy runs tests/configs/pipeline.yaml, a small configuration of the default pipeline's rules that takes every path
of config/config.yaml through them (see its header); the default config's claims are tested on its own runs in
tests/test_default_config.py. Counts of jobs follow the configuration: a change reruns exactly the runs it changes.
"""
import json
import re

import pytest
import torch
import yaml
from support.commands import BIN, REPO, run
from support.files import copy_repo

from sylvie.atomic import read_jsonl
from sylvie.config import resolve_runs

SMALL = REPO / "tests" / "configs" / "pipeline.yaml"


def scheduled_jobs(repo):
    """Rule name -> count from a dry run's job table."""
    out = run([str(BIN / "snakemake"), "-n", "--cores", "2"], cwd=repo).stdout
    table = out.split("Job stats:")[1] if "Job stats:" in out else ""
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)\s*$", table, re.M) if m[0] != "total"}


def runs_of(text: str) -> dict:
    return resolve_runs(yaml.safe_load(text))


def train_jobs(runs: dict, names=None) -> int:
    """Training jobs of ``names`` (default: every run): one per run, its seeds one after another."""
    return sum(1 for name in runs if names is None or name in names)


def partitions(runs: dict, names=None) -> int:
    """Partition jobs of ``names`` (default: every run): one per dataset and partition directory they read."""
    return len({(r.dataset, r.partition_id) for name, r in runs.items() if names is None or name in names})


def changed(before: dict, after: dict, section: str) -> set:
    """The runs whose ``section`` differs between two resolved configs."""
    return {name for name in after if getattr(after[name], section) != getattr(before[name], section)}


@pytest.fixture(scope="module")
def finished_pipeline(tmp_path_factory):
    repo = copy_repo(tmp_path_factory.mktemp("pipeline") / "repo")
    (repo / "config" / "config.yaml").write_text(SMALL.read_text())
    run([str(BIN / "snakemake"), "--cores", "2"], cwd=repo, timeout=1800)
    return repo


@pytest.fixture
def config(finished_pipeline):
    """The copy's config.yaml, put back as it was after the test."""
    path = finished_pipeline / "config" / "config.yaml"
    original = path.read_text()
    yield path
    path.write_text(original)


@pytest.mark.unit
def test_the_small_configuration_takes_every_path_of_the_default():
    """What tests/configs/pipeline.yaml must keep covering of config/config.yaml: every architecture, 4 parts and 1,
    fp32 and 1-bit halo exchange, synchronous and pipelined under either staleness policy, and sampled training with
    a VIP cache and without one, fetching remote rows in fp32 and in 1 bit, and link prediction beside node
    classification."""
    small, default = runs_of(SMALL.read_text()), runs_of((REPO / "config" / "config.yaml").read_text())

    def paths(runs):
        out = set()
        for r in runs.values():
            out |= {("arch", r.model.arch), ("parts", r.partition.parts), ("method", r.partition.method),
                    ("mode", r.train.mode), ("dataset", r.dataset), ("balance", r.partition.balance),
                    ("task", r.train.task)}
            if r.sampled:
                out |= {("cache", r.cache.policy if r.cache.alpha else "none"), ("remote_bits", r.sampling.remote_bits)}
            else:
                out |= {("bits", r.comm.bits), ("pipeline", r.comm.pipeline)}
                if r.comm.pipeline:
                    out.add(("staleness_policy", r.comm.staleness_policy))
            out.add(("seeds>1", len(r.train.seeds) > 1))
        return out

    assert paths(default) <= paths(small), paths(default) - paths(small)


@pytest.mark.e2e
def test_pipeline_writes_report(finished_pipeline):
    from sylvie.report.plot_names import PLOTS

    html = (finished_pipeline / "results" / "report" / "report.html").read_text()
    for run_name in runs_of(SMALL.read_text()):
        assert run_name in html
    assert html.count("data:image/png;base64,") == len(PLOTS) == 7  # link runs' MRR beside node runs' accuracy
    assert "s to target" in html and "Validation accuracy against seconds of training" in html
    assert "sampled, vip cache α=0.2" in html and "sampled, no cache" in html and "cache hits" in html
    assert "vs fp32" in html and "codec s/epoch" in html and "comm hidden s/epoch" in html
    assert "pipelined K=2" in html and "adaptive K=2" in html


@pytest.mark.e2e
def test_metrics_have_one_line_per_epoch(finished_pipeline):
    runs = runs_of(SMALL.read_text())
    for name, r in runs.items():
        for seed in r.train.seeds:
            lines = (finished_pipeline / f"results/{name}/seed{seed}/metrics.jsonl").read_text().splitlines()
            assert len(lines) == r.train.epochs, (name, seed)
            assert json.loads((finished_pipeline / f"results/{name}/seed{seed}/eval.json").read_text())["test_acc"] > 0
    rec = json.loads((finished_pipeline / "results/gcn-p4/seed0/metrics.jsonl").read_text().splitlines()[-1])
    for key in ("loss", "train_acc", "val_acc", "epoch_time", "comm_time", "bytes_sent", "bytes_received"):
        assert key in rec
    assert rec["bytes_sent"] > 0 and rec["comm_time"] > 0


@pytest.mark.e2e
def test_the_configured_optimiser_and_schedule_train(finished_pipeline):
    """sage-p2-1bit-pipe-k2 trains with AdamW, 2 epochs of warm-up from 0.1 x lr, then a cosine over the other 4."""
    lrs = [json.loads(line)["lr"] for line in
           (finished_pipeline / "results/sage-p2-1bit-pipe-k2/seed0/metrics.jsonl").read_text().splitlines()]
    assert lrs == pytest.approx([0.001, 0.0055, 0.01, 0.01 * (1 + 2 ** -0.5) / 2, 0.005, 0.01 * (1 - 2 ** -0.5) / 2])
    model = torch.load(finished_pipeline / "results/sage-p2-1bit-pipe-k2/seed0/model.pt", weights_only=True)
    assert model["train_cfg"]["optimizer"] == "AdamW" and model["train_cfg"]["lr_schedule"] == "CosineAnnealingLR"
    assert set(json.loads(line)["lr"] for line in
               (finished_pipeline / "results/gcn-p4/seed0/metrics.jsonl").read_text().splitlines()) == {0.01}


@pytest.mark.e2e
def test_nothing_to_do_after_a_run(finished_pipeline):
    assert scheduled_jobs(finished_pipeline) == {}


@pytest.mark.e2e
def test_learning_rate_change_reruns_train_and_report_only(finished_pipeline, config):
    original = config.read_text()
    config.write_text(original.replace("lr: 0.01,", "lr: 0.02,"))
    jobs = scheduled_jobs(finished_pipeline)
    assert set(jobs) == {"train", "report", "all"}, jobs  # each training job evaluates its model
    before, after = runs_of(original), runs_of(config.read_text())
    rerun, gat = changed(before, after, "train"), {name for name, r in before.items() if r.model.arch == "gat"}
    assert gat and rerun == set(before) - gat  # GAT trains with its own lr
    assert jobs["train"] == train_jobs(after, rerun), jobs


@pytest.mark.e2e
def test_partition_count_change_reruns_from_partition(finished_pipeline, config):
    original = config.read_text()
    config.write_text(original.replace("parts: 2,", "parts: 3,"))
    jobs = scheduled_jobs(finished_pipeline)
    assert "download" not in jobs
    before, after = runs_of(original), runs_of(config.read_text())
    rerun = changed(before, after, "partition")
    assert rerun == set(before) - {"gcn-p1", "gcn-p4"}  # the runs with parts of their own keep their partitions
    # one partition balanced for full-graph training, one for sampled (SALIENT++'s constraints), one of cora-links
    assert jobs.get("partition") == partitions(after, rerun) == 3 and jobs.get("vip") == 1, jobs
    assert jobs.get("train") == train_jobs(after, rerun) and "evaluate" not in jobs, jobs


@pytest.mark.e2e
def test_balance_changes_rerun_from_partition_only_the_runs_they_change(finished_pipeline, config):
    """The sampled runs balanced for full-graph training read the full-graph runs' partition (nothing to cut); a
    tolerance of their own is a partition of their own."""
    original = config.read_text()
    for balance, partition_jobs in (("{balance: full}", 0), ("{tolerance: 1.1}", 1)):
        config.write_text(original.replace("    train: {mode: sampled}",
                                           f"    train: {{mode: sampled}}\n    partition: {balance}"))
        jobs = scheduled_jobs(finished_pipeline)
        before, after = runs_of(original), runs_of(config.read_text())
        rerun = changed(before, after, "partition")
        assert rerun == {name for name, r in before.items() if r.sampled}
        assert jobs.get("partition", 0) == partition_jobs and jobs.get("vip") == 1, jobs
        assert jobs.get("train") == train_jobs(after, rerun) and "evaluate" not in jobs, jobs


@pytest.mark.e2e
def test_cache_changes_rerun_train_onward_and_fanout_changes_rerun_vip_onward(finished_pipeline, config):
    original = config.read_text()
    runs = runs_of(original)
    vip_run = train_jobs(runs, {"sage-p2-sampled-vip0.2"})
    sampled = train_jobs(runs, {name for name, r in runs.items() if r.sampled})
    config.write_text(original.replace("cache: {policy: vip, alpha: 0.2}", "cache: {policy: vip, alpha: 0.5}"))
    assert scheduled_jobs(finished_pipeline) == {"train": vip_run, "report": 1, "all": 1}
    config.write_text(original.replace("cache: {policy: vip, alpha: 0.2}", "cache: {policy: degree, alpha: 0.2}"))
    assert scheduled_jobs(finished_pipeline) == {"train": vip_run, "report": 1, "all": 1}
    config.write_text(original.replace("  model: {arch: gcn,", "  sampling: {fanouts: [15, 5]}\n  model: {arch: gcn,"))
    jobs = scheduled_jobs(finished_pipeline)
    assert jobs == {"vip": 1, "train": sampled, "report": 1, "all": 1}, jobs  # sampled runs only


@pytest.mark.e2e
def test_partition_parallel_evaluation_in_the_pipeline(finished_pipeline, config):
    """evaluate.mode partitioned for one run reruns only its jobs, which resume their finished training (the same
    epochs, none trained again) and evaluate on their 4 ranks: the eval.json whole-graph evaluation wrote."""
    original = config.read_text()
    before = json.loads((finished_pipeline / "results/gcn-p4/seed0/eval.json").read_text())
    losses = [r["loss"] for r in read_jsonl(finished_pipeline / "results/gcn-p4/seed0/metrics.jsonl")]
    config.write_text(original.replace("  gcn-p4:\n", "  gcn-p4:\n    evaluate: {mode: partitioned}\n"))
    assert scheduled_jobs(finished_pipeline) == {"train": train_jobs(runs_of(original), {"gcn-p4"}), "report": 1,
                                                 "all": 1}
    run([str(BIN / "snakemake"), "--cores", "2", "results/gcn-p4/seeds.json"], cwd=finished_pipeline)
    assert "resuming from" in (finished_pipeline / "logs/train/gcn-p4.log").read_text()
    assert [r["loss"] for r in read_jsonl(finished_pipeline / "results/gcn-p4/seed0/metrics.jsonl")] == losses
    after = json.loads((finished_pipeline / "results/gcn-p4/seed0/eval.json").read_text())
    assert before.pop("inference") == "whole graph, one process"
    assert after.pop("inference") == "partition-parallel, 4 ranks"
    before.pop("checksum"), after.pop("checksum")  # of the content, inference included
    assert after == before
