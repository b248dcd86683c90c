"""Partition-parallel evaluation, launched like training (``sylvie launch -- sylvie evaluate --partition ...``), for
full-graph and sampled models alike: each rank holds only its shard and predicts its nodes with a full-neighbourhood
forward pass, halo rows exchanged in fp32 (``RankGraph``, as both trainers validate). Rank 0 writes the same
``eval.json`` as whole-graph evaluation and, with ``predictions``, every node's class in the dataset's node order.
"""
# Rank 0 collects the labels and predictions of the labelled nodes; predictions carry the nodes' own ids and the
# classes' names where the dataset (``dataset_dir``) has them.
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch.distributed as dist

from sylvie.config import section
from sylvie.data.graph import load_meta
from sylvie.errors import SylvieError
from sylvie.evaluate.result import check_outputs, write_eval, write_link_eval
from sylvie.evaluate.trained_model import model_for_inference
from sylvie.formats.model_file import load_model
from sylvie.formats.node_keys import read_node_keys
from sylvie.formats.partition_manifest import graph_layout, read_manifest
from sylvie.formats.predictions import write_predictions
from sylvie.models.registry import needs_global_out_degrees, self_loop_edges
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import Context, one_rank_per_part
from sylvie.runtime.rank_graph import RankGraph
from sylvie.runtime.rank_pairs import RankPairs


def evaluate_partitioned(partition_dir: str | Path, model_path: str | Path, out_path: str | Path,
                         predictions: str | Path | None = None, dataset_dir: str | Path | None = None,
                         ctx: Context | None = None) -> dict | None:
    """On every rank of a run with one rank per part; rank 0 writes ``out_path`` (and ``predictions``) and returns
    eval.json's content, the other ranks None. Waits on peers are bounded by the run's ``train.timeout``. ``ctx``:
    the process group of the ranks that trained the model (a training job's, which evaluates in it once rank 0 has
    written the model: every rank waits for that first); None: the ranks join one of their own."""
    given = {"--model": model_path, "--partition": partition_dir,
             **({"--dataset": dataset_dir} if dataset_dir is not None else {})}  # every input: never written over
    if ctx is not None and ctx.world > 1:
        dist.barrier()  # rank 0 has written the model
    check_outputs(out_path, predictions, given)
    manifest = read_manifest(partition_dir)
    if predictions and dataset_dir is not None:
        _check_dataset(dataset_dir, manifest)
    saved = load_model(model_path)
    model, model_cfg = model_for_inference(saved, model_path, manifest["dataset_fingerprint"], partition_dir)
    inputs = (partition_dir, manifest, saved, model, model_cfg, out_path, predictions, dataset_dir)
    if ctx is not None:
        return _evaluate_on_ranks(ctx, *inputs)
    train_cfg = saved.train_cfg
    # on a GPU if this machine has one, else the CPU, whatever device training used; the run's timeout
    with one_rank_per_part("auto", float(train_cfg.get("timeout", 120)), manifest["num_parts"], partition_dir,
                           stage="evaluate", startup_timeout_s=float(train_cfg.get("startup_timeout", 60))) as ctx:
        return _evaluate_on_ranks(ctx, *inputs)


def _evaluate_on_ranks(ctx: Context, partition_dir, manifest: dict, saved, model, model_cfg, out_path, predictions,
                       dataset_dir) -> dict | None:
    """The evaluation itself, on the ranks of ``ctx``: each rank's shard predicted with the halo exchanged."""
    shard = read_shard(partition_dir, ctx.rank, manifest)
    graph = RankGraph(ctx, shard, self_loop_edges(model_cfg), needs_global_out_degrees(model_cfg))
    model.keep_rows(graph.rows.embedding_ids(shard))  # the model file's tables are whole
    if saved.link_cfg is not None:  # link prediction: the pairs scored, their ranks among their negatives
        return _evaluate_pairs(ctx, partition_dir, manifest, shard, graph, model, saved, out_path)
    target = graph.rows.inner_slice(graph.types.target_index)  # the target type's rows; ids within the type
    first = int(shard.type_offsets[graph.types.target_index]) if shard.typed else 0
    ids = np.array(shard.global_id[target], dtype=np.int64) - first if predictions else None
    del shard  # unmapped before the forward pass (set-up read all of it, for its checksum)
    pred = graph.predict(model.to(ctx.device)).cpu().numpy()
    label = graph.labels.cpu().numpy()
    masks = {s: m.cpu().numpy() for s, m in graph.masks.items()}
    mine = {s: (label[m], pred[m]) for s, m in masks.items()}
    if predictions:
        mine["all"] = (ids, pred)
    parts = _gather_to_rank0(mine, ctx.world)
    result = None
    if ctx.rank == 0:
        rows = {s: tuple(np.concatenate([p[s][k] for p in parts]) for k in (0, 1)) for s in mine}
        if predictions:
            ids, pred_all = rows.pop("all")  # a shard's global ids are the dataset's node ids
            in_order = np.empty(_predicted_nodes(manifest), np.int64)
            in_order[ids] = pred_all
            write_predictions(predictions, in_order, *_names(dataset_dir, manifest))
        result = write_eval(out_path, manifest["dataset"], saved, rows,
                            f"partition-parallel, {ctx.world} ranks")
    return result


def _evaluate_pairs(ctx, partition_dir, manifest: dict, shard, graph: RankGraph, model, saved, out_path) -> dict | None:
    """A link-prediction model's evaluation: every rank's embeddings of its own rows, its validation and test pairs
    scored (their remote ends fetched in fp32), the scores gathered in the pairs' order on rank 0, which ranks them and
    writes eval.json."""
    pairs = RankPairs(ctx, partition_dir, manifest, shard, section("link", saved.link_cfg), seed=0)
    del shard
    own = graph.pair_ends(model.to(ctx.device))
    mine = {}
    for name in ("val", "test"):
        pos, neg = pairs.split_scores(own, model.decoder, name)
        shared = pairs.shared.get(name)
        mine[name] = (pairs.splits[name].number, pos.cpu().numpy(), neg.cpu().numpy(),
                      None if pairs.ranked or shared is None else shared.number)
    parts = _gather_to_rank0(mine, ctx.world)
    if ctx.rank != 0:
        return None
    scores = {}
    for name in mine:
        numbers = np.concatenate([p[name][0] for p in parts])
        order = np.argsort(numbers, kind="stable")  # the pairs' order in the dataset, whatever the ranks
        pos = np.concatenate([p[name][1] for p in parts])[order]
        if pairs.ranked:
            neg = np.concatenate([p[name][2] for p in parts])[order]
        else:
            shared_numbers = np.concatenate([p[name][3] for p in parts])
            neg = np.concatenate([p[name][2] for p in parts])[np.argsort(shared_numbers, kind="stable")]
        scores[name] = (pos, neg, not pairs.ranked)
    return write_link_eval(out_path, manifest["dataset"], saved, scores, f"partition-parallel, {ctx.world} ranks")


def _check_dataset(dataset_dir, manifest) -> None:
    """Before any work, on every rank: ``dataset_dir`` is the dataset the partition was made from."""
    if load_meta(dataset_dir)["fingerprint"] != manifest["dataset_fingerprint"]:
        raise SylvieError(f"--dataset {dataset_dir}: not the dataset the partition was made from (its fingerprint "
                          f"differs from the one in the partition's manifest.json); give that dataset's directory")


def _names(dataset_dir, manifest) -> tuple:
    """(node ids, class names) of the dataset, where ``dataset_dir`` is given and has them: read by rank 0 alone, when
    it writes the predictions."""
    if dataset_dir is None:
        return None, None
    meta = load_meta(dataset_dir)
    return (read_node_keys(dataset_dir, _predicted_nodes(manifest), meta.get("node_keys_sha256")),
            meta.get("class_names"))


def _predicted_nodes(manifest: dict) -> int:
    """The nodes evaluation predicts: every node, or a typed graph's target type's."""
    layout = graph_layout(manifest)
    types = layout["types"]
    return layout["type_counts"][types["node_types"].index(types["target"])]


def _gather_to_rank0(obj, world: int) -> list | None:
    if world == 1:
        return [obj]
    parts = [None] * world if dist.get_rank() == 0 else None
    dist.gather_object(obj, parts, dst=0)
    return parts
