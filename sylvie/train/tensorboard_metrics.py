"""The epoch records also as TensorBoard scalars (``train.tensorboard``), for users who watch runs there, as
torchtitan's and Lightning's do: rank 0 writes ``RUN/tensorboard/`` with PyTorch's ``SummaryWriter``, one step an
epoch. ``metrics.jsonl`` stays the record the report and the tests read; this is a view of it. Needs the
``tensorboard`` package (``pip install 'sylvie[tensorboard]'``); without it the run says so once and goes on.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

from sylvie.extras import install_hint
from sylvie.formats.epoch_record import EpochRecord

log = logging.getLogger(__name__)
FOLDER = "tensorboard"
# tag -> the record's field (EpochRecord.value: common, or of the mode's part)
SCALARS = {"loss/train": "loss", "accuracy/train": "train_acc", "accuracy/val": "val_acc", "accuracy/test": "test_acc",
           "optimiser/lr": "lr", "seconds/epoch": "epoch_time", "seconds/compute": "compute_time",
           "seconds/comm_waited": "comm_time", "seconds/comm_hidden": "hidden_comm_time",
           "bytes/sent": "bytes_sent", "bytes/allreduce": "allreduce_bytes", "cache/hit_rate": "cache_hit_rate",
           "rows/remote": "rows_remote", "halo/staleness": "staleness"}


class TensorBoardMetrics:
    """Writes each record it is given (``add``) under ``run_dir/tensorboard``; a resumed run's first record drops
    the steps written after its checkpoint (``purge_step``), as the epochs are trained again."""

    def __init__(self, run_dir: str | Path):
        self.folder = Path(run_dir) / FOLDER
        self.writer = None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            log.warning(f"train.tensorboard: TensorBoard is not installed ({e}); the metrics go to metrics.jsonl "
                        f"only. Install it with: {install_hint('tensorboard')}")
            self._writer_class = None
        else:
            self._writer_class = SummaryWriter

    def add(self, record: EpochRecord) -> None:
        if self._writer_class is None:
            return
        if self.writer is None:
            self.writer = self._writer_class(log_dir=str(self.folder), purge_step=record.epoch or None)
        for tag, name in SCALARS.items():
            value = record.value(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.writer.add_scalar(tag, value, record.epoch)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
