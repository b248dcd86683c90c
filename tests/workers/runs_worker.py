"""Run under torchrun (or tests/support/forked_ranks.py): several training runs one after another in the same ranks,
each as `sylvie train` runs it (``run_training``: its own watchdog and process group, joined and left), and rank 0 then
evaluates the run's model on the whole graph as `sylvie evaluate` does (``eval.json`` next to ``model.pt``). What a
pipeline of one Snakemake job per run computes, without starting 4 ranks (each importing torch and DGL) and an
evaluation process per run.

One thing differs from a process per run, and is made not to matter (tests/test_default_config.py checks the last
run of a launch against `sylvie train` in ranks of its own): torch names a process group by a count that leaving
the group resets (``fresh_group_names``). Sampling needs nothing: its draws are a function of the minibatch, not
of the thread or process that draws them.

argv[1]: a JSON file, a list of jobs {partition, out, seed, dataset, vip, model, train, comm, sampling, cache,
features} (sections as mappings; None or absent: the schema's defaults; no dataset: no evaluation).
"""
import json
import os
import sys
import time

# as `sylvie train` does before numba is imported (sylvie/cli.py, _as_rank)
if "OMP_NUM_THREADS" in os.environ:
    os.environ.setdefault("NUMBA_NUM_THREADS", os.environ["OMP_NUM_THREADS"])

import torch.distributed.distributed_c10d as c10d  # noqa: E402

from sylvie.config import section  # noqa: E402
from sylvie.evaluate import evaluate  # noqa: E402
from sylvie.launch.process_tree import die_with_parent  # noqa: E402
from sylvie.train.job import TrainingJob  # noqa: E402
from sylvie.train.run import run_training  # noqa: E402

SECTIONS = ("model", "train", "comm", "sampling", "cache", "features")


def train(job: dict) -> None:
    """One run, as `sylvie train --partition ... --out ... --seed ... <the run's flags>`."""
    s = {name: section(name, job.get(name)) for name in SECTIONS}
    run_training(TrainingJob(partition_dir=job["partition"], out_dir=job["out"], seed=job["seed"],
                             vip_dir=job.get("vip"), **s))


def fresh_group_names(index: int) -> None:
    """Process groups of job ``index`` under names no earlier job used. Leaving the process group resets torch's
    count of groups, so the next run's default group would take the first run's name, "default_pg/0/", in the same
    store (torchrun's, kept for the whole launch), and gloo would connect to the addresses the first run left
    there; `sylvie train` joins once per process and never meets this."""
    c10d._world.group_count = 1000 * index


def main() -> None:
    die_with_parent()
    rank = int(os.environ.get("RANK", 0))
    for index, job in enumerate(json.loads(open(sys.argv[1]).read())):
        start = time.perf_counter()
        fresh_group_names(index)
        train(job)
        trained = time.perf_counter()
        if rank == 0 and job.get("dataset"):
            evaluate(job["dataset"], os.path.join(job["out"], "model.pt"), os.path.join(job["out"], "eval.json"))
            took = time.perf_counter() - trained
            print(f"{job['out']}: trained in {trained - start:.1f} s, evaluated in {took:.1f} s", file=sys.stderr,
                  flush=True)
    # as `sylvie train` ends a rank (sylvie/cli.py, _rank_done): outputs are written, skip the C++ static destructors
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
