"""Bad input: a clear error naming the file or field, a non-zero exit, and no partial output."""
import shutil

import numpy as np
import pytest
from support.commands import BIN, ranks, run

from sylvie.data.graph import _nodes_table, _write_arrow, load_graph

pytestmark = pytest.mark.slow


def sylvie(*args):
    return run([str(BIN / "sylvie"), *map(str, args)], check=False)


def _leftovers(parent, name):
    return [p.name for p in parent.iterdir() if p.name.startswith(name) or p.name.startswith("." + name)]


def test_unknown_dataset(tmp_path):
    p = sylvie("download", "nosuchgraph", "--out", tmp_path / "ds")
    assert p.returncode == 2
    assert "unknown dataset 'nosuchgraph'" in p.stderr
    assert _leftovers(tmp_path, "ds") == []


def test_missing_planetoid_files_without_download(tmp_path):
    p = sylvie("download", "citeseer", "--raw-dir", tmp_path / "empty", "--no-allow-download", "--out", tmp_path / "ds")
    assert p.returncode == 2 and "ind.citeseer" in p.stderr and str(tmp_path / "empty") in p.stderr
    assert _leftovers(tmp_path, "ds") == []


@pytest.mark.parametrize("damage,message", [
    ("label", "field 'label' is out of range"),
    ("nan", "field 'feat' has non-finite values"),
])
def test_bad_dataset_content(cora_dir, tmp_path, damage, message):
    bad = tmp_path / "cora-bad"
    shutil.copytree(cora_dir, bad)
    g = load_graph(cora_dir)  # not bad's: its columns are that file, mapped in place, which is rewritten below
    if damage == "label":
        g.labels = g.labels.copy()
        g.labels[np.flatnonzero(g.train_mask)[0]] = 99
    else:
        g.features = g.features.copy()
        g.features[5, 3] = np.nan
    _write_arrow(bad / "nodes.arrow", _nodes_table(g))  # bypasses the writer's validation on purpose
    p = sylvie("partition", bad, "--out", tmp_path / "parts", "--parts", "2")
    assert p.returncode == 2
    assert message in p.stderr and "nodes.arrow" in p.stderr
    assert _leftovers(tmp_path, "parts") == []


def test_more_parts_than_nodes(cora_dir, tmp_path):
    p = sylvie("partition", cora_dir, "--out", tmp_path / "parts", "--parts", "5000")
    assert p.returncode == 2 and "parts=5000 is more than the 2708 nodes" in p.stderr
    assert _leftovers(tmp_path, "parts") == []


def test_shard_with_one_flipped_byte(cora_partitions, tmp_path):
    parts = tmp_path / "p2"
    shutil.copytree(cora_partitions[2], parts)
    shard = parts / "part-1.arrow"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    p = ranks(2, "--no-python", "sylvie", "train", "--partition", parts, "--out", tmp_path / "run",
                 "--epochs", "2", check=False)
    assert p.returncode != 0
    assert "part-1.arrow: sha256 does not match the manifest" in p.stderr
    assert not (tmp_path / "run" / "model.pt").exists() and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_wrong_number_of_ranks(cora_partitions, tmp_path):
    p = ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[4], "--out", tmp_path / "run",
                 "--epochs", "1", check=False)
    assert p.returncode != 0 and "launch with torchrun --nproc-per-node 4" in p.stderr


def test_malformed_cli_value(cora_partitions, tmp_path):
    p = sylvie("train", "--partition", cora_partitions[1], "--out", tmp_path / "run", "--lr", "-1")
    assert p.returncode == 2 and "'lr'" in p.stderr


@pytest.mark.parametrize("old,new,field", [
    ("lr: 0.01,", "lr: -0.01,", "defaults.train.lr"),
    ("method: metis,", "method: kmeans,", "defaults.partition.method"),
    ("parts: 4,", "parts: four,", "defaults.partition.parts"),
])
def test_malformed_config_value(repo_copy, old, new, field):
    cfg = repo_copy / "config" / "config.yaml"
    text = cfg.read_text()
    assert old in text
    cfg.write_text(text.replace(old, new))
    p = run([str(BIN / "snakemake"), "-n", "--cores", "1"], cwd=repo_copy, check=False)
    assert p.returncode != 0
    assert f"invalid value for '{field}'" in p.stdout + p.stderr
    assert not (repo_copy / "results").exists() and not (repo_copy / "data" / "datasets").exists()


def test_run_naming_unknown_dataset(repo_copy):
    cfg = repo_copy / "config" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("  gcn-p1:\n", "  gcn-p1:\n    dataset: coraa\n"))
    p = run([str(BIN / "snakemake"), "-n", "--cores", "1"], cwd=repo_copy, check=False)
    assert p.returncode != 0 and "'coraa' is not a key of datasets" in p.stdout + p.stderr


# ---- datasets the config names: refused when the Snakefile loads the config, whatever exists on disk ------------

# (datasets section, what the error names): a name no loader knows, in the wrong case, a source's unknown name, and
# keys that would become paths outside data/ and logs/
UNBUILDABLE = [
    ("Cora: {raw_dir: data/embedded/planetoid}", "datasets.Cora: unknown dataset 'Cora'; did you mean 'cora'?"),
    ("mydata: {}", "datasets.mydata: unknown dataset 'mydata'"),
    ("pubmedd: {source: planetoid}", "datasets.pubmedd: dataset 'pubmedd': source planetoid has no dataset"),
    ("a/cora: {source: synthetic}", "'a/cora' does not match"),
    ("../../evil: {source: synthetic}", "'../../evil' does not match"),
]


def _unbuildable_config(repo, datasets: str) -> None:
    key = datasets.split(":")[0]
    (repo / "config" / "config.yaml").write_text(f"datasets:\n  {datasets}\nruns:\n  r: {{dataset: '{key}'}}\n")


@pytest.mark.parametrize("report", [False, True], ids=["no-report", "report-exists"])
@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "real-run"])
def test_a_dataset_no_loader_can_build_stops_snakemake_before_it_plans(repo_copy, report, dry):
    """With results/report/report.html present, an error raised while Snakemake plans was swallowed ("Nothing to be
    done", exit 0, the old report looking current); raised when the config is loaded, it is never lost."""
    _unbuildable_config(repo_copy, UNBUILDABLE[0][0])
    if report:
        (repo_copy / "results" / "report").mkdir(parents=True)
        (repo_copy / "results" / "report" / "report.html").write_text("<html>an old report</html>")
    p = run([str(BIN / "snakemake"), *(["-n"] if dry else []), "--cores", "1"], cwd=repo_copy, check=False)
    assert p.returncode != 0, p.stdout + p.stderr
    assert UNBUILDABLE[0][1] in p.stdout + p.stderr and "Nothing to be done" not in p.stdout + p.stderr
    assert not (repo_copy / "data" / "datasets").exists() and not (repo_copy / "logs").exists()


@pytest.mark.parametrize("datasets, named", UNBUILDABLE[1:], ids=["no-source", "source-name", "slash", "dotdot"])
def test_every_unbuildable_or_unsafe_dataset_key_is_refused_at_load(repo_copy, datasets, named):
    _unbuildable_config(repo_copy, datasets)
    (repo_copy / "results" / "report").mkdir(parents=True)
    (repo_copy / "results" / "report" / "report.html").write_text("<html>an old report</html>")
    before = sorted(p.name for p in repo_copy.iterdir())
    p = run([str(BIN / "snakemake"), "--cores", "1"], cwd=repo_copy, check=False)
    assert p.returncode != 0 and named in p.stdout + p.stderr, p.stdout + p.stderr
    # no evil/, evil.log or data/ written (.snakemake/ is Snakemake's own log of the attempt)
    assert sorted(p.name for p in repo_copy.iterdir() if p.name != ".snakemake") == before
    assert not (repo_copy.parent / "evil").exists() and not (repo_copy.parent.parent / "evil").exists()
