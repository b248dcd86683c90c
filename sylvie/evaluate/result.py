"""What the evaluate stage writes. ``eval.json``: accuracies on the train, validation and test nodes (OGB's
Evaluator for ogbn-* datasets) next to the run's settings; both evaluation paths write it through here, from the
labels and predictions of the labelled nodes. With ``--predictions``, every node's predicted class, an ``.npy``."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sylvie.atomic import atomic_path, write_json

SPLITS = ("train", "val", "test")


def accuracy(dataset: str, labels: np.ndarray, pred: np.ndarray) -> float:
    if labels.shape[0] == 0:
        return float("nan")
    if dataset.startswith("ogbn-"):
        from ogb.nodeproppred import Evaluator

        return float(Evaluator(dataset).eval({"y_true": labels[:, None], "y_pred": pred[:, None]})["acc"])
    return float((labels == pred).mean())


def write_eval(out_path: str | Path, dataset: str, ckpt: dict, split_rows: dict, mode: str) -> dict:
    """``split_rows[s] = (labels, predictions)`` of split s's nodes; ``mode`` says how inference ran."""
    result = {
        "dataset": dataset,
        "evaluator": "ogb" if dataset.startswith("ogbn-") else "accuracy",
        "inference": mode,
        **{f"{s}_acc": accuracy(dataset, *split_rows[s]) for s in SPLITS},
        "model": ckpt["model_cfg"], "train": ckpt["train_cfg"], "comm": ckpt.get("comm_cfg", {}),
        **{k: ckpt[f"{k}_cfg"] for k in ("sampling", "cache", "features") if f"{k}_cfg" in ckpt}, **ckpt["summary"],
    }
    write_json(out_path, result)
    return result


def write_predictions(path: str | Path, pred: np.ndarray) -> None:
    """Every node's predicted class, in the dataset's node order, as an int64 ``.npy`` file (atomically)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, pred.astype(np.int64, copy=False))
