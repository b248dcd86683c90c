"""The run loop (``sylvie.train.loop.EpochLoop``) with a fake trainer: in-process, no ranks. What it keeps, logs,
checkpoints and resumes, and how it stops, whatever the trainer."""
import math

import pytest

from sylvie.config import section
from sylvie.formats.epoch_record import NOT_EVALUATED, EpochRecord, HaloEpoch, PlannedEpoch, read_metrics
from sylvie.formats.run_failure import read_run_failure
from sylvie.train.loop import EpochLoop
from sylvie.train.step import LossDiverged, TrainingDiverged

pytestmark = pytest.mark.unit


def run_epochs(trainer, rank, out_dir, train, identity, log):
    """The loop driven as ``run_training`` drives it (``sylvie.train.run``)."""
    with EpochLoop(trainer, rank, out_dir, train, identity, log=log) as loop:
        for epoch in loop:
            loop.end_epoch(trainer.epoch(epoch, evaluate=loop.evaluates(epoch)))
    return loop.trained()


class FakeTrainer:
    """Losses and validation accuracies from lists; its state is the number of epochs it trained."""

    def __init__(self, losses, val_accs, fail_at=None):
        self.losses, self.val_accs, self.fail_at = losses, val_accs, fail_at
        self.trained, self.logged, self.resumed_at = 0, [], None

    def epoch(self, epoch, evaluate):
        if epoch == self.fail_at:
            raise TrainingDiverged(epoch, math.nan, 0.01, True)
        self.trained += 1
        acc = {"train_acc": 0.5, "val_acc": self.val_accs[epoch], "test_acc": self.val_accs[epoch] - 0.01} \
            if evaluate else NOT_EVALUATED
        return EpochRecord(epoch=epoch, mode="full", loss=self.losses[epoch], **acc, epoch_time=0.1,
                           compute_time=0.1, comm_time=0.0, hidden_comm_time=0.0, codec_time=0.0,
                           allreduce_time=0.0, sample_time=0.0, eval_time=0.0, bits=32, bytes_sent=0,
                           bytes_received=0, fp32_bytes_sent=0, allreduce_bytes=0,
                           halo=HaloEpoch(0.0, False, 0, "", 1.0, None, None, PlannedEpoch(epoch + 2, True, "")))

    def state_dict(self):
        return {"trained": self.trained}

    def load_state_dict(self, state, next_epoch):
        self.trained, self.resumed_at = state["trained"], next_epoch

    def weights(self):
        return {"after_epochs": self.trained}

    def summary(self):
        return {}

    def log_lines(self, record, epochs, full):
        return [f"epoch {record.epoch}"] if full else []

    def close(self):
        pass


def _train(**knobs):
    return section("train", {"progress": False, "checkpoint_every": 0, **knobs})


def test_the_loop_keeps_the_best_validation_epoch_and_logs_every_nth(tmp_path):
    trainer, lines = FakeTrainer([2.0, 1.5, 1.2, 1.1], [0.3, 0.6, 0.5, 0.55]), []
    run = run_epochs(trainer, 0, tmp_path, _train(epochs=4, log_every=2), {}, log=lines.append)
    assert [r.epoch for r in run.records] == [0, 1, 2, 3]
    assert (run.best.epoch, run.best.val_acc, run.best.weights) == (1, 0.6, {"after_epochs": 2})
    assert lines == ["epoch 1", "epoch 3"]


def test_only_evaluated_epochs_compete_for_best(tmp_path):
    trainer = FakeTrainer([2.0, 1.5, 1.2, 1.1], [0.9, 0.95, 0.5, 0.55])
    run = run_epochs(trainer, 0, tmp_path, _train(epochs=4, eval_every=2), {}, log=lambda _: None)
    assert [r.val_acc for r in run.records] == [None, 0.95, None, 0.55]
    assert run.best.epoch == 1


def test_a_restart_resumes_from_the_checkpoint_of_the_same_run_only(tmp_path):
    losses, accs = [2.0, 1.5, 1.2, 1.1, 1.0], [0.3, 0.6, 0.5, 0.55, 0.7]
    first = FakeTrainer(losses, accs, fail_at=3)  # stops after epochs 0-2 (checkpoint after epoch 1)
    with pytest.raises(TrainingDiverged):
        run_epochs(first, 0, tmp_path, _train(epochs=5, checkpoint_every=2), {"run": "a"}, log=lambda _: None)
    again, lines = FakeTrainer(losses, accs), []
    run = run_epochs(again, 0, tmp_path, _train(epochs=5, checkpoint_every=2), {"run": "a"}, log=lines.append)
    assert again.resumed_at == 2 and again.trained == 2 + 3
    assert [r.epoch for r in run.records] == [0, 1, 2, 3, 4] and run.best.epoch == 4
    assert "resuming from" in lines[0]
    other, lines = FakeTrainer(losses, accs), []
    run_epochs(other, 0, tmp_path, _train(epochs=5, checkpoint_every=2), {"run": "b"}, log=lines.append)
    assert other.resumed_at is None and "starting afresh" in lines[0] and "run changed (a -> b)" in lines[0]


def test_a_changed_checkpoint_is_refused_and_one_from_before_checksums_resumes_with_a_warning(tmp_path, caplog):
    """A checkpoint whose content no longer matches its checksum is refused naming it, and left as it is (not
    resumed, not written over); one written before checkpoints carried a checksum still resumes, saying so."""
    import torch

    from sylvie.errors import SylvieError

    losses, accs, train = [2.0, 1.5, 1.2, 1.1, 1.0], [0.3, 0.6, 0.5, 0.55, 0.7], _train(epochs=5, checkpoint_every=2)
    with pytest.raises(TrainingDiverged):  # stops after epochs 0-2 (checkpoint after epoch 1)
        run_epochs(FakeTrainer(losses, accs, fail_at=3), 0, tmp_path, train, {"run": "a"}, log=lambda _: None)
    ckpt = tmp_path / "checkpoints" / "last.pt"
    state = torch.load(ckpt, weights_only=True)
    torch.save({**state, "trainer": {"trained": 7}}, ckpt)  # one value changed, its checksum as it was
    before = ckpt.read_bytes()
    with pytest.raises(SylvieError, match=f"^{ckpt}: was changed after `sylvie train` wrote it .*; this run cannot "
                                          f"resume from it: delete it to train the run from its first epoch"):
        run_epochs(FakeTrainer(losses, accs), 0, tmp_path, train, {"run": "a"}, log=lambda _: None)
    assert ckpt.read_bytes() == before

    torch.save({k: v for k, v in state.items() if k != "checksum"}, ckpt)  # as written before checksums
    again, lines = FakeTrainer(losses, accs), []
    run_epochs(again, 0, tmp_path, train, {"run": "a"}, log=lines.append)
    assert again.resumed_at == 2 and "resuming from" in lines[0]
    assert f"{ckpt}: written before checkpoints carried a checksum" in caplog.text


def test_a_non_finite_epoch_stops_with_the_epochs_before_it_recorded(tmp_path):
    with pytest.raises(TrainingDiverged):
        run_epochs(FakeTrainer([2.0] * 5, [0.5] * 5, fail_at=2), 0, tmp_path, _train(epochs=5), {}, log=print)
    assert [r.epoch for r in read_metrics(tmp_path)] == [0, 1]
    assert read_run_failure(tmp_path).reason == "non-finite" and read_run_failure(tmp_path).epoch == 3


def test_a_loss_that_stays_far_above_the_first_stops_as_diverged(tmp_path):
    losses = [1.0, 20.0, 20.0, 20.0, 20.0]
    with pytest.raises(LossDiverged):
        run_epochs(FakeTrainer(losses, [0.5] * 5), 0, tmp_path,
                   _train(epochs=5, divergence_factor=10, divergence_patience=2), {}, log=print)
    assert [r.epoch for r in read_metrics(tmp_path)] == [0, 1, 2]  # the epoch that tripped the check is kept
    assert read_run_failure(tmp_path).reason == "diverged"


def test_other_ranks_write_nothing(tmp_path):
    with pytest.raises(TrainingDiverged):
        run_epochs(FakeTrainer([2.0] * 3, [0.5] * 3, fail_at=1), 1, tmp_path, _train(epochs=3), {}, log=print)
    assert list(tmp_path.iterdir()) == []
