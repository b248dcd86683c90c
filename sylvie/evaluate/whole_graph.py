"""Whole-graph evaluation: inference in full precision, in one process, independent of partitions. The reference
the partition-parallel path (``partitioned``) is tested against; it needs the whole graph in one process's memory."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sylvie.data.graph import load_graph
from sylvie.evaluate.result import check_outputs, write_eval
from sylvie.evaluate.trained_model import model_for_inference
from sylvie.formats.model_file import load_model
from sylvie.formats.node_keys import read_node_keys
from sylvie.formats.predictions import write_predictions
from sylvie.models.blocks import whole_graph_block
from sylvie.models.registry import self_loop_edges


def evaluate(dataset_dir: str | Path, model_path: str | Path, out_path: str | Path,
             predictions: str | Path | None = None) -> dict:
    """Writes ``eval.json`` to ``out_path`` (and every node's predicted class, in the dataset's node order, to the
    ``.npy`` file ``predictions`` if given)."""
    check_outputs(out_path, predictions, {"--model": model_path, "--dataset": dataset_dir})
    graph = load_graph(dataset_dir)
    saved = load_model(model_path)
    model, model_cfg = model_for_inference(saved, model_path, graph.info["fingerprint"], dataset_dir)
    block = whole_graph_block(graph.src, graph.dst, graph.node_counts, self_loop_edges(model_cfg), types=graph.types,
                              relation=graph.edge_relations())
    x = [None if f is None else torch.tensor(f) for f in map(graph.features_of, range(len(graph.node_counts)))]
    target = slice(*graph.type_offsets[graph.types.target_index:graph.types.target_index + 2])  # its nodes' rows
    with torch.no_grad():
        pred = model(block, x).argmax(1).numpy()
    labels = np.asarray(graph.labels)[target]
    rows = {s: (labels[mask[target]], pred[mask[target]]) for s, mask in graph.masks.items()}
    if predictions:  # a typed graph's: its target type's nodes (their ids, or their numbers within the type)
        keys = read_node_keys(dataset_dir, target.stop - target.start, graph.info.get("node_keys_sha256"))
        write_predictions(predictions, pred, keys, graph.info.get("class_names"))
    return write_eval(out_path, graph.name, saved, rows, "whole graph, one process")
