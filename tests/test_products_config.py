"""config/products.yaml, the pipeline on ogbn-products' shape, as Snakemake plans it on a fresh copy of the repository
(its run, an hour here, is recorded in README.md): given with --configfile it is the config on its own, not merged
with config/config.yaml; config/products-tenth.yaml makes it 1/10; a partition at full size takes every core where
two would not fit in memory, so nothing runs beside it."""
import re

import pytest
from support.commands import BIN, run
from support.files import copy_repo

from sylvie.memory_budget import PARTITION_BYTES_PER_NODE, runs_alone


@pytest.mark.unit
def test_a_stage_runs_alone_where_two_would_not_fit():
    gb = 1 << 30
    assert runs_alone(2_449_029 * PARTITION_BYTES_PER_NODE, total=24 * gb)  # 15.9 GB each on 24 GB
    assert not runs_alone(244_903 * PARTITION_BYTES_PER_NODE, total=24 * gb)
    assert not runs_alone(2_449_029 * PARTITION_BYTES_PER_NODE, total=64 * gb)
    assert not runs_alone(10 * gb, total=None)  # unknown memory: nothing is held back


def dry_run(repo, *configs) -> str:
    return run([str(BIN / "snakemake"), "-n", "-p", "--cores", "2", "--configfile", *configs], cwd=repo).stdout


def jobs(out: str) -> dict:
    table = out.split("Job stats:")[1]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)\s*$", table, re.M) if m[0] != "total"}


def partition_threads(out: str) -> list[int]:
    blocks = re.findall(r"rule partition:\n((?:    .*\n)+)", out)
    return [int(m[1]) if (m := re.search(r"threads: (\d+)", b)) else 1 for b in blocks]


@pytest.mark.slow
def test_the_products_config_runs_on_its_own_and_its_tenth_in_minutes(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    full = dry_run(repo, "config/products.yaml")
    # two partitions (full-graph and sampled balance), one VIP analysis, four runs of one seed each, no Cora run
    assert jobs(full) == {"all": 1, "download": 1, "partition": 2, "vip": 1, "train": 4, "report": 1}
    assert "cora" not in full and "wildcards: dataset=products" in full
    alone = runs_alone(2_449_029 * PARTITION_BYTES_PER_NODE)
    assert partition_threads(full) == [2 if alone else 1] * 2
    tenth = dry_run(repo, "config/products.yaml", "config/products-tenth.yaml")
    assert jobs(tenth) == jobs(full) and partition_threads(tenth) == [1, 1]
    assert "--epochs 6" in tenth and "--epochs 3" not in tenth  # the tenth's sampled runs: 30 steps of 5 an epoch
