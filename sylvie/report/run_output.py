"""One run directory, read and checked: what ``sylvie train`` and ``sylvie evaluate`` left in it.

A run directory holds ``metrics.jsonl`` (``sylvie train``) and ``eval.json`` (``sylvie evaluate``), or, when its
training stopped without a model, ``metrics.jsonl`` of the epochs it ran and ``failed.json``. Every file is checked
before anything is written: a missing, damaged or foreign file is a one-line error.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sylvie.errors import SylvieError
from sylvie.formats.run_failure import RunFailure, read_run_failure


@dataclass
class RunOutput:
    run: str
    seed: int | None
    metrics: list[dict]
    evaluation: dict  # empty for a run that failed
    path: Path | None = None  # the run directory, as given
    failure: RunFailure | None = None  # why training stopped without a model (failed.json), or None

    def series(self, key: str) -> np.ndarray:
        return np.array([m.get(key) for m in self.metrics], dtype=float)  # missing or null: nan

    @property
    def directory(self) -> Path:
        """The run directory as an absolute path, links not resolved (of an output read from a directory)."""
        return _absolute(self.path)

    @property
    def name(self) -> str:
        """The run directory's name (``seed0``), for a run that is shown on its own."""
        return self.directory.name if self.path is not None else f"seed{self.seed}"

    def failure_text(self) -> str:
        """The failure in words: 'diverged at epoch 12', 'failed: non-finite loss at epoch 3'."""
        f = self.failure
        if f is None:
            return ""
        if f.reason == "diverged":
            return f"diverged at epoch {f.epoch}"
        return f"failed: non-finite loss at epoch {f.epoch}"


def finished(outputs: list[RunOutput]) -> list[RunOutput]:
    """The runs that trained to the end and were evaluated."""
    return [o for o in outputs if o.failure is None]


def failed(outputs: list[RunOutput]) -> list[RunOutput]:
    return [o for o in outputs if o.failure is not None]


def read_run(run_dir: str | Path) -> RunOutput:
    """One run directory, checked: a finished run (eval.json) or one that failed (failed.json)."""
    given = Path(run_dir)
    if not given.exists():
        raise SylvieError(f"{given}: no such run directory; give the directories `sylvie train` wrote (e.g. "
                          f"results/gcn-p4/seed0)")
    if not given.is_dir():
        raise SylvieError(f"{given}: not a run directory (it is a file); give the directory that holds its "
                          f"metrics.jsonl and eval.json (e.g. results/gcn-p4/seed0)")
    failure = read_run_failure(given)
    if failure is not None:  # no model, no evaluation: the epochs it ran, and why it stopped
        m = re.fullmatch(r"seed(\d+)", _absolute(given).name)
        return RunOutput("", int(m[1]) if m else None, _read_metrics(given, required=False), {}, given, failure)
    ev = _read_eval(given)
    return RunOutput("", int(ev["train"]["seed"]), _read_metrics(given, required=True), ev, given)


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path)))


# ---- the files' formats ----------------------------------------------------------------------------------------

_NUMBER = (int, float)
# What the report reads of eval.json: dotted key -> accepted types (None: null allowed); optional keys end in '?'
_EVAL_FIELDS = {
    "dataset": (str,), "num_parts": (int,), "test_acc": (*_NUMBER, type(None)), "val_acc": (*_NUMBER, type(None)),
    "model": (dict,), "model.arch": (str,), "train": (dict,), "train.seed": (int,), "comm?": (dict,),
    "comm.bits?": (int,), "comm.pipeline?": (bool,), "comm.staleness?": (int,), "comm.staleness_policy?": (str,),
    "sampling?": (dict,), "cache?": (dict,), "cache.policy?": (str,), "cache.alpha?": _NUMBER, "features?": (dict,),
}
# What the report reads of an epoch record (each optional but loss, all numbers or null)
_METRIC_FIELDS = ("epoch", "loss", "val_acc", "test_acc", "epoch_time", "compute_time", "comm_time", "codec_time",
                  "hidden_comm_time", "bits", "bytes_sent", "fp32_bytes_sent", "staleness", "input_rows_per_batch",
                  "cache_hit_rate", "rows_local", "rows_cached", "rows_remote")
# Our other JSON formats, by the keys that mark them: a file of one of them given as another is named as such
_OUR_FORMATS = (
    ({"reason", "epoch", "message"}, "a run failure record (failed.json)"),
    ({"format_version", "parts", "num_parts"}, "a partition manifest (manifest.json of `sylvie partition`)"),
    ({"kind", "fanouts", "batch_size", "parts"}, "a VIP analysis manifest (manifest.json of `sylvie vip`)"),
    ({"format_version", "fingerprint"}, "a dataset's meta.json (`sylvie download`)"),
    ({"epoch", "loss"}, "an epoch record of metrics.jsonl (`sylvie train`)"),
    ({"dataset", "model", "train", "test_acc"}, "an evaluation (eval.json of `sylvie evaluate`)"),
)
_TYPE_WORDS = {int: "an integer", str: "a string", dict: "an object", bool: "true or false"}


def _looks_like(obj, expected: str) -> str:
    """'; it looks like <format>' where ``obj`` is another of our formats than the file ``expected``, else ''."""
    if isinstance(obj, dict):
        for keys, what in _OUR_FORMATS:
            if keys <= obj.keys():
                return f"; it looks like {what}" if expected not in what else ""
    return ""


def _fix(stage: str, path: Path) -> str:
    """What to do about a bad file of a run directory: make it again with ``stage``, or leave the run out."""
    return f"rerun `sylvie {stage}` for this run (it writes {path.name}), or leave {path.parent} out of the report"


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _read_text(path: Path, what: str, fix: str) -> str:
    """The file's text; a missing, unreadable or non-UTF-8 file is a one-line error."""
    if path.is_dir():
        raise SylvieError(f"{path}: {what} expected here, found a directory; {fix}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SylvieError(f"{path}: {what} not found; {fix}") from None
    except OSError as e:
        raise SylvieError(f"{path}: {what} cannot be read ({e.strerror or e}); {fix}") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SylvieError(f"{path}: not UTF-8 text (byte {e.start}), so no {what}: the file is damaged; "
                          f"{fix}") from e


def _type_problem(obj: dict, fields: dict) -> str | None:
    """The first field of ``fields`` that ``obj`` lacks or holds with another type, in words, or None."""
    for spec, types in fields.items():
        key, optional = spec.rstrip("?"), spec.endswith("?")
        value, present = obj, True
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                present = False
                break
            value = value[part]
        if not present:
            if optional:
                continue
            return f"no '{key}'"
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):  # true is no number
            wanted = "a number" if float in types else _TYPE_WORDS[types[0]]
            return f"'{key}' is {json.dumps(value)[:40]}, not {wanted}"
    return None


def _read_eval(run_dir: Path) -> dict:
    path = run_dir / "eval.json"
    fix = _fix("evaluate", path)
    text = _read_text(path, "evaluation (eval.json of `sylvie evaluate`)", fix)
    try:
        ev = json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise SylvieError(f"{path}: not valid JSON ({e}); the file is damaged or cut short: {fix}") from e
    if not isinstance(ev, dict):
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` (a JSON {type(ev).__name__}, not "
                          f"an object); {fix}")
    problem = _type_problem(ev, _EVAL_FIELDS)
    if problem:
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` ({problem}"
                          f"{_looks_like(ev, 'eval.json')}); {fix}")
    return ev


def _read_metrics(run_dir: Path, required: bool) -> list[dict]:
    """The epoch records of ``metrics.jsonl``; for a run that failed (``required`` False) it may be missing or
    empty (it stopped in its first epoch)."""
    path = run_dir / "metrics.jsonl"
    fix = _fix("train", path)
    if not required and not path.exists():
        return []
    text = _read_text(path, "metrics file (metrics.jsonl of `sylvie train`)", fix)
    records = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_constant=lambda c: float(c))  # NaN/Infinity: numbers, shown in words
        except ValueError as e:
            raise SylvieError(f"{path}: line {i} is not valid JSON ({e}); the file is damaged or cut short: "
                              f"{fix}") from e
        problem = (f"a JSON {type(rec).__name__}, not an object" if not isinstance(rec, dict) else
                   _type_problem(rec, {"loss": (*_NUMBER, type(None))}) or
                   _type_problem(rec, {f"{k}?": (*_NUMBER, type(None)) for k in _METRIC_FIELDS}))
        if problem:
            raise SylvieError(f"{path}: line {i} is not an epoch record written by `sylvie train` ({problem}"
                              f"{_looks_like(rec, 'metrics.jsonl')}); {fix}")
        records.append(rec)
    if required and not records:
        raise SylvieError(f"{path}: holds no epochs (the file is empty); {fix}")
    return records
