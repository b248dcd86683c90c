"""A training run killed after its first checkpoint resumes from it and finishes exactly as an uninterrupted run."""
import os
import signal
import subprocess
import time

import pytest
from support.commands import BIN, ranks

from sylvie.atomic import read_jsonl
from sylvie.formats.run_seeds import read_run_seeds

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


def test_a_multi_seed_job_killed_in_its_second_seed_resumes_each_seed_bit_exactly(cora_partitions, tmp_path):
    """Three seeds in one launch, killed with SIGKILL (launcher and ranks) once the second seed wrote its first
    checkpoint: run again, the first seed resumes after its last epoch and trains none, the second from its checkpoint,
    the third from scratch; every seed's epochs are those of its own run alone, bit for bit."""
    args = ["--epochs", "12", "--checkpoint-every", "4", "--log-every", "4", "--no-progress"]
    seeds = ["--seed", "0", "1", "2"]
    out = tmp_path / "multi"
    launch = [str(BIN / "sylvie"), "launch", "--ranks", "2", "--", "sylvie", "train", "--partition",
              str(cora_partitions[2]), "--out", f"{out}/seed{{seed}}", *seeds, "--seeds-out", str(out / "seeds.json"),
              *args]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(launch, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpt = out / "seed1" / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert ckpt.exists() and (out / "seed0" / "model.pt").exists(), "killed before the second seed checkpointed"
    assert not (out / "seed1" / "model.pt").exists(), "the second seed finished before it could be killed"
    resumed = subprocess.run(launch, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    said = resumed.stderr
    assert f"resuming from {out / 'seed0' / 'checkpoints' / 'last.pt'} after epoch 12" in said
    assert f"resuming from {ckpt} after epoch " in said and said.count("resuming from") == 2  # not the third
    assert [s["seed"] for s in read_run_seeds(out / "seeds.json")] == [0, 1, 2]
    for seed in (0, 1, 2):
        alone = tmp_path / f"alone{seed}"
        ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", alone, "--seed", seed,
              *args)
        got, want = read_jsonl(out / f"seed{seed}" / "metrics.jsonl"), read_jsonl(alone / "metrics.jsonl")
        assert [(r["epoch"], r["loss"], r["val_acc"]) for r in got] == [(r["epoch"], r["loss"], r["val_acc"])
                                                                         for r in want], seed
