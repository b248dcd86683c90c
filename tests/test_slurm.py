"""The pipeline on a real Slurm (Debian's slurm-wlm, started on this machine by workflow/scripts/slurm-local-up.sh)
through `snakemake --profile workflow/profiles/slurm`: training is a Slurm job of 2 tasks (one torchrun per node)
whose ranks rendezvous, and a training-config change resubmits only train/evaluate/report.

The run itself (tests/support/local_slurm.py) starts with the session, in the background; these tests wait for it and
check what it recorded. Needs root (munged, slurmctld, slurmd); every wait is bounded; the daemons are stopped.
"""
import json
import os
import re

import pytest
from support.local_slurm import submitted

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local Slurm needs root (munged, slurmctld, slurmd)")


pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def slurm_run(slurm_pipeline):
    slurm_pipeline.wait()
    if slurm_pipeline.skip_reason:
        pytest.skip(slurm_pipeline.skip_reason)
    return slurm_pipeline


def test_pipeline_runs_every_stage_but_download_as_slurm_jobs(slurm_run):
    log = slurm_run.logs[0]
    assert (slurm_run.repo / "results" / "report" / "report.html").is_file()
    rules = sorted(rule for _, rule in submitted(log))
    assert rules == ["partition", "partition", "report", "train", "train"], log[-3000:]  # train jobs evaluate
    assert "localrule download" in log  # compute nodes may have no internet


def test_training_is_a_slurm_job_of_two_tasks_whose_ranks_rendezvous(slurm_run):
    repo, log = slurm_run.repo, slurm_run.logs[0]
    train_jobs = {j: slurm_run.jobs[j] for j, rule in submitted(log) if rule == "train"}
    two = [j for j, job in train_jobs.items() if job["Comment"].startswith("rule_train_wildcards_gcn-p2")]
    assert len(two) == 1, train_jobs
    job = train_jobs[two[0]]
    assert (job["NumNodes"], job["NumTasks"], job["JobState"]) == ("2", "2", "COMPLETED"), job
    # the training log (of the rerun's gcn-p2 job, also 2 tasks): both tasks joined one rendezvous
    train_log = (repo / "logs" / "train" / "gcn-p2.log").read_text()
    tasks = re.findall(r"^(\d): sylvie launch: Slurm job (\d+) step \S+, node (\d) of 2 \((\w+)\), 1 ranks, "
                       r"rendezvous (\S+)$", train_log, re.M)
    assert sorted(t[0] for t in tasks) == ["0", "1"], train_log[-3000:]
    assert len({t[1] for t in tasks}) == 1 and len({t[3] for t in tasks}) == 2 and len({t[4] for t in tasks}) == 1
    assert slurm_run.jobs[int(tasks[0][1])]["NumTasks"] == "2"
    # both ranks trained together: rank 0 exchanged halo rows with rank 1 in every epoch
    records = [json.loads(line) for line in (repo / "results/gcn-p2/seed0/metrics.jsonl").read_text().splitlines()]
    assert len(records) == 30 and all(r["bytes_sent"] > 0 for r in records)
    assert json.loads((repo / "results/gcn-p2/seed0/eval.json").read_text())["test_acc"] > 0.3
    # one rank: a one-task job, its rank forked inside the jobstep's srun
    one = [job for j, job in train_jobs.items() if j not in two]
    assert [(job["NumNodes"], job["NumTasks"], job["JobState"]) for job in one] == [("1", "1", "COMPLETED")]


def test_rerun_after_training_change_submits_only_train_and_report(slurm_run):
    log = slurm_run.logs[1]
    assert sorted(rule for _, rule in submitted(log)) == ["report", "train"], log[-3000:]
    assert "localrule download" not in log
    assert all(slurm_run.jobs[j]["JobState"] == "COMPLETED" for j, _ in submitted(log))


def test_daemons_are_stopped_afterwards(slurm_run):
    assert slurm_run.leftover is None, slurm_run.leftover
    assert not os.path.exists("/etc/slurm/slurm.conf")
