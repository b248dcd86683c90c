"""The partition stage: canonical graph in, verified shards and manifest out."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

from sylvie.config import resolve_regime
from sylvie.data.edge_form import stored_undirected
from sylvie.data.graph import (
    Graph,
    check_fingerprint,
    check_unchanged,
    hash_edges,
    load_graph,
    load_meta,
    read_edges,
    read_features,
)
from sylvie.errors import SylvieError
from sylvie.output_dir import PARTITION, check_replaceable
from sylvie.partition.balance import DEFAULT_TOLERANCE, balance_record
from sylvie.partition.metis import metis_assign, metis_input
from sylvie.partition.random_assign import random_assign
from sylvie.partition.shard_writer import write_shards

METHODS = ("metis", "random")


def partition_dataset(dataset_dir: str | Path, out_dir: str | Path, parts: int, method: str = "metis",
                      seed: int = 0, progress: bool = True, balance: str = "full",
                      tolerance: float = DEFAULT_TOLERANCE) -> dict:
    """Partition the canonical graph in ``dataset_dir`` into ``parts`` and write the shards to ``out_dir``; returns
    the manifest. ``balance``: the regime whose constraints METIS keeps within ``tolerance`` times the mean part
    (``sylvie.partition.balance``; auto: full). The manifest records what every constraint achieved."""
    regime = resolve_regime(balance)
    if method not in METHODS:
        raise SylvieError(f"partition method '{method}' is unknown; choose one of {', '.join(METHODS)}")
    check_replaceable(out_dir, PARTITION, inputs=(dataset_dir,))  # before any work
    by_metis = method == "metis" and parts > 1
    # METIS needs the structure only: the features are read (and the whole graph checked against its fingerprint)
    # while it runs; a typed graph's (a file per node type) are read with the graph
    graph = load_graph(dataset_dir, features=not by_metis or "types" in load_meta(dataset_dir))
    if parts < 1:
        raise SylvieError(f"parts must be >= 1, got {parts}")
    if parts > graph.num_nodes:
        raise SylvieError(f"parts={parts} is more than the {graph.num_nodes} nodes of {dataset_dir}; "
                          f"use at most {graph.num_nodes} parts")
    undirected = stored_undirected(graph.src, graph.dst, graph.num_nodes)  # then nothing needs sorting
    if undirected:  # every node's in-degree is its out-degree, the length of its row
        graph.counted_degrees = (np.bincount(graph.src, minlength=graph.num_nodes).astype(np.int64),) * 2
    partitioner = None
    if method == "random":
        assign = random_assign(graph.num_nodes, parts, seed)
    elif not by_metis:
        assign = np.zeros(graph.num_nodes, dtype=np.int64)
    elif graph.typed:  # over the nodes of every type, each type's count balanced (balance.constraints)
        metis = metis_input(graph, regime, undirected)
        assign = metis_assign(metis, parts, seed, tolerance)
        partitioner = metis.library.describe()
        del metis
    else:
        # While METIS runs the stage holds METIS's input (for a graph stored undirected and a 64-bit METIS, the
        # destination column, mapped), the graph's labels and splits, and its features, read meanwhile on the other
        # core (ctypes lets go of the GIL) and checked with the rest of the graph against its fingerprint: its peak
        # memory is METIS's own plus the features. The edges are hashed for that check first, while METIS's memory
        # is still small, then let go, and read again after METIS (in place from the memory-mapped file that
        # save_graph wrote in one record batch, or copied from an older file)
        metis = metis_input(graph, regime, undirected)
        edges = [graph.src, graph.dst]
        graph.src = graph.dst = None
        with ThreadPoolExecutor(1) as pool:
            features = pool.submit(_read_and_check_features, graph, dataset_dir, edges)
            del edges
            assign = metis_assign(metis, parts, seed, tolerance)
            graph.features = features.result()
        partitioner = metis.library.describe()
        del metis
        graph.src, graph.dst = read_edges(dataset_dir)
        check_unchanged(graph, dataset_dir)  # the edges read are the ones hashed
    empty = sorted(set(range(parts)) - set(assign.tolist()))
    if empty:
        raise SylvieError(f"{method} left part(s) {empty} empty for {parts} parts of {graph.num_nodes} nodes; "
                          f"use fewer parts or method: random")
    bound = tolerance if by_metis else None  # what the partitioner was held to
    return write_shards(graph, assign, out_dir, method, seed, graph.info["fingerprint"], progress=progress,
                        inputs=(dataset_dir,), balance=balance_record(graph, assign, regime, bound),
                        undirected=undirected, partitioner=partitioner,
                        link_from=dataset_dir if graph.link is not None else None)


def _read_and_check_features(structure: Graph, directory: Path, edges: list) -> np.ndarray:
    """The features of ``structure``'s dataset, and the whole graph checked against its fingerprint; ``edges``
    (src, dst: the file, mapped) are let go once hashed, early in METIS's run, before its memory peaks."""
    edges_hash = hash_edges(*edges)
    edges.clear()
    features = read_features(structure, directory)
    check_fingerprint(replace(structure, features=features), directory, edges_hash)
    return features
