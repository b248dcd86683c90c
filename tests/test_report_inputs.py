"""`sylvie report` given broken run directories or an --out it cannot write: one line naming the file or --out and
what to do, exit 2, no traceback, no report (an earlier one stays as it was)."""
import contextlib
import ctypes
import json
import os
import shutil

import pytest
from support.files import truncate
from test_report import report, write_run

pytestmark = pytest.mark.unit

# A partition's manifest.json, as `sylvie partition` writes it (sylvie/partition/shard_writer.py), trimmed
PARTITION_MANIFEST = {
    "format_version": 3, "dataset": "cora", "dataset_fingerprint": "ab12", "method": "metis", "seed": 0,
    "num_parts": 4, "num_nodes": 2708, "num_edges": 10556, "num_features": 1433, "num_classes": 7, "num_train": 140,
    "edge_cut": 500, "parts": [{"part": 0, "file": "part-0.arrow", "sha256": "cd34", "inner_nodes": 677}],
    "topology": {"file": "topology.arrow", "sha256": "ef56", "part_offsets": [0, 677]}, "checksum": "0123"}


def _replace_by_dir(path):
    path.unlink()
    path.mkdir()


def _edit_json(path, **changes):
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}, indent=2))


def _write(text):
    return lambda path: path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)


def _eval_as_metrics(path):
    path.write_text(json.dumps(json.loads((path.parent / "eval.json").read_text())) + "\n")


def _nan_accuracy(path):
    path.write_text(path.read_text().replace('"test_acc": 0.8', '"test_acc": NaN'))


def _file_instead(path):
    shutil.rmtree(path)
    path.write_text("x")


# what is damaged ("": the run directory), how, and a word of what the message says (it names the path, too)
DAMAGES = {
    "eval missing": ("eval.json", lambda p: p.unlink(), "not found"),
    "eval is a directory": ("eval.json", _replace_by_dir, "found a directory"),
    "eval invalid bytes": ("eval.json", _write(b"\xff\xfe{\x00"), "not UTF-8"),
    "eval truncated": ("eval.json", truncate, "not valid JSON"),
    "eval is a partition manifest": ("eval.json", _write(json.dumps(PARTITION_MANIFEST, indent=2)),
                                     "it looks like a partition manifest"),
    "eval is a failure record": ("eval.json", _write('{"reason": "diverged", "epoch": 3, "message": "m"}'),
                                 "it looks like a run failure record"),
    "eval edited: accuracy a word": ("eval.json", lambda p: _edit_json(p, test_acc="high"),
                                     "'test_acc' is \"high\", not a number"),
    "eval edited: seed a list": ("eval.json", lambda p: _edit_json(p, train={"seed": [0]}),
                                 "'train.seed' is [0], not an integer"),
    "eval edited: NaN": ("eval.json", _nan_accuracy, "NaN is not a JSON number"),
    "metrics missing": ("metrics.jsonl", lambda p: p.unlink(), "not found"),
    "metrics empty": ("metrics.jsonl", _write(""), "holds no epochs"),
    "metrics truncated": ("metrics.jsonl", truncate, "is not valid JSON"),
    "metrics invalid bytes": ("metrics.jsonl", _write(b'{"loss": 1}\n\x80\x81\n'), "not UTF-8"),
    "metrics is a directory": ("metrics.jsonl", _replace_by_dir, "found a directory"),
    "metrics is an eval.json": ("metrics.jsonl", _eval_as_metrics, "it looks like an evaluation"),
    "metrics edited: loss a word": ("metrics.jsonl", _write('{"epoch": 0, "loss": "low", "epoch_time": 0.1}\n'),
                                    "'loss' is \"low\", not a number"),
    "failed.json damaged": ("failed.json", _write('{"reason": "div'), "not a run failure record"),
    "run directory is a file": ("", _file_instead, "not a run directory"),
    "run directory missing": ("", shutil.rmtree, "no such run directory"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_broken_run_directory_is_a_one_line_error(tmp_path, capsys, damage):
    good = write_run(tmp_path / "results/gcn/seed0", seed=0)
    broken = write_run(tmp_path / "results/gcn/seed1", seed=1)
    name, harm, says = DAMAGES[damage]
    path = broken / name if name else broken
    harm(path)
    code, err, _ = report(tmp_path, [good, broken], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"sylvie report: error: {path}") and says in err, err
    assert not (tmp_path / "report").exists()  # nothing written


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    run = write_run(tmp_path / "results/gcn/seed0")
    (tmp_path / "report.html").write_text("mine")
    code, err, _ = report(tmp_path, [run], capsys, out=tmp_path / "report.html")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--out {tmp_path / 'report.html'}: it exists and is not a directory" in err
    assert (tmp_path / "report.html").read_text() == "mine"


_MS_RDONLY, _MS_REMOUNT = 1, 32


@contextlib.contextmanager
def _tmpfs(path, size="64k"):
    """A small tmpfs at ``path`` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    libc = ctypes.CDLL(None, use_errno=True)
    path.mkdir()
    if libc.mount(b"tmpfs", bytes(path), b"tmpfs", 0, f"size={size}".encode()) != 0:
        pytest.skip(f"cannot mount a tmpfs here: {os.strerror(ctypes.get_errno())}")
    try:
        yield lambda flags: libc.mount(b"tmpfs", bytes(path), b"tmpfs", _MS_REMOUNT | flags, f"size={size}".encode())
    finally:
        libc.umount2(bytes(path), 2)  # MNT_DETACH


EARLIER = '<html><head><meta name="generator" content="sylvie report">an earlier report'  # its mark: ours


def test_out_on_a_full_disk(tmp_path, capsys):
    run = write_run(tmp_path / "results/gcn/seed0")
    with _tmpfs(tmp_path / "small"):  # 64 KiB: too small for the plots
        out = tmp_path / "small/report"
        out.mkdir()
        (out / "report.html").write_text(EARLIER)
        code, err, _ = report(tmp_path, [run], capsys, out=out)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert str(out) in err and "the disk is full" in err, err
        assert os.listdir(out) == ["report.html"] and (out / "report.html").read_text() == EARLIER
        code, err, _ = report(tmp_path, [run], capsys, out=tmp_path / "small/new/report")  # made, then removed
        assert code == 2 and "the disk is full" in err and os.listdir(tmp_path / "small") == ["report"], err


def test_out_on_a_read_only_file_system(tmp_path, capsys):
    run = write_run(tmp_path / "results/gcn/seed0")
    with _tmpfs(tmp_path / "ro") as remount:
        (tmp_path / "ro/report").mkdir()
        (tmp_path / "ro/report/report.html").write_text(EARLIER)
        assert remount(_MS_RDONLY) == 0, os.strerror(ctypes.get_errno())
        for out in (tmp_path / "ro/report", tmp_path / "ro/new"):
            code, err, _ = report(tmp_path, [run], capsys, out=out)
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert f"--out {out}: could not write the report there: the file system is read-only" in err
        assert os.listdir(tmp_path / "ro") == ["report"]
        assert (tmp_path / "ro/report/report.html").read_text() == EARLIER
