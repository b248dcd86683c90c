"""Gather the outputs of training runs (one directory per run and seed) for the report."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sylvie.atomic import read_json, read_jsonl


@dataclass
class RunOutput:
    run: str
    seed: int
    metrics: list[dict]
    evaluation: dict

    def series(self, key: str) -> np.ndarray:
        return np.array([m.get(key) for m in self.metrics], dtype=float)  # missing or null: nan


def collect(run_dirs: list[str | Path]) -> dict[str, list[RunOutput]]:
    """Run name -> its seeds' outputs. A run dir is ``<results>/<run>/seed<k>``."""
    runs: dict[str, list[RunOutput]] = {}
    for d in map(Path, run_dirs):
        ev = read_json(d / "eval.json", "evaluation")
        out = RunOutput(run=d.parent.name, seed=int(ev["train"]["seed"]), metrics=read_jsonl(d / "metrics.jsonl"),
                        evaluation=ev)
        runs.setdefault(out.run, []).append(out)
    return {k: sorted(v, key=lambda r: r.seed) for k, v in sorted(runs.items())}


def summarise(outputs: list[RunOutput]) -> dict:
    """One row of the comparison table: mean (and std) over seeds."""
    ev0 = outputs[0].evaluation
    test = np.array([o.evaluation["test_acc"] for o in outputs], dtype=float)  # null (no such nodes) -> nan
    val = np.array([o.evaluation["val_acc"] for o in outputs], dtype=float)

    def mean_of(key, default=0.0):
        if key not in outputs[0].metrics[0]:  # metrics written before the key existed, or of the other regime
            return default
        per_run = [o.series(key) for o in outputs]  # null (e.g. no hit rate without remote rows) -> nan
        values = np.concatenate([v[~np.isnan(v)] for v in per_run])
        return float(values.mean()) if values.size else default

    return {
        "dataset": ev0["dataset"], "parts": ev0["num_parts"], "arch": ev0["model"]["arch"],
        "seeds": len(outputs), "test_acc": float(test.mean()), "test_std": float(test.std()),
        "val_acc": float(val.mean()), "epochs": len(outputs[0].metrics),
        "epoch_time": mean_of("epoch_time"), "compute_time": mean_of("compute_time"),
        "comm_time": mean_of("comm_time"), "codec_time": mean_of("codec_time"),
        "bits": int(outputs[0].metrics[0].get("bits", 32)), "mb_sent": mean_of("bytes_sent") / 1e6,
        "compression": mean_of("fp32_bytes_sent", float("nan")) / max(mean_of("bytes_sent"), 1.0),
        "hidden_comm_time": mean_of("hidden_comm_time"), "stale_share": mean_of("staleness"),
        "exchange": exchange_mode(outputs[0].evaluation),
        "regime": "sampled" if "sampling" in ev0 else "full-graph",
        "rows_per_batch": mean_of("input_rows_per_batch", float("nan")),
        "cache_hit": mean_of("cache_hit_rate", float("nan")),
        "rows_local": mean_of("rows_local", float("nan")), "rows_cached": mean_of("rows_cached", float("nan")),
        "rows_remote": mean_of("rows_remote", float("nan")),
    }


def accuracy_over_time(outputs: list[RunOutput]) -> tuple[np.ndarray, np.ndarray]:
    """Validation accuracy against training wall-clock, means over seeds: the seconds of training (epoch times,
    evaluation excluded) summed up to the end of each epoch, and that epoch's validation accuracy (nan when the
    epoch was not evaluated)."""
    n = min(len(o.metrics) for o in outputs)
    seconds = np.mean([np.cumsum(np.nan_to_num(o.series("epoch_time")[:n])) for o in outputs], axis=0)
    return seconds, np.mean([o.series("val_acc")[:n] for o in outputs], axis=0)


def accuracy_target(runs: dict[str, list[RunOutput]], share: float = 0.98) -> float:
    """A validation accuracy every run reaches: ``share`` of the lowest best (mean) validation accuracy of any
    run."""
    best = [np.nanmax(acc) for _, acc in map(accuracy_over_time, runs.values()) if not np.isnan(acc).all()]
    return share * min(best) if best else float("nan")


def time_to_accuracy(outputs: list[RunOutput], target: float) -> float:
    """Seconds of training until the mean validation accuracy first reaches ``target`` (nan if never)."""
    seconds, acc = accuracy_over_time(outputs)
    reached = np.nonzero(acc >= target)[0]
    return float(seconds[reached[0]]) if reached.size else float("nan")


def exchange_mode(evaluation: dict) -> str:
    """How a run moved data, in words: full-graph halo exchange sync, pipelined, pipelined K=5, adaptive K=5; for
    sampled runs the cache: vip cache α=0.2, no cache."""
    if "cache" in evaluation:
        cache = evaluation["cache"]
        if cache.get("policy") == "none" or not cache.get("alpha"):
            return "sampled, no cache"
        return f"sampled, {cache['policy']} cache α={cache['alpha']:g}"
    comm = evaluation.get("comm", {})
    if not comm.get("pipeline"):
        return "sync"
    k = comm.get("staleness", 0)
    name = "adaptive" if comm.get("staleness_policy") == "adaptive" else "pipelined"
    return f"{name} K={k}" if k else name
