"""config/mag.yaml, the pipeline on ogbn-mag's shape (R-GCN and R-GAT, full-graph, fp32 and 1-bit pipelined), as
Snakemake plans it on a fresh copy of the repository, on its own and at 1/10 with config/mag-tenth.yaml (its run is
recorded in README.md)."""
import pytest
from support.files import copy_repo
from test_products_config import dry_run, jobs

pytestmark = pytest.mark.slow


def test_the_mag_config_plans_typed_runs_on_its_own_and_its_tenth(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    full = dry_run(repo, "config/mag.yaml")
    # one typed dataset, one partition, four runs of one seed each, no Cora run
    assert jobs(full) == {"all": 1, "download": 1, "partition": 1, "train": 4, "report": 1}
    assert "cora" not in full and "--preset mag --nodes 484936" in full and "--structure mag" in full
    assert full.count("--arch rgcn") == 2 and full.count("--arch rgat") == 2 and full.count("--bits 1") == 2
    assert full.count("--gradient-bits 4") == 2 and full.count("--epochs 100") == 4
    tenth = dry_run(repo, "config/mag.yaml", "config/mag-tenth.yaml")
    assert jobs(tenth) == jobs(full) and "--nodes 48494" in tenth
