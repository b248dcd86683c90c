"""Whole-graph evaluation: inference in full precision, in one process, independent of partitions. The reference
the partition-parallel path (``partitioned``) is tested against; it needs the whole graph in one process's memory."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sylvie.data.graph import load_graph
from sylvie.errors import SylvieError
from sylvie.evaluate.result import check_outputs, write_eval, write_link_eval
from sylvie.evaluate.trained_model import model_for_inference
from sylvie.formats.model_file import load_model
from sylvie.formats.node_keys import read_node_keys
from sylvie.formats.predictions import write_predictions
from sylvie.formats.splits import SPLITS
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
    block, x = whole_graph_inputs(graph, model_cfg)
    if saved.link_cfg is not None:
        if predictions:
            raise SylvieError(f"--predictions: {model_path} predicts links, not nodes' classes; leave --predictions "
                              f"out (or score pairs of your own with --score-pairs)")
        return write_link_eval(out_path, graph.name, saved, pair_scores(graph, model, block, x),
                               "whole graph, one process")
    target = slice(*graph.type_offsets[graph.types.target_index:graph.types.target_index + 2])  # its nodes' rows
    with torch.no_grad():
        pred = model(block, x).argmax(1).numpy()
    labels = np.asarray(graph.labels)[target]
    rows = {s: (labels[mask[target]], pred[mask[target]]) for s, mask in graph.masks.items()}
    if predictions:  # a typed graph's: its target type's nodes (their ids, or their numbers within the type)
        keys = read_node_keys(dataset_dir, target.stop - target.start, graph.info.get("node_keys_sha256"))
        write_predictions(predictions, pred, keys, graph.info.get("class_names"))
    return write_eval(out_path, graph.name, saved, rows, "whole graph, one process")


def whole_graph_inputs(graph, model_cfg) -> tuple:
    """The whole graph's block (for the model of section ``model_cfg``) and every node type's input rows."""
    block = whole_graph_block(graph.src, graph.dst, graph.node_counts, self_loop_edges(model_cfg), types=graph.types,
                              relation=graph.edge_relations())
    inputs = [graph.features_of(t) for t in range(len(graph.node_counts))]
    return block, [None if f is None else torch.tensor(f) for f in inputs]


@torch.no_grad()
def embeddings(graph, model, block, x) -> torch.Tensor:
    """A link-prediction model's embedding of every node (a row per canonical id, every node type)."""
    model.eval()
    h = model(block, x, out_types=list(range(len(graph.node_counts))))
    return h[0] if len(h) == 1 else torch.cat(h)


@torch.no_grad()
def pair_scores(graph, model, block, x) -> dict:
    """The validation and test pairs' scores from the whole graph's embeddings: split -> (positives ``[n]``,
    negatives ``[n, k]`` of each pair's own or ``[m]`` of the split's shared negative pairs, shared)."""
    own, link = embeddings(graph, model, block, x), graph.link
    relation = torch.from_numpy(link.relation.astype(np.int64)) if link.relation is not None else None
    out = {}
    for s in ("val", "test"):
        at = link.indices(s)
        src, dst = torch.from_numpy(link.src[at]), torch.from_numpy(link.dst[at])  # copies: the file's are read-only
        rel = None if relation is None else relation[at]
        pos = model.decoder(own[src], own[dst], rel)
        if link.negatives.shape[1]:
            neg_ids = torch.from_numpy(np.array(link.negatives_of(s)))
            neg = model.decoder(own[src].unsqueeze(1), own[neg_ids], None if rel is None else rel.unsqueeze(1))
            out[s] = (pos, neg, False)
        else:
            n_src, n_dst, n_split = (torch.from_numpy(np.array(a)) for a in link.negative_pairs)
            of = n_split == SPLITS.index(s)
            out[s] = (pos, model.decoder(own[n_src[of]], own[n_dst[of]]), True)
    return out
