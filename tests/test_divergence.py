"""Training that diverges stops: a loss that stays far above the first epoch's (train.divergence_factor for
train.divergence_patience epochs) or one that is not finite. The run exits 2 with one line, writes no model.pt but
failed.json and metrics.jsonl of the epochs it ran; a later successful run of the directory removes failed.json."""
import json
import re

import pytest
from support.commands import BIN, run

from sylvie.atomic import read_jsonl
from sylvie.cli import main
from sylvie.formats.run_failure import read_run_failure


def _train(partition, out, *flags) -> int:
    return main(["train", "--partition", str(partition), "--out", str(out), "--no-progress", "--log-every", "100",
                 "--hidden", "8", *map(str, flags)])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.slow
def test_a_loss_far_above_the_first_stops_training_and_a_later_success_clears_the_record(cora_partitions, tmp_path,
                                                                                         capsys):
    out = tmp_path / "run"
    capsys.readouterr()
    assert _train(cora_partitions[1], out, "--lr", "1e6", "--epochs", "30") == 2  # 03d865d: 0, loss ~2 -> 1e5
    line = _one_line(capsys)
    assert line.startswith("sylvie train: error: epoch 6: the training loss is") and "diverged" in line
    assert "train.lr" in line and "divergence_factor" in line
    failure = read_run_failure(out)
    assert (failure.reason, failure.epoch, failure.message) == ("diverged", 6, line.split("error: ", 1)[1])
    losses = [r["loss"] for r in read_jsonl(out / "metrics.jsonl")]
    assert len(losses) == 6 and all(loss > 10 * losses[0] for loss in losses[1:])
    assert not (out / "model.pt").exists()

    assert _train(cora_partitions[1], out, "--epochs", "2") == 0  # the same directory, trained sanely
    assert (out / "model.pt").exists() and len(read_jsonl(out / "metrics.jsonl")) == 2
    assert not (out / "failed.json").exists() and read_run_failure(out) is None

    # and diverging again: the finished run's model.pt goes, or it would be taken for this run's
    assert _train(cora_partitions[1], out, "--lr", "1e6", "--epochs", "30") == 2
    assert read_run_failure(out).reason == "diverged" and not (out / "model.pt").exists()


@pytest.mark.slow
def test_a_non_finite_loss_is_recorded_with_the_epochs_before_it(cora_partitions, tmp_path, capsys):
    out = tmp_path / "run"
    capsys.readouterr()
    assert _train(cora_partitions[1], out, "--lr", "1e30", "--epochs", "20") == 2
    line = _one_line(capsys)
    assert "epoch 2: the training loss is nan" in line
    failure = read_run_failure(out)
    assert (failure.reason, failure.epoch) == ("non-finite", 2)
    assert [r["epoch"] for r in read_jsonl(out / "metrics.jsonl")] == [0]  # epoch 1 ran; epoch 2 stopped
    assert not (out / "model.pt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("off", [("--divergence-factor", "0"), ("--divergence-patience", "0")])
def test_either_knob_at_zero_turns_the_check_off(off, cora_partitions, tmp_path):
    out = tmp_path / "run"
    assert _train(cora_partitions[1], out, "--lr", "1e6", "--epochs", "8", *off) == 0
    losses = [r["loss"] for r in read_jsonl(out / "metrics.jsonl")]
    assert max(losses[1:]) > 1000 * losses[0]  # it did diverge, and was let run
    assert (out / "model.pt").exists() and not (out / "failed.json").exists()


@pytest.mark.unit
@pytest.mark.parametrize("factor", ["0.5", "1"])
def test_a_factor_that_would_stop_any_training_is_refused(factor, cora_partitions, tmp_path, capsys):
    capsys.readouterr()
    assert _train(cora_partitions[1], tmp_path / "run", "--divergence-factor", factor, "--epochs", "2") == 2
    line = _one_line(capsys)
    assert f"train.divergence_factor {factor}" in line and "0 to turn the check off" in line
    assert not (tmp_path / "run" / "model.pt").exists()


@pytest.mark.slow
def test_every_rank_of_a_sampled_run_stops_at_the_same_epoch(cora_partitions, tmp_path):
    """Two ranks of the sampled trainer: the check reads the all-reduced loss, so both stop at epoch 6 (a rank that
    stopped alone would leave the other waiting in a collective until the timeout)."""
    out = tmp_path / "run"
    p = run([str(BIN / "sylvie"), "launch", "--ranks", "2", "--", "sylvie", "train", "--partition",
             str(cora_partitions[2]), "--out", str(out), "--no-progress", "--mode", "sampled", "--arch", "sage",
             "--no-self-loop", "--alpha", "0", "--lr", "1e6", "--epochs", "30", "--timeout", "30"],
            check=False, timeout=300)
    assert p.returncode != 0
    stopped = {int(r): int(e) for r, e in re.findall(r"sylvie train: error on rank (\d): epoch (\d+): the training "
                                                      r"loss is \S+, above", p.stderr)}
    assert stopped == {0: 6, 1: 6}, p.stderr[-3000:]
    assert "has not answered" not in p.stderr and "epoch 6: the training loss" in p.stderr.splitlines()[-1]
    assert json.loads((out / "failed.json").read_text())["epoch"] == 6
    assert len(read_jsonl(out / "metrics.jsonl")) == 6 and not (out / "model.pt").exists()
