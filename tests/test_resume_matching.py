"""A checkpoint is resumed only by the same run: same settings, same partition, an epoch before the end."""
import shutil

import pytest
from support.commands import BIN, ranks, run

from sylvie.atomic import read_jsonl

pytestmark = pytest.mark.slow


def _train(part_dir, out, *args):
    return ranks(2, "--no-python", "sylvie", "train", "--partition", part_dir, "--out", out, "--no-progress",
                    "--checkpoint-every", "5", *args)


def test_fewer_epochs_than_the_checkpoint_starts_afresh(cora_partitions, tmp_path):
    out = tmp_path / "run"
    _train(cora_partitions[2], out, "--epochs", "20")
    again = _train(cora_partitions[2], out, "--epochs", "10")
    assert "resuming" not in again.stderr
    assert "starting afresh" in again.stderr and "train.epochs=10" in again.stderr
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in records] == list(range(10))


def test_another_partition_method_starts_afresh(cora_dir, cora_partitions, tmp_path):
    random2 = tmp_path / "random-p2"
    run([str(BIN / "sylvie"), "partition", str(cora_dir), "--out", str(random2), "--parts", "2", "--method", "random"])
    out = tmp_path / "run"
    _train(cora_partitions[2], out, "--epochs", "12")
    again = _train(random2, out, "--epochs", "12")
    assert "resuming" not in again.stderr and "starting afresh" in again.stderr and "partition" in again.stderr
    fresh = tmp_path / "fresh"
    _train(random2, fresh, "--epochs", "12")
    resumed, straight = read_jsonl(out / "metrics.jsonl"), read_jsonl(fresh / "metrics.jsonl")
    assert [r["loss"] for r in resumed] == [r["loss"] for r in straight]


def test_a_copied_partition_with_the_same_shards_resumes(cora_partitions, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(cora_partitions[2], copy)
    out = tmp_path / "run"
    _train(cora_partitions[2], out, "--epochs", "12")
    again = _train(copy, out, "--epochs", "14")
    assert "resuming" in again.stderr
    assert len(read_jsonl(out / "metrics.jsonl")) == 14
