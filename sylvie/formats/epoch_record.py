"""``metrics.jsonl``: one JSON object per epoch, what ``sylvie train`` measured (rank 0 writes it).

``EpochRecord`` is a line as an object; ``write_metrics`` and ``read_metrics`` are the only code that converts
it. A line is flat: common fields, then the trainer's (``halo`` or ``batches``). Version 1 lines (no
``format_version``) are still read; each line carries a checksum of its fields.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from sylvie.atomic import json_safe, write_jsonl
from sylvie.errors import SylvieError
from sylvie.formats.checked_json import read_text, schema_problem
from sylvie.formats.checksum import checked, with_checksum
from sylvie.formats.recognise import looks_like

FORMAT_VERSION = 2
FILE = "metrics.jsonl"
_FIX = "rerun `sylvie train` for this run (it writes metrics.jsonl)"
MODES = ("full", "sampled")  # train.mode
METRICS = ("accuracy", "mrr", "hits@50")  # what an epoch's {split}_acc measure: node classification's accuracy;
# link prediction's MRR (pairs with negatives of their own), or Hits@50 (negative pairs shared by a split)
NOT_EVALUATED = {"train_acc": None, "val_acc": None, "test_acc": None}  # an epoch's accuracies when not evaluated


@dataclass(frozen=True)
class PlannedEpoch:
    """What the Bounded Staleness Adaptor decided, after this epoch, for epoch ``epoch`` (two ahead)."""
    epoch: int
    synchronous: bool
    reason: str


@dataclass(frozen=True)
class HaloEpoch:
    """Full-graph training: the epoch's halo exchange and staleness (bytes in the common fields)."""
    halo_time: float  # waited on the halo exchange (exposed), this rank
    pipeline: bool
    staleness: int  # 0: the epoch used fresh halo data
    sync_reason: str
    boundary_sampling: float  # the share of halo rows kept (1: all)
    drift_features: float | None  # relative change of the boundary features since the last epoch (None: unmeasured)
    drift_gradients: float | None
    planned: PlannedEpoch
    gradient_bits: int | None = None  # width of the halo feature gradients on the wire (None: written before it was)


@dataclass(frozen=True)
class BatchEpoch:
    """Sampled training: the epoch's minibatches and where their input rows came from (summed over the ranks)."""
    minibatches: int  # per rank
    input_rows_per_batch: float
    rows_local: int
    rows_cached: int
    rows_remote: int
    cache_hit_rate: float | None  # cached / (cached + remote); None without non-local rows
    remote_bytes: int
    store_device_bytes: int  # bytes the feature store served from device memory, and from host memory
    store_host_bytes: int
    fetch_time: float  # this rank: seconds fetching rows, and the model's wait for prepared batches
    fetch_wait_time: float


@dataclass(frozen=True)
class EpochRecord:
    """One epoch. Losses, accuracies and bytes are global (the same on every rank); times are rank 0's."""
    epoch: int  # 0-based
    mode: str  # train.mode: full or sampled
    loss: float  # the global mean training loss
    train_acc: float | None  # None: not evaluated this epoch (or no such nodes)
    val_acc: float | None
    test_acc: float | None
    epoch_time: float  # training, evaluation excluded
    compute_time: float
    comm_time: float  # communication waited on (exposed)
    hidden_comm_time: float  # communication that ran while the rank computed
    codec_time: float  # Low-bit encoding and decoding
    allreduce_time: float
    sample_time: float  # boundary-node or neighbour sampling
    eval_time: float
    bits: int  # width of the data on the wire (32: fp32)
    bytes_sent: int
    bytes_received: int
    fp32_bytes_sent: int  # what the same rows would have taken in fp32
    allreduce_bytes: int
    halo: HaloEpoch | None = None  # mode full
    batches: BatchEpoch | None = None  # mode sampled
    # every rank's compute_time and comm_time (waited), rank 0 first: the rank that computes longest sets the pace,
    # the others wait for it (None: written before version 2 recorded them)
    rank_compute_time: list[float] | None = None
    rank_wait_time: list[float] | None = None
    # every rank's minor page faults in the epoch and its peak RSS so far, bytes (None: written before they were)
    rank_minor_faults: list[int] | None = None
    rank_peak_rss: list[int] | None = None
    lr: float | None = None  # the learning rate of the epoch's optimiser steps (None: written before it was)
    # what train_acc, val_acc and test_acc measure (``METRICS``): "accuracy" of node classification, "mrr" or "hits@50"
    # of link prediction; the run loop keeps the best validation value either way
    metric: str = "accuracy"
    # the run the line belongs to (``run_key``: its settings, seed and partition), the same in its model.pt's summary
    # and eval.json, so that files of two runs are not read as one; None: written before lines carried it
    run: str | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"EpochRecord.mode {self.mode!r}: one of {', '.join(MODES)}")
        if self.metric not in METRICS:
            raise ValueError(f"EpochRecord.metric {self.metric!r}: one of {', '.join(METRICS)}")
        if (self.halo is None) == (self.mode == "full") or (self.batches is None) == (self.mode == "sampled"):
            raise ValueError(f"EpochRecord of mode {self.mode}: halo for full, batches for sampled, not the other")

    def pace(self) -> tuple[int, float] | None:
        """(rank, its compute time over the mean rank's) of the rank that computed longest; None without per-rank
        times."""
        times = self.rank_compute_time
        if not times:
            return None
        slowest = max(range(len(times)), key=times.__getitem__)
        mean = sum(times) / len(times)
        return slowest, times[slowest] / mean if mean > 0 else 1.0

    def value(self, name: str):
        """The field ``name`` of the line, common or of the mode's part (``"rows_remote"``, ``"staleness"``); None
        when this record's mode has no such field. For code that picks fields by name (the report's series)."""
        for part in (self, self.halo, self.batches):
            if part is not None and name in _FIELDS[type(part)]:
                return getattr(part, name)
        return None

    def to_json(self) -> dict:
        """The flat JSON object of the line."""
        out = {"format_version": FORMAT_VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("halo", "batches"):
                out.update(dataclasses.asdict(value) if value is not None else {})
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, obj: dict, where: str = "an epoch record", fix: str = _FIX) -> EpochRecord:
        """From a line's object (version 1 or 2); ``where`` names it in errors, which end with ``fix``."""
        problem = (f"a JSON {type(obj).__name__}, not an object" if not isinstance(obj, dict) else
                   schema_problem(obj, SCHEMA))
        if problem:
            raise SylvieError(f"{where}: not an epoch record written by `sylvie train` ({problem}"
                              f"{looks_like(obj, FILE)}); {fix}")
        version = obj.get("format_version", 1)
        if version not in (1, FORMAT_VERSION):
            raise SylvieError(f"{where}: metrics format_version {version}, this sylvie reads 1 and {FORMAT_VERSION}; "
                              f"{fix}")
        mode = obj.get("mode") or ("sampled" if "rows_local" in obj else "full")
        try:
            halo = batches = None
            if mode == "full":
                planned = obj.get("planned") or {"epoch": obj["epoch"] + 2, "synchronous": True, "reason": ""}
                halo = HaloEpoch(**_values(HaloEpoch, {**obj, "planned": PlannedEpoch(**planned)}))
            else:
                batches = BatchEpoch(**_values(BatchEpoch, obj))
            return cls(**_values(cls, {**obj, "mode": mode}, skip=("halo", "batches")), halo=halo, batches=batches)
        except KeyError as e:
            raise SylvieError(f"{where}: not an epoch record written by `sylvie train` (no {e}); {fix}") from None
        except (TypeError, ValueError) as e:
            raise SylvieError(f"{where}: not an epoch record written by `sylvie train` ({e}); {fix}") from None


# What reading needs of a line (JSON Schema): its loss, every number a number or null (the report reads them as
# series), every per-rank list a list of numbers or null
_NUMBERS = ("epoch", "epoch_time", "compute_time", "comm_time", "hidden_comm_time", "codec_time", "allreduce_time",
            "sample_time", "eval_time", "bits", "bytes_sent", "bytes_received", "fp32_bytes_sent", "allreduce_bytes",
            "train_acc", "val_acc", "test_acc", "halo_time", "staleness", "minibatches", "input_rows_per_batch",
            "rows_local", "rows_cached", "rows_remote", "cache_hit_rate", "remote_bytes", "lr", "gradient_bits")
_RANK_TIMES = ("rank_compute_time", "rank_wait_time", "rank_minor_faults", "rank_peak_rss")
SCHEMA = {"type": "object", "required": ["loss"],
          "properties": {"loss": {"type": ["number", "null"]},
                         **{k: {"type": ["number", "null"]} for k in _NUMBERS},
                         **{k: {"type": ["array", "null"], "items": {"type": "number"}} for k in _RANK_TIMES}}}


_FIELDS = {kind: {f.name for f in dataclasses.fields(kind)} - {"halo", "batches"}
           for kind in (EpochRecord, HaloEpoch, BatchEpoch)}
# Fields a version-1 line may lack (they came later); everything else is required.
_DEFAULTS = {"train_acc": None, "val_acc": None, "test_acc": None, "codec_time": 0.0, "hidden_comm_time": 0.0,
             "allreduce_time": 0.0, "sample_time": 0.0, "eval_time": 0.0, "bits": 32, "fp32_bytes_sent": 0,
             "allreduce_bytes": 0, "bytes_received": 0, "halo_time": 0.0, "pipeline": False, "staleness": 0,
             "sync_reason": "", "boundary_sampling": 1.0, "drift_features": None, "drift_gradients": None,
             "store_device_bytes": 0, "store_host_bytes": 0, "fetch_time": 0.0, "fetch_wait_time": 0.0,
             "remote_bytes": 0, "cache_hit_rate": None, "rank_compute_time": None, "rank_wait_time": None,
             "rank_minor_faults": None, "rank_peak_rss": None, "lr": None, "metric": "accuracy", "run": None,
             "gradient_bits": None}


def _values(kind, obj: dict, skip: tuple[str, ...] = ()) -> dict:
    """The values of ``kind``'s fields (but ``skip``) in ``obj``; a missing one: its version-1 default, else
    KeyError."""
    return {f.name: obj[f.name] if f.name in obj or f.name not in _DEFAULTS else _DEFAULTS[f.name]
            for f in dataclasses.fields(kind) if f.name not in skip}


def write_metrics(run_dir: str | Path, records: list[EpochRecord]) -> Path:
    """``run_dir/metrics.jsonl``, atomically."""
    path = Path(run_dir) / FILE
    write_jsonl(path, [with_checksum(json_safe(r.to_json())) for r in records])
    return path


def read_metrics(path: str | Path, fix: str = _FIX, required: bool = True) -> list[EpochRecord]:
    """The records of a ``metrics.jsonl`` (a run directory, or the file itself), every line checked; errors name the
    file and line and end with ``fix``. Not ``required`` (a run that failed in its first epoch): a missing file is
    no epochs. NaN and Infinity, which our writer never writes, read as numbers (shown as such)."""
    path = Path(path)
    if path.is_dir() and path.name != FILE:
        path = path / FILE
    if not required and not path.exists():
        return []
    records = []
    for i, line in enumerate(read_text(path, f"metrics file ({FILE} of `sylvie train`)", fix).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=float)
        except ValueError as e:
            raise SylvieError(f"{path}: line {i} is not valid JSON ({e}); the file is damaged or cut short: "
                              f"{fix}") from e
        record = EpochRecord.from_json(obj, f"{path}: line {i}", fix)
        checked(obj, f"{path}: line {i}", "sylvie train", fix, FILE)
        _check_follows(records, record, f"{path}: line {i}", fix)
        records.append(record)
    if required and not records:
        raise SylvieError(f"{path}: holds no epochs (the file is empty); {fix}")
    return records


def _check_follows(records: list[EpochRecord], record: EpochRecord, where: str, fix: str) -> None:
    """A metrics file holds epochs 0, 1, 2, ... in order, once each (a resumed run writes the epochs it kept before
    the new ones): an epoch that repeats, goes back or skips is a file edited by hand or pieced from two runs."""
    expected = records[-1].epoch + 1 if records else 0
    if record.epoch == expected:
        return
    after = f"after epoch {records[-1].epoch}" if records else "as the first epoch"
    how = "repeats an epoch" if record.epoch < expected else "skips epochs"  # (the ones before are 0..expected-1)
    raise SylvieError(f"{where}: epoch {record.epoch} {after} {how} (a metrics file holds epochs 0, 1, 2, ... once "
                      f"each, in order); the file was edited or pieced from two runs: {fix}")
