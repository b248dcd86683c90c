"""The pipeline on a real Slurm (Debian's slurm-wlm, started on this machine by workflow/scripts/slurm-local-up.sh)
through `snakemake --profile workflow/profiles/slurm`: training is a Slurm job of 2 tasks (one torchrun per node)
whose ranks rendezvous, and a training-config change resubmits only train/evaluate/report.

Needs root (it starts munged, slurmctld and slurmd). Every wait is bounded; the daemons are stopped afterwards.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import BIN, REPO, copy_repo, run

UP = REPO / "workflow" / "scripts" / "slurm-local-up.sh"
DOWN = REPO / "workflow" / "scripts" / "slurm-local-down.sh"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local Slurm needs root (munged, slurmctld, slurmd)")

CONFIG = """\
datasets:
  cora: {source: planetoid, raw_dir: data/embedded/planetoid}
defaults:
  dataset: cora
  partition: {method: metis, parts: 2, seed: 0}
  model: {arch: gcn, hidden: 16, layers: 2, dropout: 0.5, self_loop: true}
  train: {epochs: 30, lr: 0.01, seeds: [0], checkpoint_every: 0, log_every: 10}
runs:
  gcn-p2: {}
  gcn-p1:
    partition: {parts: 1}
launch: {ranks_per_node: 1}
report: {title: Sylvie on a local Slurm}
"""

SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+)/")


@pytest.fixture(scope="module")
def slurm():
    if shutil.which("timeout") is None:
        pytest.skip("coreutils `timeout` is missing")
    up = subprocess.run(["timeout", "-k", "10", "600", str(UP), "--nodes", "2"], capture_output=True, text=True)
    if up.returncode == 3:
        pytest.skip(f"slurm-wlm and munge are not installed and cannot be: {up.stderr.strip()}")
    try:
        assert up.returncode == 0, f"slurm-local-up.sh exited {up.returncode}:\n{up.stdout}\n{up.stderr}"
        yield
    finally:
        down = subprocess.run(["timeout", "-k", "10", "120", str(DOWN)], capture_output=True, text=True)
        assert down.returncode == 0, down.stderr
        assert subprocess.run(["pgrep", "-x", "slurmctld|slurmd|slurmstepd"], capture_output=True).returncode == 1


def snakemake_on_slurm(repo):
    """The pipeline through the Slurm profile (first status check after 2 s instead of 20), bounded by timeout."""
    p = run(["timeout", "-k", "10", "900", str(BIN / "snakemake"), "--profile", "workflow/profiles/slurm",
             "--slurm-init-seconds-before-status-checks", "2"], cwd=repo, timeout=960)
    return p.stdout + p.stderr


def submitted(log: str) -> list[tuple[int, str]]:
    """(Slurm job id, rule) of every job Snakemake submitted."""
    return [(int(j), rule) for j, rule in SUBMITTED.findall(log)]


def scontrol_job(job_id: int) -> dict:
    out = run(["timeout", "-k", "5", "30", "scontrol", "show", "job", "-o", str(job_id)]).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


@pytest.fixture(scope="module")
def pipeline(slurm, tmp_path_factory):
    repo = copy_repo(tmp_path_factory.mktemp("slurm") / "repo")
    (repo / "config" / "config.yaml").write_text(CONFIG)
    return repo, snakemake_on_slurm(repo)


def test_pipeline_runs_every_stage_but_download_as_slurm_jobs(pipeline):
    repo, log = pipeline
    assert (repo / "results" / "report" / "report.html").is_file()
    rules = sorted(rule for _, rule in submitted(log))
    assert rules == ["evaluate", "evaluate", "partition", "partition", "report", "train", "train"], log[-3000:]
    assert "localrule download" in log  # compute nodes may have no internet


def test_training_is_a_slurm_job_of_two_tasks_whose_ranks_rendezvous(pipeline):
    repo, log = pipeline
    train_log = (repo / "logs" / "train" / "gcn-p2" / "seed0.log").read_text()
    tasks = re.findall(r"^(\d): sylvie launch: Slurm job (\d+) step \S+, node (\d) of 2 \((\w+)\), 1 ranks, "
                       r"rendezvous (\S+)$", train_log, re.M)
    assert sorted(t[0] for t in tasks) == ["0", "1"], train_log[-3000:]
    assert len({t[1] for t in tasks}) == 1 and len({t[3] for t in tasks}) == 2 and len({t[4] for t in tasks}) == 1
    job = scontrol_job(int(tasks[0][1]))
    assert (job["NumNodes"], job["NumTasks"], job["JobState"]) == ("2", "2", "COMPLETED")
    assert job["Comment"].startswith("rule_train_wildcards_gcn-p2")
    # both ranks trained together: rank 0 exchanged halo rows with rank 1 every epoch
    records = [json.loads(line) for line in (repo / "results/gcn-p2/seed0/metrics.jsonl").read_text().splitlines()]
    assert len(records) == 30 and all(r["bytes_sent"] > 0 for r in records)
    assert json.loads((repo / "results/gcn-p2/seed0/eval.json").read_text())["test_acc"] > 0.3
    # one rank: one task, torchrun --standalone inside the jobstep's srun
    one = [j for j, rule in submitted(log) if rule == "train" and j != int(tasks[0][1])]
    assert scontrol_job(one[0])["NumTasks"] == "1"


def test_rerun_after_training_change_submits_only_train_evaluate_report(pipeline):
    repo, _ = pipeline
    config = repo / "config" / "config.yaml"
    config.write_text(config.read_text().replace("  gcn-p2: {}", "  gcn-p2: {train: {lr: 0.02}}"))
    log = snakemake_on_slurm(repo)
    assert sorted(rule for _, rule in submitted(log)) == ["evaluate", "report", "train"], log[-3000:]
    assert "localrule download" not in log
