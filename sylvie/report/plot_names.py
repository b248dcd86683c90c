"""The report's plots by name, and which of them a report of runs of some tasks has: what ``sylvie report`` writes
and what the pipeline's report rule declares, from one list (no plotting library needed to ask)."""
from __future__ import annotations

PLOTS = ("loss", "accuracy", "mrr", "time_to_accuracy", "epoch_time", "bytes", "rows")  # every plot there may be
PLOT_TASK = {"accuracy": "node", "mrr": "link", "time_to_accuracy": "node"}  # plots of one task's runs only


def plots_of_tasks(tasks: set[str]) -> tuple[str, ...]:
    """The plots of a report whose runs have ``tasks`` (``train.task`` values), in PLOTS' order: all but those of a
    task none of the runs has; no task at all counts as node runs."""
    tasks = tasks or {"node"}
    return tuple(name for name in PLOTS if name not in PLOT_TASK or PLOT_TASK[name] in tasks)
