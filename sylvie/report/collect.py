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
        return np.array([m[key] for m in self.metrics], dtype=float)


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
        if key not in outputs[0].metrics[0]:  # metrics written before the key existed
            return default
        return float(np.mean([o.series(key).mean() for o in outputs]))

    return {
        "dataset": ev0["dataset"], "parts": ev0["num_parts"], "arch": ev0["model"]["arch"],
        "seeds": len(outputs), "test_acc": float(test.mean()), "test_std": float(test.std()),
        "val_acc": float(val.mean()), "epochs": len(outputs[0].metrics),
        "epoch_time": mean_of("epoch_time"), "compute_time": mean_of("compute_time"),
        "comm_time": mean_of("comm_time"), "codec_time": mean_of("codec_time"),
        "bits": int(outputs[0].metrics[0].get("bits", 32)), "mb_sent": mean_of("bytes_sent") / 1e6,
        "compression": mean_of("fp32_bytes_sent", float("nan")) / max(mean_of("bytes_sent"), 1.0),
        "hidden_comm_time": mean_of("hidden_comm_time"), "stale_share": mean_of("staleness"),
        "exchange": exchange_mode(outputs[0].evaluation.get("comm", {})),
    }


def exchange_mode(comm: dict) -> str:
    """How a run exchanged halo data, in words: sync, pipelined, pipelined K=5, adaptive K=5."""
    if not comm.get("pipeline"):
        return "sync"
    k = comm.get("staleness", 0)
    name = "adaptive" if comm.get("staleness_policy") == "adaptive" else "pipelined"
    return f"{name} K={k}" if k else name
