"""The run loop both trainers run under: resume, then per epoch train (``trainer.epoch``), keep the
best-validation weights, log, check for divergence, checkpoint. It sees a trainer only through the protocol
(``train/protocol.py``) and its records only as ``EpochRecord``; it writes nothing but the checkpoint and, when
training diverges, ``failed.json`` with the epochs run (rank 0)."""
from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from sylvie.errors import SylvieError
from sylvie.formats.epoch_record import EpochRecord, write_metrics
from sylvie.formats.model_file import BY_LAST_EPOCH, BY_VALIDATION
from sylvie.formats.model_file import FILE as MODEL_FILE
from sylvie.formats.run_failure import RunFailure, write_run_failure
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


def run_epochs(trainer: Trainer, rank: int, out_dir: Path, train, identity: dict,
               log: Callable[[str], None] = log_info,
               on_record: Callable[[EpochRecord], None] | None = None) -> TrainedRun:
    """Train ``train.epochs`` epochs (the config's typed train section), resuming from
    ``out_dir/checkpoints/last.pt`` when it belongs to ``identity`` (``checkpoint.run_identity``). Rank 0 logs
    through ``log``, hands each epoch's record to ``on_record`` (if given) and saves the checkpoints."""
    epochs = train.epochs
    ckpt_path = out_dir / "checkpoints" / "last.pt"
    state, why_not = load_checkpoint(ckpt_path, identity, epochs)  # a damaged one: a SylvieError
    records: list[EpochRecord] = []
    best, start = None, 0
    if state is not None:
        trainer.load_state_dict(state["trainer"], state["epoch"] + 1)
        records = [EpochRecord.from_json(r, f"{ckpt_path}, epoch record") for r in state["metrics"]]
        best, start = _best_from(state["best"]), state["epoch"] + 1
        if rank == 0:
            log(f"resuming from {ckpt_path} after epoch {start}")
            if why_not:  # resumed, but not checked for damage: a checkpoint from before checksums
                logging.getLogger(__name__).warning(f"{ckpt_path}: {why_not}")
    elif why_not and rank == 0:
        log(f"starting afresh, not from {ckpt_path}: {why_not}")
    show_bar = rank == 0 and train.progress and sys.stderr.isatty()
    bar = tqdm(range(start, epochs), initial=start, total=epochs, desc="train", unit="epoch", disable=not show_bar)
    for epoch in bar:
        try:
            evaluate = (epoch + 1) % train.eval_every == 0 or epoch + 1 == epochs
            rec = trainer.epoch(epoch, evaluate=evaluate)
            records.append(rec)
            if evaluate and no_nodes(rec.val_acc):  # nothing to choose by: the model kept is the latest
                best = BestEpoch(epoch, None, rec.test_acc, trainer.weights(), BY_LAST_EPOCH)
            elif evaluate and (best is None or rec.val_acc > best.val_acc):
                best = BestEpoch(epoch, rec.val_acc, rec.test_acc, trainer.weights())
            if rank == 0:
                for line in trainer.log_lines(rec, epochs, (epoch + 1) % train.log_every == 0 or epoch + 1 == epochs):
                    log(line)
                if on_record is not None:
                    on_record(rec)
            check_divergence([r.loss for r in records], train)
        except TrainingDiverged as e:  # not finite (this epoch has no record), or a loss far above the first
            _record_failure(e, rank, out_dir, records)
            raise
        every = train.checkpoint_every
        if every and (epoch + 1) % every == 0 and epoch + 1 < epochs:
            state = trainer.state_dict()  # on every rank: a trainer may put partitioned weights together
            if rank == 0:
                save_checkpoint(ckpt_path, {"identity": identity, "epoch": epoch,
                                            "metrics": [r.to_json() for r in records],
                                            "best": vars(best) if best else None, "trainer": state})
    if best is None:
        raise SylvieError(f"train.epochs={epochs}: nothing to train; set epochs >= 1")
    return TrainedRun(best, records)


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
