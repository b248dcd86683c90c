"""One run directory, read and checked: what ``sylvie train`` and ``sylvie evaluate`` left in it.

A run directory holds ``metrics.jsonl`` (``sylvie train``) and ``eval.json`` (``sylvie evaluate``,
``sylvie.formats.eval_result``), or, when its training stopped without a model, ``metrics.jsonl`` of the epochs it ran
and ``failed.json`` (``sylvie.formats.run_failure``). Every file is checked before anything is written: a missing,
damaged or foreign file is a one-line error.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sylvie.errors import SylvieError
from sylvie.formats.epoch_record import FILE as METRICS_FILE
from sylvie.formats.epoch_record import EpochRecord, read_metrics
from sylvie.formats.eval_result import FILE as EVAL_FILE
from sylvie.formats.eval_result import EvalResult, read_eval_result
from sylvie.formats.run_failure import RunFailure, read_run_failure


@dataclass
class RunOutput:
    run: str
    seed: int | None
    metrics: list[EpochRecord]
    evaluation: EvalResult | None  # None for a run that failed
    path: Path | None = None  # the run directory, as given
    failure: RunFailure | None = None  # why training stopped without a model (failed.json), or None

    @property
    def task(self) -> str:
        """"node" or "link": as eval.json records it, or, for a run that failed, as its epochs' metric says (MRR:
        link prediction); "node" where neither says (nothing recorded before link prediction existed)."""
        if self.evaluation is not None:
            return self.evaluation.task
        return "link" if any(m.metric == "mrr" for m in self.metrics) else "node"

    def series(self, key: str) -> np.ndarray:
        """Field ``key`` of every epoch (``EpochRecord.value``); not in the run's mode, or null: nan."""
        return np.array([m.value(key) for m in self.metrics], dtype=float)

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


def task_of(outputs: list[RunOutput]) -> str:
    """A run's task ("node" or "link"): its seeds' (a finished one's first; seeds of one run share their settings)."""
    return (finished(outputs) or outputs)[0].task


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
        return RunOutput("", int(m[1]) if m else None, _read_metrics(given, required=False), None, given, failure)
    ev = _read_eval(given)
    metrics = _read_metrics(given, required=True)
    _check_one_run(given, ev, metrics)
    return RunOutput("", int(ev.train["seed"]), metrics, ev, given)


def _check_one_run(run_dir: Path, ev: EvalResult, metrics: list[EpochRecord]) -> None:
    """That ``eval.json`` and ``metrics.jsonl`` are of one run: the run its model recorded (``run``, its settings,
    seed and partition) on every line, and as many lines as it trained epochs (``epochs_recorded``). Files written
    before they carried these are taken as they are."""
    metrics_path, eval_path = run_dir / METRICS_FILE, run_dir / EVAL_FILE
    run = ev.summary.get("run")
    other = next((m for m in metrics if m.run is not None and run is not None and m.run != run), None)
    if other is not None:
        raise SylvieError(f"{eval_path}: of run {run}, but {metrics_path} line {metrics.index(other) + 1} is of run "
                          f"{other.run}: the two files are of two runs (one copied from another run?); "
                          f"{_fix('evaluate', eval_path)}")
    trained = ev.summary.get("epochs_recorded")
    if trained is not None and len(metrics) != trained:
        raise SylvieError(f"{metrics_path}: {len(metrics)} epochs, but its run recorded {trained} ({eval_path}): the "
                          f"file was cut short or added to; {_fix('train', metrics_path)}")


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path)))


# ---- the files' formats ----------------------------------------------------------------------------------------

def _fix(stage: str, path: Path) -> str:
    """What to do about a bad file of a run directory: make it again with ``stage``, or leave the run out."""
    return f"rerun `sylvie {stage}` for this run (it writes {path.name}), or leave {path.parent} out of the report"


def _read_eval(run_dir: Path) -> EvalResult:
    path = run_dir / EVAL_FILE
    return read_eval_result(path, _fix("evaluate", path))


def _read_metrics(run_dir: Path, required: bool) -> list[EpochRecord]:
    """The epoch records of ``metrics.jsonl``; for a run that failed (``required`` False) it may be missing or
    empty (it stopped in its first epoch)."""
    path = run_dir / METRICS_FILE
    return read_metrics(path, _fix("train", path), required)
