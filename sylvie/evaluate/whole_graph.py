"""The evaluate stage: whole-graph inference in full precision, one process, independent of partitions."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sylvie.atomic import write_json
from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.errors import SylvieError
from sylvie.models import build_model
from sylvie.models.blocks import whole_graph_block
from sylvie.output_dir import check_location


def load_trained(model_path: str | Path) -> dict:
    p = Path(model_path)
    if not p.is_file():
        raise SylvieError(f"{p}: trained model not found; run `sylvie train` first")
    try:
        return torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:
        raise SylvieError(f"{p}: not a model written by `sylvie train` ({e}); rerun training") from e


def _accuracy(name: str, labels: np.ndarray, pred: np.ndarray, mask: np.ndarray) -> float:
    if not mask.any():
        return float("nan")
    if name.startswith("ogbn-"):
        from ogb.nodeproppred import Evaluator

        return float(Evaluator(name).eval({"y_true": labels[mask][:, None], "y_pred": pred[mask][:, None]})["acc"])
    return float((labels[mask] == pred[mask]).mean())


def evaluate(dataset_dir: str | Path, model_path: str | Path, out_path: str | Path) -> dict:
    check_location(out_path, inputs=(dataset_dir, model_path), stage="sylvie evaluate")
    graph = load_graph(dataset_dir)
    ckpt = load_trained(model_path)
    if ckpt["dataset_fingerprint"] != graph.info["fingerprint"]:
        raise SylvieError(f"{model_path}: trained on another dataset than {dataset_dir} (fingerprints differ)")
    model_cfg = section("model", ckpt["model_cfg"], where=f"{model_path}: model_cfg")
    model = build_model(model_cfg, ckpt["in_feats"], ckpt["num_classes"])
    model.load_state_dict(ckpt["model"])
    model.eval()
    block = whole_graph_block(graph.src, graph.dst, graph.num_nodes, model_cfg.self_loop)
    with torch.no_grad():
        pred = model(block, torch.tensor(graph.features)).argmax(1).numpy()
    result = {
        "dataset": graph.name,
        "evaluator": "ogb" if graph.name.startswith("ogbn-") else "accuracy",
        **{f"{s}_acc": _accuracy(graph.name, graph.labels, pred, m)
           for s, m in (("train", graph.train_mask), ("val", graph.val_mask), ("test", graph.test_mask))},
        "model": ckpt["model_cfg"], "train": ckpt["train_cfg"], "comm": ckpt.get("comm_cfg", {}),
        **{k: ckpt[f"{k}_cfg"] for k in ("sampling", "cache", "features") if f"{k}_cfg" in ckpt}, **ckpt["summary"],
    }
    write_json(out_path, result)
    return result
