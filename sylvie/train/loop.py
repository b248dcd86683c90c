"""The run loop both trainers run under (``EpochLoop``): resume, then per epoch train (``trainer.epoch``), keep the
best-validation weights, log, check for divergence, checkpoint. It sees a trainer only through the protocol
(``train/protocol.py``) and its records only as ``EpochRecord``, and writes only the checkpoint and, when training
diverges, ``failed.json`` (rank 0). Its driver calls ``trainer.epoch`` itself, so that no frame of the loop's lies
between the run and the trainer.
"""
# The driver (``train/protocol.py``: the run's story in four calls):
#
#     with EpochLoop(trainer, rank, out_dir, train, identity) as loop:
#         for epoch in loop:
#             loop.end_epoch(trainer.epoch(epoch, evaluate=loop.evaluates(epoch)))
#     trained = loop.trained()
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from sylvie.errors import SylvieError
from sylvie.formats.epoch_record import EpochRecord, write_metrics
from sylvie.formats.model_file import BY_LAST_EPOCH, BY_VALIDATION
from sylvie.formats.model_file import FILE as MODEL_FILE
from sylvie.formats.run_failure import RunFailure, write_run_failure
from sylvie.log import show_progress
from sylvie.train.checkpoint import load_checkpoint, save_checkpoint
from sylvie.train.protocol import Trainer
from sylvie.train.step import TrainingDiverged, check_divergence


@dataclass(frozen=True)
class BestEpoch:
    """The epoch whose model the run keeps, and the model's weights after it: the evaluated epoch with the highest
    validation accuracy so far or, where the graph has no validation nodes, the last evaluated epoch
    (``chosen_by``)."""
    epoch: int
    val_acc: float | None
    test_acc: float | None
    weights: dict
    chosen_by: str = BY_VALIDATION


def no_nodes(acc: float | None) -> bool:
    """An evaluated accuracy of a split without nodes (0 of 0: NaN, or None)."""
    return acc is None or math.isnan(acc)


@dataclass(frozen=True)
class TrainedRun:
    """What the loop hands back: the best epoch and every epoch's record."""
    best: BestEpoch
    records: list[EpochRecord]


log_info = logging.getLogger(__name__).info  # the loop's lines (an epoch, resuming): INFO of sylvie.train.loop


class EpochLoop:
    """Train ``train.epochs`` epochs (the config's typed train section), resuming from
    ``out_dir/checkpoints/last.pt`` when it belongs to ``identity`` (``checkpoint.run_identity``). Rank 0 logs
    through ``log``, hands each epoch's record to ``on_record`` (if given) and saves the checkpoints. As a context,
    it records why training stopped when it diverged (``TrainingDiverged``, from ``trainer.epoch`` or the divergence
    check): rank 0 writes ``failed.json`` and ``metrics.jsonl`` of the epochs run."""

    def __init__(self, trainer: Trainer, rank: int, out_dir: Path, train, identity: dict,
                 log: Callable[[str], None] = log_info, on_record: Callable[[EpochRecord], None] | None = None):
        self.trainer, self.rank, self.out_dir, self.train, self.identity = trainer, rank, out_dir, train, identity
        self.log, self.on_record = log, on_record
        self.ckpt_path = out_dir / "checkpoints" / "last.pt"
        state, why_not = load_checkpoint(self.ckpt_path, identity, train.epochs)  # a damaged one: a SylvieError
        self.records: list[EpochRecord] = []
        self.best: BestEpoch | None = None
        self.start = 0
        if state is not None:
            trainer.load_state_dict(state["trainer"], state["epoch"] + 1)
            self.records = [EpochRecord.from_json(r, f"{self.ckpt_path}, epoch record") for r in state["metrics"]]
            self.best, self.start = _best_from(state["best"]), state["epoch"] + 1
            if rank == 0:
                log(f"resuming from {self.ckpt_path} after epoch {self.start}")
                if why_not:  # resumed, but not checked for damage: a checkpoint from before checksums
                    logging.getLogger(__name__).warning(f"{self.ckpt_path}: {why_not}")
        elif why_not and rank == 0:
            log(f"starting afresh, not from {self.ckpt_path}: {why_not}")

    def __enter__(self) -> EpochLoop:
        return self

    def __exit__(self, kind, e, tb) -> None:
        if isinstance(e, TrainingDiverged):  # not finite (that epoch has no record), or a loss far above the first
            _record_failure(e, self.rank, self.out_dir, self.records)

    def __iter__(self) -> Iterator[int]:
        """The epochs left to train, behind a progress bar on rank 0's terminal."""
        epochs = self.train.epochs
        show_bar = self.rank == 0 and show_progress(self.train.progress)
        yield from tqdm(range(self.start, epochs), initial=self.start, total=epochs, desc="train", unit="epoch",
                        disable=not show_bar)

    def evaluates(self, epoch: int) -> bool:
        """Whether ``epoch`` evaluates: every ``train.eval_every``-th, and the last."""
        return (epoch + 1) % self.train.eval_every == 0 or epoch + 1 == self.train.epochs

    def end_epoch(self, rec: EpochRecord) -> None:
        """After ``trainer.epoch`` gave ``rec``: keep the best weights, log, check for divergence, checkpoint."""
        trainer, train, epoch, epochs = self.trainer, self.train, rec.epoch, self.train.epochs
        self.records.append(rec)
        evaluated = self.evaluates(epoch)
        if evaluated and no_nodes(rec.val_acc):  # nothing to choose by: the model kept is the latest
            self.best = BestEpoch(epoch, None, rec.test_acc, trainer.weights(), BY_LAST_EPOCH)
        elif evaluated and (self.best is None or rec.val_acc > self.best.val_acc):
            self.best = BestEpoch(epoch, rec.val_acc, rec.test_acc, trainer.weights())
        if self.rank == 0:
            for line in trainer.log_lines(rec, epochs, (epoch + 1) % train.log_every == 0 or epoch + 1 == epochs):
                self.log(line)
            if self.on_record is not None:
                self.on_record(rec)
        check_divergence([r.loss for r in self.records], train)
        every = train.checkpoint_every
        # every `every` epochs and after the last: a finished run that is run again (its evaluation asked for
        # otherwise, or a job killed while it wrote its files) resumes there, with nothing left to train
        if every and ((epoch + 1) % every == 0 or epoch + 1 == epochs):
            state = trainer.state_dict()  # on every rank: a trainer may put partitioned weights together
            if self.rank == 0:
                save_checkpoint(self.ckpt_path, {"identity": self.identity, "epoch": epoch,
                                                 "metrics": [r.to_json() for r in self.records],
                                                 "best": vars(self.best) if self.best else None, "trainer": state})

    def trained(self) -> TrainedRun:
        """The best epoch and every epoch's record, after the last epoch."""
        if self.best is None:
            raise SylvieError(f"train.epochs={self.train.epochs}: nothing to train; set epochs >= 1")
        return TrainedRun(self.best, self.records)


def _best_from(saved: dict | None) -> BestEpoch | None:
    """A checkpoint's best epoch (before BestEpoch, its weights were saved under "model")."""
    if not saved:
        return None
    return BestEpoch(saved["epoch"], saved["val_acc"], saved["test_acc"], saved.get("weights", saved.get("model")),
                     saved.get("chosen_by", BY_VALIDATION))


def _record_failure(e: TrainingDiverged, rank: int, out_dir: Path, records: list[EpochRecord]) -> None:
    """Rank 0: ``failed.json`` (why and at which epoch training stopped) and ``metrics.jsonl`` of the epochs run."""
    if rank == 0:
        # an earlier, finished run's model would be taken for this run's: it goes (train's own output, in a run
        # directory check_replaceable accepted)
        (out_dir / MODEL_FILE).unlink(missing_ok=True)
        write_metrics(out_dir, records)
        write_run_failure(out_dir, RunFailure(reason=e.reason, epoch=e.epoch + 1, message=str(e)))
