"""A training run killed after its first checkpoint resumes from it and finishes exactly as an uninterrupted run."""
import os
import signal
import subprocess
import time

import pytest
from conftest import BIN, ranks

from sylvie.atomic import read_jsonl

ARGS = ["--epochs", "30", "--checkpoint-every", "5", "--log-every", "1", "--seed", "0", "--no-progress"]


pytestmark = pytest.mark.slow


def _train_cmd(part_dir, out):
    return [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", "--no-python", "sylvie", "train",
            "--partition", str(part_dir), "--out", str(out), *ARGS]


def test_killed_run_resumes_from_last_checkpoint(cora_partitions, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(_train_cmd(cora_partitions[2], out), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = out / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert ckpt.exists(), "the run never wrote a checkpoint"
    assert not (out / "model.pt").exists(), "the run finished before it could be killed; nothing was tested"

    resumed = ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out, *ARGS)
    assert "resuming from" in resumed.stderr
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in records] == list(range(30))

    straight = tmp_path / "straight"
    ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", straight, *ARGS)
    reference = read_jsonl(straight / "metrics.jsonl")
    for a, b in zip(records, reference):
        assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(b["loss"]), (a["epoch"], a["loss"], b["loss"])
        assert a["val_acc"] == b["val_acc"]


def test_changed_settings_start_afresh(cora_partitions, tmp_path):
    out = tmp_path / "run"
    ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out,
             "--epochs", "6", "--checkpoint-every", "2", "--no-progress")
    again = ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out,
                     "--epochs", "6", "--checkpoint-every", "2", "--lr", "0.02", "--no-progress")
    assert "resuming" not in again.stderr
    assert len(read_jsonl(out / "metrics.jsonl")) == 6
