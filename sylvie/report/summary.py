"""One row of the report's comparison table: a run's seeds summarised (means over the seeds that finished).

A node-classification run's row has its accuracies; a link-prediction run's has its test split's ranking metrics
(``LINK_METRICS``, from eval.json's ``link``) instead, and nan accuracies (its ``{split}_acc`` hold MRR or Hits@50,
which are not accuracies)."""
from __future__ import annotations

import numpy as np

from sylvie.formats.eval_result import EvalResult
from sylvie.report.run_output import RunOutput, finished

LINK_METRICS = ("mrr", "hits@10", "hits@50")  # a link run's test metrics in the table: test_<name>, test_<name>_std


def summarise(outputs: list[RunOutput]) -> dict:
    """One row of the comparison table: mean (and std) over the seeds that finished (at least one)."""
    outputs = finished(outputs)
    ev0 = outputs[0].evaluation
    node = ev0.task == "node"
    # nan: no such nodes, or a link run (its {split}_acc are not accuracies)
    test = np.array([o.evaluation.accuracies["test"] if node else np.nan for o in outputs], dtype=float)
    val = np.array([o.evaluation.accuracies["val"] if node else np.nan for o in outputs], dtype=float)
    link = {}
    for name in LINK_METRICS:  # nan for a node run, and where the protocol has no such metric (MRR: shared negatives)
        values = np.array([(o.evaluation.link or {}).get("test", {}).get(name, np.nan) for o in outputs], dtype=float)
        link[f"test_{name}"], link[f"test_{name}_std"] = float(values.mean()), float(values.std())

    def mean_of(key, default=0.0):  # default: no such field in the run's mode, or never measured
        per_run = [o.series(key) for o in outputs]  # null (e.g. no hit rate without remote rows) -> nan
        values = np.concatenate([v[~np.isnan(v)] for v in per_run])
        return float(values.mean()) if values.size else default

    return {
        "dataset": ev0.dataset, "parts": ev0.num_parts, "arch": ev0.model["arch"], "task": ev0.task,
        "seeds": len(outputs), "test_acc": float(test.mean()), "test_std": float(test.std()),
        "val_acc": float(val.mean()), **link, "epochs": len(outputs[0].metrics),
        "epoch_time": mean_of("epoch_time"), "compute_time": mean_of("compute_time"),
        "comm_time": mean_of("comm_time"), "codec_time": mean_of("codec_time"),
        "bits": outputs[0].metrics[0].bits, "mb_sent": mean_of("bytes_sent") / 1e6,
        "compression": mean_of("fp32_bytes_sent", float("nan")) / max(mean_of("bytes_sent"), 1.0),
        "hidden_comm_time": mean_of("hidden_comm_time"), "stale_share": mean_of("staleness"),
        "exchange": exchange_mode(outputs[0].evaluation),
        "regime": "sampled" if outputs[0].metrics[0].mode == "sampled" else "full-graph",
        "rows_per_batch": mean_of("input_rows_per_batch", float("nan")),
        "cache_hit": mean_of("cache_hit_rate", float("nan")),
        "rows_local": mean_of("rows_local", float("nan")), "rows_cached": mean_of("rows_cached", float("nan")),
        "rows_remote": mean_of("rows_remote", float("nan")),
    }


def exchange_mode(evaluation: EvalResult) -> str:
    """How a run moved data, in words: full-graph halo exchange sync, pipelined, pipelined K=5, adaptive K=5; for
    sampled runs the cache: vip cache α=0.2, no cache."""
    if evaluation.cache is not None:
        cache = evaluation.cache
        if cache.get("policy") == "none" or not cache.get("alpha"):
            return "sampled, no cache"
        return f"sampled, {cache['policy']} cache α={cache['alpha']:g}"
    comm = evaluation.comm
    if not comm.get("pipeline"):
        return "sync"
    k = comm.get("staleness", 0)
    name = "adaptive" if comm.get("staleness_policy") == "adaptive" else "pipelined"
    return f"{name} K={k}" if k else name
