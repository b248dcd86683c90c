"""Bad input: a clear error naming the file or field, a non-zero exit, and no partial output."""
import shutil

import numpy as np
import pytest
from conftest import BIN, run, torchrun

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
    p = torchrun(2, "--no-python", "sylvie", "train", "--partition", parts, "--out", tmp_path / "run",
                 "--epochs", "2", check=False)
    assert p.returncode != 0
    assert "part-1.arrow: sha256 does not match the manifest" in p.stderr
    assert not (tmp_path / "run" / "model.pt").exists() and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_wrong_number_of_ranks(cora_partitions, tmp_path):
    p = torchrun(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[4], "--out", tmp_path / "run",
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
