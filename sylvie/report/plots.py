"""Plots of training runs (matplotlib, written as PNG files).

Per-epoch plots draw one line per run (the mean over its seeds, in the run's colour in every plot) with a shaded
band from the lowest to the highest seed; a run that failed (``failed.json``) is a dotted line of its own for the
epochs it ran, ending in a cross where it stopped.

Node classification's and link prediction's validation metrics (accuracy, MRR: ``EpochRecord.metric``) are drawn
apart: the "accuracy" plot holds the node runs, the "mrr" plot the link runs, each written only where the report has
such runs (``plots_for``); time to accuracy is the node runs'."""
from __future__ import annotations

from pathlib import Path

from sylvie.extras import needs

matplotlib = needs("matplotlib", "sylvie report (its plots)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from sylvie.report.plot_names import plots_of_tasks  # noqa: E402
from sylvie.report.run_output import RunOutput, failed, finished, task_of  # noqa: E402
from sylvie.report.summary import summarise  # noqa: E402
from sylvie.report.time_to_accuracy import (  # noqa: E402
    accuracy_over_time,
    accuracy_target,
    node_runs,
    training_seconds,
)

_METRIC_WORDS = {"accuracy": "accuracy", "mrr": "MRR"}  # EpochRecord.metric, on an axis
_KEY_WORDS = {"val_acc": "validation", "test_acc": "test", "loss": "loss"}
_BAND = "shaded: lowest to highest seed"
_SECONDS = "seconds of training (evaluation excluded), mean over seeds"


def _colors(runs: dict) -> dict:
    """One colour per run, the same in every plot."""
    dark = [plt.get_cmap("tab20")(i) for i in range(0, 20, 2)]  # tab10's colours, then their light shades
    light = [plt.get_cmap("tab20")(i) for i in range(1, 20, 2)]
    return {name: (dark + light)[i % 20] for i, name in enumerate(runs)}


def _spread(outputs: list[RunOutput], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per epoch (up to the shortest run): mean, lowest and highest over the seeds."""
    n = min(len(o.metrics) for o in outputs)
    values = np.array([o.series(key)[:n] for o in outputs])
    return values.mean(axis=0), values.min(axis=0), values.max(axis=0)


def _line(ax, x, mean, low, high, color, style, label, band: bool, second=False) -> bool:
    """The mean (points where it is a number, joined) and, over several seeds, the band; True if a band was drawn.
    A ``second`` line of the same run (test beside validation) is thinner and has no band."""
    ok = np.isfinite(mean)
    ax.plot(x[ok], mean[ok], style, color=color, label=label, linewidth=0.9 if second else 1.3,
            alpha=0.8 if second else 1.0)
    band = band and not second
    if band and ok.any():
        ax.fill_between(x[ok], low[ok], high[ok], color=color, alpha=0.18, linewidth=0)
    return band and bool(ok.any())


def _failed_line(ax, x, y, color, output: RunOutput) -> None:
    """A run that failed: dotted, for the epochs it ran, a cross at its last value."""
    ok = np.isfinite(y)
    label = f"{output.run} {output.name} ({output.failure_text()})"
    ax.plot(x[ok], y[ok], linestyle=":", color=color, linewidth=1.4, label=label)
    if ok.any():
        ax.plot(x[ok][-1:], y[ok][-1:], "x", color=color, markersize=8, markeredgewidth=2)


def _metric_label(runs, task: str) -> str:
    """What the validation and test curves of ``task``'s runs measure, in words, from their epochs' metric."""
    metrics = sorted({m.metric for outputs in runs.values() if task_of(outputs) == task
                      for o in outputs for m in o.metrics}) or ["accuracy" if task == "node" else "mrr"]
    return " / ".join(_METRIC_WORDS.get(m, m) for m in metrics)


def _curves(runs, keys, ylabel, logy=False, task=None):
    """Per-epoch lines of ``keys`` for every run, or for ``task``'s runs only (colours those of all runs)."""
    fig, ax = _wide()
    colors, banded = _colors(runs), False
    for name, outputs in runs.items():
        if task is not None and task_of(outputs) != task:
            continue
        done = finished(outputs)
        for i, (key, style) in enumerate(keys):
            if done:
                mean, low, high = _spread(done, key)
                banded |= _line(ax, np.arange(1, len(mean) + 1), mean, low, high, colors[name], style,
                                name if i == 0 else None, band=len(done) > 1, second=i > 0)
        for o in failed(outputs):  # the first key only: one line per failed run
            y = o.series(keys[0][0])
            _failed_line(ax, np.arange(1, len(y) + 1), y, colors[name], o)
    if len(keys) > 1:  # which line style is which key
        for key, style in keys:
            ax.plot([], [], style, color="0.3", label=_KEY_WORDS.get(key, key))
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    return _finish(fig, ax, outside=True, banded=banded)


def _wide():
    """A figure and its axes with room for the legend beside them (one line per run: many lines)."""
    return plt.subplots(figsize=(9, 4.2), layout="constrained")


def _finish(fig, ax, grid=True, legend_size=7, outside=False, banded=False):
    """Grid and legend (``banded``: with an entry for the seeds' bands); ``outside``: the legend beside the plot."""
    if grid:
        ax.grid(alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    if banded:
        handles.append(Patch(color="0.3", alpha=0.18, label=_BAND))
    if outside:  # many runs: the legend beside the plot, not over the lines
        fig.legend(handles=handles, fontsize=legend_size, loc="outside right upper", frameon=False)
    else:
        ax.legend(handles=handles, fontsize=legend_size)
        fig.tight_layout()
    return fig


def _bars(runs, columns, ylabel, scale=1.0, overlay=None):
    """Stacked bars of ``columns`` (the runs' finished seeds); ``overlay`` (key, label) goes on top, hatched and
    unfilled: time that overlapped the bars below rather than adding to them."""
    rows = {name: summarise(o) for name, o in runs.items() if finished(o)}
    if not rows:
        return _empty("no run finished")
    names = list(rows)
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = np.zeros(len(names))
    for key, label in columns:
        vals = np.array([rows[n][key] for n in names]) * scale
        ax.bar(names, vals, bottom=bottom, label=label)
        bottom += vals
    if overlay is not None:
        vals = np.array([rows[n][overlay[0]] for n in names]) * scale
        ax.bar(names, vals, bottom=bottom, label=overlay[1], fill=False, hatch="//", edgecolor="gray")
    ax.set_ylabel(ylabel)
    plt.setp(ax.get_xticklabels(), rotation=30, horizontalalignment="right", rotation_mode="anchor")
    return _finish(fig, ax, grid=False, legend_size=8)


def plot_accuracy_over_time(runs, path, xlabel=_SECONDS):
    _save(_accuracy_over_time(runs, xlabel), path)


def _accuracy_over_time(runs, xlabel=_SECONDS):
    """Validation accuracy against seconds of training, one line per node-classification run (its evaluated
    epochs, mean over seeds, lowest to highest seed shaded), runs that failed dotted, and the common target
    (``accuracy_target``) as a dashed line."""
    fig, ax = _wide()
    colors, banded = _colors(runs), False
    for name, outputs in node_runs(runs).items():
        done = finished(outputs)
        if done:
            seconds, acc = accuracy_over_time(done)
            _, low, high = _spread(done, "val_acc")
            banded |= _line(ax, seconds, acc, low, high, colors[name], "-", name, band=len(done) > 1)
        for o in failed(outputs):
            _failed_line(ax, training_seconds(o), o.series("val_acc"), colors[name], o)
    target = accuracy_target(runs)
    if not np.isnan(target):
        ax.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target:.1%}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation accuracy")
    return _finish(fig, ax, outside=True, banded=banded)


def _empty(text):
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.text(0.5, 0.5, text, ha="center", va="center")
    ax.set_axis_off()
    return fig


# a PNG's Software text chunk: what tells a plot we wrote from a user's file of the same name (html.py)
SOFTWARE = "sylvie report"


def _save(fig, path) -> None:
    try:
        fig.savefig(path, dpi=110, metadata={"Software": SOFTWARE})
    finally:
        plt.close(fig)


def _rows(runs):
    sampled = {name: o for name, o in runs.items() if finished(o) and summarise(o)["regime"] == "sampled"}
    if not sampled:
        return _empty("no sampled runs")
    return _bars(sampled, [("rows_local", "own rows"), ("rows_cached", "cached rows"),
                           ("rows_remote", "fetched from owners")], "input rows per epoch, all ranks")


_FIGURES = {
    "loss": lambda runs: _curves(runs, [("loss", "-")], "training loss (mean over seeds)", logy=True),
    "accuracy": lambda runs: _curves(runs, [("val_acc", "-"), ("test_acc", "--")],
                                     f"{_metric_label(runs, 'node')} (mean over seeds)", task="node"),
    "mrr": lambda runs: _curves(runs, [("val_acc", "-"), ("test_acc", "--")],
                                f"{_metric_label(runs, 'link')} (mean over seeds)", task="link"),
    "time_to_accuracy": _accuracy_over_time,
    "epoch_time": lambda runs: _bars(runs, [("compute_time", "compute"), ("codec_time", "encode/decode"),
                                            ("comm_time", "communication")], "seconds per epoch",
                                     overlay=("hidden_comm_time", "communication hidden (overlapped)")),
    "bytes": lambda runs: _bars(runs, [("mb_sent", "bytes on the wire, all ranks")], "MB per epoch"),
    "rows": _rows,
}


def figure(name: str, runs: dict[str, list[RunOutput]]):
    """Plot ``name`` (one of PLOTS) of ``runs``, a matplotlib figure (the caller closes it)."""
    return _FIGURES[name](runs)


def plots_for(runs: dict[str, list[RunOutput]]) -> tuple[str, ...]:
    """The plots of ``runs`` (``plot_names.plots_of_tasks`` of their tasks); a report of node runs alone has every
    plot but "mrr"."""
    return plots_of_tasks({task_of(outputs) for outputs in runs.values()})


def write_plots(runs: dict[str, list[RunOutput]], out_dir: Path) -> dict[str, Path]:
    """Write the plots of ``runs`` (``plots_for``) into ``out_dir``; returns plot name -> file."""
    paths = {name: out_dir / f"{name}.png" for name in plots_for(runs)}
    for name, path in paths.items():
        _save(figure(name, runs), path)
    return paths
