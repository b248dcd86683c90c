"""Time to accuracy: validation accuracy against seconds of training (the epochs' times summed, evaluation
excluded), the common target every run reaches, and how long each run takes to reach it. Node classification's
runs only: a link-prediction run's validation metric is an MRR, which no accuracy target measures."""
from __future__ import annotations

import math

import numpy as np

from sylvie.report.run_output import RunOutput, finished, task_of


def training_seconds(output: RunOutput) -> np.ndarray:
    """Seconds of training up to the end of each epoch (an epoch without a time counts 0; an infinite one stays
    infinite, never the largest float)."""
    return np.cumsum(np.nan_to_num(output.series("epoch_time"), nan=0.0, posinf=math.inf, neginf=-math.inf))


def accuracy_over_time(outputs: list[RunOutput]) -> tuple[np.ndarray, np.ndarray]:
    """Validation accuracy against training wall-clock, means over seeds: the seconds of training (epoch times,
    evaluation excluded) summed up to the end of each epoch, and that epoch's validation accuracy (nan when the
    epoch was not evaluated). Runs that failed are left out (with none finished: empty arrays)."""
    outputs = finished(outputs)
    if not outputs:
        return np.zeros(0), np.zeros(0)
    n = min(len(o.metrics) for o in outputs)
    seconds = np.mean([training_seconds(o)[:n] for o in outputs], axis=0)
    return seconds, np.mean([o.series("val_acc")[:n] for o in outputs], axis=0)


def node_runs(runs: dict[str, list[RunOutput]]) -> dict[str, list[RunOutput]]:
    """The runs of node classification (those whose validation metric is an accuracy)."""
    return {name: outputs for name, outputs in runs.items() if task_of(outputs) == "node"}


def accuracy_target(runs: dict[str, list[RunOutput]], share: float = 0.98) -> float:
    """A validation accuracy every node-classification run reaches: ``share`` of the lowest best (mean) validation
    accuracy of any such run (runs that failed, and link-prediction runs, are left out)."""
    best = [np.nanmax(acc) for _, acc in map(accuracy_over_time, node_runs(runs).values())
            if acc.size and not np.isnan(acc).all()]
    return share * min(best) if best else float("nan")


def time_to_accuracy(outputs: list[RunOutput], target: float) -> float:
    """Seconds of training until the mean validation accuracy first reaches ``target`` (nan if never)."""
    seconds, acc = accuracy_over_time(outputs)
    reached = np.nonzero(acc >= target)[0]
    return float(seconds[reached[0]]) if reached.size else float("nan")
