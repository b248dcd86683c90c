"""What a partition balances: each training regime's constraints, every node's weight on each (METIS's
multi-constraint vertex weights), and the record of what a partition achieved (the manifest's ``balance``).

Full-graph training waits for the slowest rank, so it balances inner nodes, training nodes and edges. Sampled
training (SALIENT++'s four) balances training, validation and other nodes, and degree (feature requests).
"""
from __future__ import annotations

import numpy as np

from sylvie.config import section
from sylvie.data.graph import Graph, degrees
from sylvie.partition.quality import max_over_mean

REGIMES = {
    "full": ("inner_nodes", "train_nodes", "edges"),
    "sampled": ("train_nodes", "val_nodes", "other_nodes", "degree"),
}
# every constraint of every part within this factor of its mean over the parts: the schema's partition.tolerance
DEFAULT_TOLERANCE = section("partition").tolerance


def constraints(graph: Graph, regime: str) -> tuple[str, ...]:
    """The constraints of ``regime`` for ``graph``: a typed graph's count its nodes per type (``nodes:<type>``, as
    DGL's ``balance_ntypes``) in place of ``inner_nodes`` (full) and ``other_nodes`` (sampled: the nodes of each type
    that neither train nor validate)."""
    names = REGIMES[regime]
    if not graph.typed:
        return names
    per_type = tuple(f"nodes:{t}" for t in graph.types.node_types)
    return tuple(n for name in names for n in (per_type if name in ("inner_nodes", "other_nodes") else (name,)))


def vertex_weights(graph: Graph, regime: str) -> np.ndarray:
    """int64 [nodes, constraints]: each node's weight in each constraint of ``regime`` (``constraints``' order)."""
    in_deg, _ = degrees(graph)
    train, val = graph.train_mask, graph.val_mask
    columns = {"inner_nodes": np.ones(graph.num_nodes, dtype=np.int64), "train_nodes": train, "val_nodes": val,
               "other_nodes": ~(train | val), "edges": in_deg, "degree": in_deg}
    if graph.typed:
        offsets = graph.type_offsets
        counted = ~(train | val) if regime == "sampled" else np.ones(graph.num_nodes, dtype=bool)
        for t, name in enumerate(graph.types.node_types):
            column = np.zeros(graph.num_nodes, dtype=np.int64)
            column[offsets[t]:offsets[t + 1]] = counted[offsets[t]:offsets[t + 1]]
            columns[f"nodes:{name}"] = column
    return np.stack([np.asarray(columns[name], dtype=np.int64) for name in constraints(graph, regime)], axis=1)


def balance_record(graph: Graph, assign: np.ndarray, regime: str, tolerance: float | None) -> dict:
    """The manifest's ``balance``: the regime, the tolerance the partitioner was given (None: none), and per
    constraint its max/mean over the parts and its vertex slack: its heaviest node over the mean part (a partitioner
    cannot split a node, so a part may exceed the tolerance by that much)."""
    weights = vertex_weights(graph, regime)
    parts = int(assign.max()) + 1 if assign.size else 0
    record = {}
    for j, name in enumerate(constraints(graph, regime)):
        sums = np.bincount(assign, weights=weights[:, j], minlength=parts)
        mean = sums.mean() if sums.size else 0.0
        heaviest = int(weights[:, j].max()) if weights.size else 0
        record[name] = {"max_over_mean": max_over_mean(sums),
                             "vertex_slack": float(heaviest / mean) if mean > 0 else 0.0}
    return {"regime": regime, "tolerance": tolerance, "constraints": record}
