"""A stage replaces only what it recognises as its own earlier output; it never deletes what it did not write."""
import os
from pathlib import Path

import pytest
from conftest import BIN, CORA_RAW, run


def sylvie(*args, **kw):
    return run([str(BIN / "sylvie"), *map(str, args)], check=False, **kw)


def _partition(dataset, out, **kw):
    return sylvie("partition", dataset, "--out", out, "--parts", "2", **kw)


@pytest.mark.slow
def test_partition_refuses_a_directory_it_did_not_write(cora_dir, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    p = _partition(cora_dir, out)
    assert p.returncode == 2
    assert "notes.txt" in p.stderr and str(out) in p.stderr.splitlines()[-1]
    assert (out / "notes.txt").read_text() == "precious"


@pytest.mark.slow
def test_partition_refuses_the_parent_of_its_partitions(cora_dir, tmp_path):
    parts = tmp_path / "partitions"
    assert _partition(cora_dir, parts / "metis-p2").returncode == 0
    (parts / "unrelated.txt").write_text("keep me")
    p = _partition(cora_dir, parts)
    assert p.returncode == 2
    assert (parts / "unrelated.txt").exists() and (parts / "metis-p2" / "manifest.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("where", [".", "home", "input", "parent-of-input"])
def test_refused_locations(cora_dir, tmp_path, where):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "keep.txt").write_text("keep")
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("keep")
    target = {".": ".", "home": str(home), "input": str(cora_dir), "parent-of-input": str(cora_dir.parent)}
    p = _partition(cora_dir, target[where], cwd=cwd, env={"HOME": str(home)})
    assert p.returncode == 2, p.stderr
    assert "refus" in p.stderr.splitlines()[-1]
    assert (cwd / "keep.txt").exists() and (home / "keep.txt").exists()
    assert (cora_dir / "meta.json").exists()


@pytest.mark.slow
def test_partition_replaces_its_own_earlier_output(cora_dir, tmp_path):
    out = tmp_path / "p"
    assert _partition(cora_dir, out).returncode == 0
    first = (out / "manifest.json").stat().st_mtime_ns
    p = _partition(cora_dir, out)
    assert p.returncode == 0, p.stderr
    assert (out / "manifest.json").stat().st_mtime_ns != first


@pytest.mark.slow
def test_download_refuses_a_directory_it_did_not_write(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    p = sylvie("download", "cora", "--raw-dir", CORA_RAW, "--out", out)
    assert p.returncode == 2 and "thesis.tex" in p.stderr
    assert (out / "thesis.tex").read_text() == "precious"


@pytest.mark.slow
def test_download_refuses_its_own_raw_dir(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for f in Path(CORA_RAW).iterdir():
        (raw / f.name).write_bytes(f.read_bytes())
    p = sylvie("download", "cora", "--raw-dir", raw, "--out", raw)
    assert p.returncode == 2
    assert sorted(os.listdir(raw)) == sorted(os.listdir(CORA_RAW))


@pytest.mark.unit
def test_the_root_and_the_home_directory_are_refused_in_process():
    from sylvie.errors import SylvieError
    from sylvie.output_dir import CANONICAL_GRAPH, PARTITION, check_replaceable

    for target in ("/", str(Path.home()), "~"):
        for kind in (PARTITION, CANONICAL_GRAPH):
            with pytest.raises(SylvieError, match="refusing --out"):
                check_replaceable(target, kind)


@pytest.mark.slow
def test_evaluate_and_train_refuse_to_write_into_their_inputs(cora_dir, cora_partitions, tmp_path):
    p = sylvie("evaluate", "--dataset", cora_dir, "--model", tmp_path / "model.pt", "--out", cora_dir / "meta.json")
    assert p.returncode == 2 and "refusing --out" in p.stderr
    p = sylvie("train", "--partition", cora_partitions[1], "--out", cora_partitions[1], "--epochs", "1")
    assert p.returncode == 2 and "refusing --out" in p.stderr
    assert sorted(f.name for f in cora_partitions[1].iterdir()) == ["manifest.json", "part-0.arrow", "topology.arrow"]


@pytest.mark.slow
def test_train_refuses_a_directory_that_is_not_a_run_directory(cora_partitions, tmp_path):
    out = tmp_path / "project"
    out.mkdir()
    (out / "model.pt").write_text("someone else's model")
    (out / "paper.tex").write_text("precious")
    p = sylvie("train", "--partition", cora_partitions[1], "--out", out, "--epochs", "1")
    assert p.returncode == 2 and "paper.tex" in p.stderr and "not a run directory" in p.stderr
    assert (out / "model.pt").read_text() == "someone else's model"
    assert sorted(os.listdir(out)) == ["model.pt", "paper.tex"]
