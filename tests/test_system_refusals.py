"""Issue 44, class 5: where the system refuses a path a stage reads or writes (a read-only file system, a file where
a folder must be, a folder where a file must be), every stage says so in one line naming the path, what the system
said and what to do, exits 2 and leaves nothing behind. Run in-process through ``sylvie.cli.main``, as the command
line runs it."""
import os
import shutil
import subprocess

import pytest
from support.commands import CORA_RAW, refused_line

from sylvie import cli

pytestmark = pytest.mark.unit

STAGES = ("download", "partition", "vip", "train", "evaluate", "report")


@pytest.fixture(scope="module")
def inputs(cora_dir, cora_partitions, tmp_path_factory):
    """Each stage's input: Cora (``ds``), its 1-part partition (``p``), a trained run with its eval.json (``run``)."""
    run = tmp_path_factory.mktemp("inputs") / "run"
    assert cli.main(["train", "--partition", str(cora_partitions[1]), "--out", str(run), "--epochs", "1"]) == 0
    assert cli.main(["evaluate", "--dataset", str(cora_dir), "--model", str(run / "model.pt"),
                     "--out", str(run / "eval.json")]) == 0
    return {"ds": cora_dir, "p": cora_partitions[1], "run": run}


def _argv(stage: str, inputs, out) -> list[str]:
    return {"download": ["download", "cora", "--source", "planetoid", "--raw-dir", str(CORA_RAW),
                         "--no-allow-download", "--out", str(out)],
            "partition": ["partition", str(inputs["ds"]), "--out", str(out), "--parts", "1"],
            "vip": ["vip", str(inputs["p"]), "--out", str(out)],
            "train": ["train", "--partition", str(inputs["p"]), "--out", str(out), "--epochs", "1"],
            "evaluate": ["evaluate", "--dataset", str(inputs["ds"]), "--model", str(inputs["run"] / "model.pt"),
                         "--out", str(out)],
            "report": ["report", "--out", str(out), str(inputs["run"])]}[stage]


@pytest.mark.parametrize("stage", STAGES)
def test_a_file_where_a_folder_must_be(stage, inputs, tmp_path, capsys):
    (tmp_path / "afile").write_text("a user's file")
    out = tmp_path / "afile" / ("out.html" if stage == "report" else "out.json" if stage == "evaluate" else "out")
    last = refused_line(_argv(stage, inputs, out), capsys)
    assert last.startswith(f"sylvie {stage}: error: ") and str(tmp_path / "afile") in last, last
    assert "is a file, not a folder" in last or "a file is in the way" in last, last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "a user's file"


def test_a_folder_where_a_file_must_be(inputs, tmp_path, capsys):
    """(evaluate's --out is a file; the other stages write folders, and a folder there is theirs or refused)"""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("a user's file")
    last = refused_line(_argv("evaluate", inputs, tmp_path / "out"), capsys)
    assert last == (f"sylvie evaluate: error: refusing --out {tmp_path / 'out'}: it is an existing directory, and "
                    f"--out names a file; e.g. --out {tmp_path / 'out' / 'eval.json'}"), last
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.fixture
def read_only(tmp_path):
    """A folder on a read-only mount (a bind mount of itself, remounted read-only); needs root."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a folder read-only")
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(ro), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=True)


@pytest.mark.parametrize("stage", STAGES)
def test_a_read_only_file_system(stage, inputs, read_only, capsys):
    out = read_only / ("out.html" if stage == "report" else "out.json" if stage == "evaluate" else "out")
    last = refused_line(_argv(stage, inputs, out), capsys)
    named = f"--out {out}: could not write the report there" if stage == "report" else f"{out}: the system refused"
    assert last == f"sylvie {stage}: error: {named}: the file system is read-only; write to another folder, or " \
                   "remount this one read-write", last  # the output asked for, not its temporary
    assert list(read_only.iterdir()) == []


def test_only_a_refused_path_is_the_users_to_fix():
    """A connection or a timeout (a peer gone) is no path of the user's: it stays a fault, with its traceback."""
    import errno

    from sylvie.errors import refused_by_the_system

    assert refused_by_the_system(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")) is None
    assert refused_by_the_system(OSError(errno.EIO, "Input/output error")) is None  # no path named
    said = refused_by_the_system(PermissionError(errno.EACCES, "Permission denied", "/data/x.arrow"))
    assert str(said) == ("/data/x.arrow: the system refused: permission denied; make it readable (or writable) to "
                         "you, or use another path")
