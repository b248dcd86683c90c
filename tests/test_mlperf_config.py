"""config/mlperf-rgat.yaml, MLPerf's GNN benchmark shape (R-GAT on the igbh preset: sampled with a VIP cache and
without, and full-graph), as Snakemake plans it on a fresh copy of the repository: on its own, at 1/10, and over 3
seeds with the runs its accuracy claims compare (its runs are recorded in benchmarks/README.md)."""
import re

import pytest
from support.files import copy_repo
from test_products_config import dry_run, jobs

pytestmark = pytest.mark.slow


def test_the_mlperf_config_plans_the_benchmarks_model_and_sampling(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    full = dry_run(repo, "config/mlperf-rgat.yaml")
    # one dataset, a partition per regime (sampled, full), one VIP analysis, three runs of one seed each
    assert jobs(full) == {"all": 1, "download": 1, "partition": 2, "vip": 1, "train": 3, "report": 1}
    assert "cora" not in full and "--preset igbh --nodes 60000" in full
    assert full.count("--arch rgat --hidden 32 --layers 3") == 3 and full.count("--heads 4") == 3
    assert full.count("--fanouts 5 10 15 --batch-size 1024") == 3  # vip and the sampled runs: 15, 10, 5 from the seeds
    assert "--policy vip --alpha 0.2 " in full and "--alpha 0 " in full
    assert re.search(r"--bits 1 (--gradient-bits 0 )?--pipeline", full)  # gradients at comm.bits
    tenth = dry_run(repo, "config/mlperf-rgat.yaml", "config/mlperf-rgat-tenth.yaml")
    assert jobs(tenth) == jobs(full) and "--nodes 6000" in tenth
    seeds = dry_run(repo, "config/mlperf-rgat.yaml", "config/mlperf-rgat-tenth.yaml", "config/mlperf-rgat-seeds.yaml")
    # five runs of three seeds each, one job a run
    assert jobs(seeds)["train"] == 5 and seeds.count("--seed 0 1 2 ") == 5 and "--remote-bits 2" in seeds
