"""The README's worked example, config/own_graph.yaml (Cora as a user holds it: gzip CSV, string paper ids, subject
names), through the pipeline beside Cora from the Planetoid files with the same runs: the same accuracy."""
import json

import numpy as np
import pytest
import yaml
from support.commands import BIN, REPO, run
from support.files import copy_repo

pytestmark = pytest.mark.claims

SEEDS = [0, 1, 2]


def test_own_graph_example_matches_planetoid_cora(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    config = yaml.safe_load((REPO / "config" / "own_graph.yaml").read_text())
    (own,) = config["datasets"]
    config["datasets"]["cora"] = {"source": "planetoid", "raw_dir": "data/embedded/planetoid", "allow_download": False}
    config["defaults"]["train"]["seeds"] = SEEDS
    config["runs"].update({f"{name}-cora": {**(spec or {}), "dataset": "cora"} for name, spec in
                           list(config["runs"].items())})
    (repo / "both.yaml").write_text(yaml.safe_dump(config))
    run([str(BIN / "snakemake"), "--cores", "2", "--configfile", "both.yaml", "--replace-workflow-config"], cwd=repo,
        timeout=1800)
    meta = json.loads((repo / "data" / "datasets" / own / "meta.json").read_text())
    assert meta["source"] == "files" and meta["class_names"][0] == "subject_0"
    assert (repo / "data" / "datasets" / own / "node_keys.arrow").is_file()
    assert (repo / "results" / "report" / "report.html").is_file()
    for name in [n for n in config["runs"] if not n.endswith("-cora")]:
        accs = {d: [json.loads((repo / "results" / f"{name}{d}" / f"seed{s}" / "eval.json").read_text())["test_acc"]
                    for s in SEEDS] for d in ("", "-cora")}
        mine, cora = np.mean(accs[""]), np.mean(accs["-cora"])
        print(f"{name}: test accuracy {mine:.4f} from the CSV files, {cora:.4f} from Planetoid ({accs})")
        assert mine > 0.75, accs
        assert abs(mine - cora) <= 0.01, (name, accs)
