"""A write killed mid-way (kill -9, out of memory) leaves its hidden temporary beside the output; the next write of
that output removes it, and nothing else: not a live writer's temporary, not a file that merely looks like one."""
import os
import signal
import subprocess
import sys
import time

import pytest
from support.commands import BIN, venv_env

from sylvie.cli import main

pytestmark = pytest.mark.slow


def _temporaries(folder, name):
    return sorted(n for n in os.listdir(folder) if n.startswith(f".{name}.tmp-"))


def _kill_while_writing(cmd, folder, name, timeout=120):
    """Start ``cmd``, SIGKILL it as soon as its temporary for ``name`` appears in ``folder``; the temporaries it
    left."""
    before = set(_temporaries(folder, name))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=venv_env())
    deadline = time.monotonic() + timeout
    try:
        while not set(_temporaries(folder, name)) - before:
            assert proc.poll() is None, f"it finished before it was caught writing: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "its temporary never appeared"
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    return sorted(set(_temporaries(folder, name)) - before)


def test_a_killed_partition_leaves_a_temporary_that_the_next_run_removes(cora_dir, tmp_path, capsys):
    out = tmp_path / "parts"
    live_writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        # what must survive: one that looks like ours but is not our pattern, a live writer's temporary of this very
        # output, and a temporary of another output
        lookalike = tmp_path / ".parts.tmp-backup"
        lookalike.write_text("not ours")
        # 64 random parts: ~1 s of shard writing to catch it in
        cmd = [str(BIN / "sylvie"), "partition", str(cora_dir), "--out", str(out), "--parts", "64",
               "--method", "random"]
        left = _kill_while_writing(cmd, tmp_path, "parts")
        assert len(left) == 1 and (tmp_path / left[0]).is_dir() and not out.exists()
        tail = left[0][len(".parts.tmp-"):]
        pid = tail.split("_", 1)[0]
        live = tmp_path / f".parts.tmp-{live_writer.pid}{tail[len(pid):-1]}0"  # the same name, a live writer's pid
        live.mkdir()
        (live / "part-0.arrow").write_text("being written")
        other = tmp_path / f".other.tmp-{tail}"  # the dead writer's name pattern, for another output
        other.write_text("another output's")

        assert main(["partition", str(cora_dir), "--out", str(out), "--parts", "2"]) == 0
        assert (out / "manifest.json").is_file()
        assert not (tmp_path / left[0]).exists()  # 03d865d: still there, as large as a partition
        assert lookalike.read_text() == "not ours" and (live / "part-0.arrow").read_text() == "being written"
        assert other.read_text() == "another output's"
        assert _temporaries(tmp_path, "parts") == sorted([lookalike.name, live.name])
    finally:
        live_writer.kill()
        live_writer.wait()


def test_a_killed_file_write_is_cleaned_up_by_the_next_write_of_that_file(tmp_path):
    """A file output (model.pt, eval.json, a checkpoint: atomic_path without directory) killed mid-write."""
    target = tmp_path / "eval.json"
    child = ("import os, signal, sys; from sylvie.atomic import atomic_path\n"
             "with atomic_path(sys.argv[1]) as tmp:\n"
             "    tmp.write_text('{\"half\": ')\n"
             "    os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run([sys.executable, "-c", child, str(target)], env=venv_env())
    assert p.returncode == -signal.SIGKILL
    left = _temporaries(tmp_path, "eval.json")
    assert len(left) == 1 and (tmp_path / left[0]).read_text() == '{"half": '
    (tmp_path / ".eval.json.tmp-mine").write_text("a user's file")

    from sylvie.atomic import write_json

    write_json(target, {"test_acc": 0.5})
    assert _temporaries(tmp_path, "eval.json") == [".eval.json.tmp-mine"] and target.read_text().startswith("{")


def test_a_killed_report_leaves_its_scratch_folder_that_the_next_report_removes(tmp_path, capsys):
    from test_report import write_run

    runs = [str(write_run(tmp_path / f"results/gcn/seed{s}", seed=s)) for s in (0, 1)]
    out = tmp_path / "report"
    out.mkdir()
    left = _kill_while_writing([str(BIN / "sylvie"), "report", *runs, "--out", str(out)], out, "report.html")
    assert left and (out / left[0]).is_dir()  # its plots, half made
    assert main(["report", *runs, "--out", str(out)]) == 0
    assert _temporaries(out, "report.html") == [] and (out / "report.html").is_file()
