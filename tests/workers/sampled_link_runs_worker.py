"""Run under torchrun (or tests/support/forked_ranks.py): several sampled link-prediction runs one after another in the
same ranks, each as `sylvie train --task link --mode sampled ...` runs it (``run_training``), as
tests/workers/runs_worker.py runs node-classification ones (whose notes apply).

argv[1]: a JSON file, a list of jobs {partition, out, seed, vip, model, train, sampling, cache, features, link}
(sections as mappings; None or absent: the schema's defaults; train gets task link and mode sampled).
"""
import json
import os
import sys

# as `sylvie train` does before numba is imported (sylvie/cli.py, _as_rank)
if "OMP_NUM_THREADS" in os.environ:
    os.environ.setdefault("NUMBA_NUM_THREADS", os.environ["OMP_NUM_THREADS"])

from runs_worker import fresh_group_names  # noqa: E402

from sylvie.config import section  # noqa: E402
from sylvie.launch.process_tree import die_with_parent  # noqa: E402
from sylvie.train.job import TrainingJob  # noqa: E402
from sylvie.train.run import run_training  # noqa: E402

SECTIONS = ("model", "sampling", "cache", "features", "link")


def main() -> None:
    die_with_parent()
    for index, job in enumerate(json.loads(open(sys.argv[1]).read())):
        fresh_group_names(index)
        s = {name: section(name, job.get(name)) for name in SECTIONS}
        train = section("train", {**(job.get("train") or {}), "task": "link", "mode": "sampled"})
        run_training(TrainingJob(partition_dir=job["partition"], out_dir=job["out"], seed=job["seed"],
                                 vip_dir=job.get("vip"), train=train, comm=section("comm"), **s))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
