"""A stage replaces only what it recognises as its own earlier output; it never deletes what it did not write."""
import os
from pathlib import Path

import pytest
from support.commands import BIN, CORA_RAW, refused_line, run


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


def _files(folder: Path) -> dict:
    """Every file under ``folder`` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.unit
def test_no_stage_writes_over_its_input_or_files_it_did_not_write(tmp_path, capsys, monkeypatch):
    """`sylvie export` as every stage: never the dataset, inside it or around it, never the current directory, never
    a folder of a user's files; all or nothing on a full disk, replacing only its own earlier export. Partition-
    parallel evaluation never writes into the --dataset it reads, nor the cluster bench into its --partition."""
    import errno

    import sylvie.data.export as export
    from sylvie.cli import main
    from sylvie.config import section
    from sylvie.data.registry import download
    from sylvie.errors import SylvieError

    (tmp_path / "in").mkdir()
    (tmp_path / "in/nodes.csv").write_text("id,f0,label,split\na,1,0,train\nb,0,1,val\nc,1,1,test\n")
    (tmp_path / "in/edges.csv").write_text("src,dst\na,b\nb,c\n")
    entry = {"source": "files", "edges": str(tmp_path / "in/edges.csv"), "node_table": str(tmp_path / "in/nodes.csv"),
             "node_key": "id", "feature_columns": ["f*"], "split_column": "split"}
    dataset = tmp_path / "data/mine"
    download("mine", dataset, section("dataset", entry))
    # a files source whose files are inside its --out
    with pytest.raises(SylvieError, match=r"refusing --out .*/in: it is a parent of this stage's input"):
        download("mine", tmp_path / "in", section("dataset", entry))
    kept = _files(tmp_path)

    def refused(*argv) -> str:
        line = refused_line([str(a) for a in argv], capsys)
        assert _files(tmp_path) == kept, f"{argv}: something was written or changed"
        return line

    monkeypatch.chdir(tmp_path / "in")
    assert "refusing --out ../data/mine: it is this stage's input ../data/mine" in \
        refused("export", "../data/mine", "--out", "../data/mine", "--format", "arrow")
    assert "it is inside this stage's input" in refused("export", dataset, "--out", dataset / "files")
    assert "it is a parent of this stage's input" in refused("export", dataset, "--out", tmp_path / "data")
    assert "refusing --out .: it is the current directory" in refused("export", dataset, "--out", ".")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "nodes.csv").write_text("my own")
    kept = _files(tmp_path)
    assert "it holds nodes.csv but no export.json, which sylvie export writes with them); nothing was changed" in \
        refused("export", dataset, "--out", mine, "--format", "csv")

    # an earlier export is replaced whole; a full disk leaves it as it was, and no temporary beside it
    out = tmp_path / "export"
    assert main(["export", str(dataset), "--out", str(out), "-q"]) == 0
    assert main(["export", str(dataset), "--out", str(out), "--format", "csv", "-q"]) == 0
    assert sorted(os.listdir(out)) == ["edges.csv", "export.json", "nodes.csv"]
    write = export._write

    def disk_full(path, *args):
        write(path, *args)
        if path.name.startswith("nodes"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(export, "_write", disk_full)
    kept = _files(tmp_path)
    assert f"{out}: could not be written: the disk is full" in refused("export", dataset, "--out", out)
    assert f"{out.parent / 'new'}: could not be written: the disk is full" in \
        refused("export", dataset, "--out", out.parent / "new")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]

    # the other stages: evaluate's outputs never in its --dataset; the cluster bench's node logs not in --partition
    for flags in (["--out", dataset / "meta.json"], ["--out", tmp_path / "eval.json", "--predictions",
                                                     dataset / "predictions.csv"]):
        assert "is inside the input --dataset" in refused("evaluate", "--partition", tmp_path / "p", "--dataset",
                                                          dataset, "--model", tmp_path / "model.pt", *flags)
    (tmp_path / "p").mkdir()
    kept = _files(tmp_path)
    assert "refusing --out" in refused("bench", "cluster", "--partition", tmp_path / "p", "--out", tmp_path / "p",
                                       "--nodes", "2")
    assert not os.listdir(tmp_path / "p")


@pytest.mark.unit
def test_evaluate_writes_over_only_its_own_eval_json_and_predictions(tmp_path, capsys):
    """An existing --out is replaced only where it is an eval.json `sylvie evaluate` wrote (one from before eval.json
    carried a checksum, or a damaged one, too), an existing --predictions only where it is predictions it wrote (a 1-D
    int64 .npy, a CSV or TSV headed node, prediction, a Parquet file with sylvie's mark); a user's file is refused
    before any work, in one line naming it, and nothing is changed."""
    import gzip
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sylvie.evaluate.result import check_outputs
    from sylvie.formats.eval_result import EvalResult, write_eval_result
    from sylvie.formats.predictions import write_predictions

    mine = tmp_path / "t"
    mine.mkdir()
    (mine / "nodes.csv").write_text("id,f0,label\na,1,0\n")  # the issue's: a node table as --out
    (mine / "edges_copy.csv").write_text("src,dst\na,b\n")  # and an edge list as --predictions
    (mine / "notes.json").write_text('{"dataset": "mine", "test_acc": 0.9}')  # JSON, not an evaluation
    (mine / "empty.json").write_text("")
    np.save(mine / "labels.npy", np.zeros((3, 2), np.int64))
    np.save(mine / "scores.npy", np.zeros(3))
    pq.write_table(pa.table({"node": [0], "prediction": [1]}), mine / "other_model.parquet")  # not ours: no mark
    with gzip.open(mine / "classes.tsv.gz", "wt") as f:
        f.write("id\tclass\n")
    (mine / "preds.csv").write_bytes(b"\x1f\x8b not gzip")
    os.mkfifo(mine / "pipe.json")  # never opened: a reader would wait for a writer
    kept = _files(tmp_path)
    said = {"--out": "an eval.json written by sylvie evaluate",
            "--predictions": "predictions written by sylvie evaluate --predictions"}
    for flag, name, why in (
            ("--out", "nodes.csv", "not JSON"), ("--out", "notes.json", "not of its fields"),
            ("--out", "empty.json", "not JSON"), ("--out", "pipe.json", "not a regular file"),
            ("--predictions", "edges_copy.csv", "a table whose header is 'src,dst'"),
            ("--predictions", "labels.npy", "an array of int64, shape (3, 2)"),
            ("--predictions", "scores.npy", "an array of float64, shape (3,)"),
            ("--predictions", "other_model.parquet", "a Parquet table with columns node, prediction, without "
                                                     "sylvie's mark"),
            ("--predictions", "classes.tsv.gz", "a table whose header is 'id\\tclass'"),
            ("--predictions", "preds.csv", "not text")):
        outs = ["--out", str(mine / name)] if flag == "--out" else \
            ["--out", str(tmp_path / "eval.json"), "--predictions", str(mine / name)]
        line = refused_line(["evaluate", "--dataset", str(tmp_path / "ds"), "--model", str(tmp_path / "model.pt"),
                             *outs], capsys)
        assert line.endswith(f"sylvie evaluate: error: refusing {flag} {mine / name}: it exists and is not "
                             f"{said[flag]} ({why}); nothing was changed; give another {flag} or move it away "
                             f"yourself"), line
    assert _files(tmp_path) == kept

    # what evaluate wrote is replaced: eval.json (damaged or from before checksums too) and each kind of predictions
    ours = tmp_path / "run"
    ours.mkdir()
    result = EvalResult(dataset="mine", evaluator="accuracy", inference="whole graph, one process",
                        accuracies={"train": 1.0, "val": 0.5, "test": 0.5}, model={"arch": "gcn"},
                        train={"seed": 0}, summary={"num_parts": 1})
    write_eval_result(ours / "eval.json", result)
    content = json.loads((ours / "eval.json").read_text())
    (ours / "edited.json").write_text(json.dumps({**content, "test_acc": 0.99}))
    (ours / "older.json").write_text(json.dumps({k: v for k, v in content.items()
                                                 if k not in ("checksum", "format_version")}))
    for name in ("p.npy", "p.parquet", "p.csv", "p.tsv.gz"):
        write_predictions(ours / name, np.array([1, 0], np.int64), pa.array(["a", "b"]), ["x", "y"])
    for out in ("eval.json", "edited.json", "older.json"):
        for name in ("p.npy", "p.parquet", "p.csv", "p.tsv.gz"):
            check_outputs(ours / out, ours / name, {"--model": tmp_path / "model.pt", "--dataset": tmp_path / "ds"})


@pytest.mark.unit
def test_a_link_to_itself_or_to_nothing_given_as_an_input_is_said_as_that_input(tmp_path, capsys, monkeypatch):
    """Where a stage checks its output's location against its inputs, an input that is a link leading back to itself
    or to nothing is no traceback (``resolved_path`` never raises): the input's own line names it."""
    from sylvie.output_dir import CANONICAL_GRAPH, check_replaceable, resolved_path

    monkeypatch.chdir(tmp_path)
    os.mkdir("loop")
    os.symlink("a.csv", "loop/a.csv")  # the issue's: a link to itself
    os.symlink("b.csv", "loop/c.csv")  # two links leading to each other
    os.symlink("c.csv", "loop/b.csv")
    os.symlink("gone.csv", "loop/d.csv")  # a link to nothing
    Path("nodes.csv").write_text("id,f0,label,split\na,1,0,train\nb,0,1,val\nc,1,1,test\n")
    Path("edges.csv").write_text("src,dst\na,b\nb,c\n")
    for link in ("loop/a.csv", "loop/b.csv", "loop/d.csv"):
        assert resolved_path(link).parent == tmp_path / "loop"
        assert check_replaceable("out", CANONICAL_GRAPH, (link, "nodes.csv")) == tmp_path / "out"
    loop = "a symbolic link that leads back to itself (a loop); replace it with the file it should name, or remove it"
    to_nothing = "a symbolic link to gone.csv, which does not exist; restore its target, or remove the link"
    files = ["download", "x", "--source", "files", "--node-key", "id", "--split-column", "split", "--feature-columns",
             "f0", "--out", "ds"]
    for argv, said in (
            ([*files, "--edges", "loop/a.csv", "--node-table", "nodes.csv"], f"loop/a.csv: edges: {loop}"),
            ([*files, "--edges", "edges.csv", "--node-table", "loop/b.csv"], f"loop/b.csv: node_table: {loop}"),
            ([*files, "--edges", "loop/d.csv", "--node-table", "nodes.csv"], f"loop/d.csv: edges: {to_nothing}"),
            (["evaluate", "--dataset", "ds", "--model", "loop/a.csv", "--out", "e.json"],
             f"loop/a.csv: --model: {loop}"),
            (["evaluate", "--dataset", "loop/d.csv", "--model", "m.pt", "--out", "e.json"],
             f"loop/d.csv: --dataset: {to_nothing}"),
            (["evaluate", "--partition", "loop/c.csv", "--model", "m.pt", "--out", "e.json"],
             f"loop/c.csv: --partition: {loop}")):
        line = refused_line(argv, capsys)
        assert line.endswith(said), line
    assert sorted(os.listdir()) == ["edges.csv", "loop", "nodes.csv"]  # nothing written


@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--out", "--eval-out"])
def test_several_seeds_need_their_seed_in_every_path(cora_partitions, tmp_path, flag, capsys):
    """`sylvie train --seed 0 1`: one run directory (and evaluation) per seed; a path without {seed} would have every
    seed write over the last, and is refused in one line, before anything is written."""
    paths = {"--out": str(tmp_path / "run{seed}"), "--eval-out": str(tmp_path / "eval{seed}.json")}
    paths[flag] = str(tmp_path / "same")
    line = refused_line(["train", "--partition", str(cora_partitions[2]), "--seed", "0", "1",
                         *(x for kv in paths.items() for x in kv)], capsys)
    assert f"{flag} {tmp_path / 'same'}: 2 seeds train one after another" in line and "{seed}" in line, line
    assert not any(tmp_path.iterdir())
