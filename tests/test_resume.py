"""A training run killed after its first checkpoint resumes from it and finishes exactly as an uninterrupted run."""
import os
import signal
import subprocess
import time

import pytest
from support.commands import BIN, ranks

from sylvie.atomic import read_jsonl

ARGS = ["--epochs", "30", "--checkpoint-every", "5", "--log-every", "1", "--seed", "0", "--no-progress"]
# AdamW under a warm-up and a cosine schedule: killed after its first checkpoint, inside the warm-up
SCHEDULED = ["--optimizer", "AdamW", "--lr-schedule", "CosineAnnealingLR", "--warmup-epochs", "8"]


pytestmark = pytest.mark.slow


def _train_cmd(part_dir, out, args):
    return [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", "--no-python", "sylvie", "train",
            "--partition", str(part_dir), "--out", str(out), *args]


@pytest.mark.parametrize("extra", [[], SCHEDULED], ids=["Adam", "AdamW-cosine-warm-up"])
def test_killed_run_resumes_from_last_checkpoint(cora_partitions, tmp_path, extra):
    args = ARGS + extra
    out = tmp_path / "run"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(_train_cmd(cora_partitions[2], out, args), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = out / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert ckpt.exists(), "the run never wrote a checkpoint"
    assert not (out / "model.pt").exists(), "the run finished before it could be killed; nothing was tested"

    resumed = ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out, *args)
    assert "resuming from" in resumed.stderr
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in records] == list(range(30))

    straight = tmp_path / "straight"
    ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", straight, *args)
    reference = read_jsonl(straight / "metrics.jsonl")
    for a, b in zip(records, reference):  # bit for bit: the same steps, from the same state
        assert (a["epoch"], a["loss"], a["lr"], a["val_acc"]) == (b["epoch"], b["loss"], b["lr"], b["val_acc"])
    lrs = [r["lr"] for r in reference]
    if extra:  # the schedule ran: up over the warm-up, then down
        assert lrs[0] < lrs[7] < lrs[8] == pytest.approx(0.01) and lrs[-1] < lrs[9] < lrs[8]
    else:
        assert set(lrs) == {0.01}


def test_changed_settings_start_afresh(cora_partitions, tmp_path):
    out = tmp_path / "run"
    ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out,
             "--epochs", "6", "--checkpoint-every", "2", "--no-progress")
    again = ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out,
                     "--epochs", "6", "--checkpoint-every", "2", "--lr", "0.02", "--no-progress")
    assert "resuming" not in again.stderr
    assert len(read_jsonl(out / "metrics.jsonl")) == 6
