"""Plots of training runs (matplotlib, written as PNG files)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sylvie.report.collect import RunOutput, accuracy_over_time, accuracy_target, summarise  # noqa: E402

PLOTS = ("loss", "accuracy", "time_to_accuracy", "epoch_time", "bytes", "rows")


def _mean_curve(outputs: list[RunOutput], key: str) -> np.ndarray:
    n = min(len(o.metrics) for o in outputs)
    return np.mean([o.series(key)[:n] for o in outputs], axis=0)


def _curves(runs, keys, ylabel, path, logy=False):
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, outputs in runs.items():
        for key, style in keys:
            y = _mean_curve(outputs, key)
            ax.plot(np.arange(1, len(y) + 1), y, style, label=f"{name} {key}" if len(keys) > 1 else name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    _save(fig, ax, path)


def _save(fig, ax, path, grid=True, legend_size=7):
    if grid:
        ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(runs, columns, ylabel, path, scale=1.0, overlay=None):
    """Stacked bars of ``columns``; ``overlay`` (key, label) goes on top, hatched and unfilled: time that
    overlapped the bars below rather than adding to them."""
    rows = {name: summarise(o) for name, o in runs.items()}
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
    ax.tick_params(axis="x", rotation=20)
    _save(fig, ax, path, grid=False, legend_size=8)


def plot_accuracy_over_time(runs, path, xlabel="seconds of training (evaluation excluded), mean over seeds"):
    """Validation accuracy against seconds of training, one line per run (its evaluated epochs), and the common
    target (``accuracy_target``) as a dashed line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, outputs in runs.items():
        seconds, acc = accuracy_over_time(outputs)
        evaluated = ~np.isnan(acc)
        ax.plot(seconds[evaluated], acc[evaluated], "-", label=name)
    target = accuracy_target(runs)
    if not np.isnan(target):
        ax.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target:.1%}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation accuracy")
    _save(fig, ax, path)


def _empty(path, text):
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.text(0.5, 0.5, text, ha="center", va="center")
    ax.set_axis_off()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(runs: dict[str, list[RunOutput]], out_dir: Path) -> dict[str, Path]:
    """Write every plot into ``out_dir``; returns plot name -> file."""
    paths = {name: out_dir / f"{name}.png" for name in PLOTS}
    _curves(runs, [("loss", "-")], "training loss (mean over seeds)", paths["loss"], logy=True)
    _curves(runs, [("val_acc", "-"), ("test_acc", "--")], "accuracy (mean over seeds)", paths["accuracy"])
    plot_accuracy_over_time(runs, paths["time_to_accuracy"])
    _bars(runs, [("compute_time", "compute"), ("codec_time", "encode/decode"), ("comm_time", "communication")],
          "seconds per epoch", paths["epoch_time"], overlay=("hidden_comm_time", "communication hidden (overlapped)"))
    _bars(runs, [("mb_sent", "bytes on the wire, all ranks")], "MB per epoch", paths["bytes"])
    sampled = {name: o for name, o in runs.items() if summarise(o)["regime"] == "sampled"}
    if sampled:
        _bars(sampled, [("rows_local", "own rows"), ("rows_cached", "cached rows"),
                        ("rows_remote", "fetched from owners")], "input rows per epoch, all ranks", paths["rows"])
    else:
        _empty(paths["rows"], "no sampled runs")
    return paths
