"""The seeds of a part's edge minibatches (``sylvie.sampling.edge_batches``), what the VIP analysis starts from for
link prediction instead of the node batches' b / |T_k|: each vertex's probability of being a seed of a given batch,
as an end of one of its positive pairs or as a negative; which neighbours are seeds together (a pair's two ends); and
which vertices draw from one candidate fewer (a pair's ends, whose edge the batch excludes).
"""
# For part k with T training pairs (those whose source it owns) cut into batches of b: a batch is a uniform b-subset of
# them, so a vertex at the end of m of them is in none with probability prod_{j<m} (1 - b / (T - j)) (hypergeometric).
# Negatives, independent of which pairs are in the batch: uniform ones are k per pair, each uniform over the nodes of
# the pair's destination type (n_t), so a batch draws k b_t of them (b_t: its pairs ending in type t) and misses a
# vertex with probability (1 - 1 / n_t)^(k b_t); local ones are drawn alike over the part's own nodes of the type
# (others: never); joint ones k per batch, (1 - 1 / n_t)^k. A vertex is a seed unless both miss it.
#
# The VIP recurrence takes each neighbour's reach as independent of the vertex's own: a pair's ends are seeds at once,
# so on an edge between them the neighbour's seed probability is taken without their pairs (``together``); and a
# vertex that is a pair's end draws among its in-edges less the excluded one (``excluded``). Cycles longer than an
# edge and back (a pair's common neighbours, small dense components) remain beyond it, as for node batches.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sylvie.sampling.excluded_edges import pair_edges
from sylvie.sampling.neighbor_picks import relation_offsets


@dataclass(frozen=True)
class EdgeSeeds:
    """A part's edge minibatches as the VIP recurrence takes them: ``probability`` per vertex (float64: a seed of a
    batch), ``together`` per in-edge (float32: a pair of the batch joins its ends) and ``excluded`` per (vertex,
    relation), ``v * R + r`` (float64: the batch excludes one of v's in-edges of relation r)."""
    probability: np.ndarray
    together: np.ndarray
    excluded: np.ndarray


def edge_seeds(in_indptr: np.ndarray, in_src: np.ndarray, src: np.ndarray, dst: np.ndarray,
               relation: np.ndarray | None, dst_type: np.ndarray, batch_size: float, negatives: int, sampler: str,
               candidates: Sequence[np.ndarray], in_relation: np.ndarray | None = None,
               reverse_relation=(0,)) -> EdgeSeeds:
    """``EdgeSeeds`` of the training pairs ``src -> dst`` (partition ids; ``relation``: a typed graph's, None: 0;
    ``dst_type``: each destination's node type) over the topology's in-edges (``in_relation``: a typed graph's, whose
    relations' reverses are ``reverse_relation``, ``GraphTypes.reverse_index``), ``batch_size`` pairs a batch,
    ``negatives`` per pair drawn by ``sampler`` from ``candidates`` (``edge_seed_probability``)."""
    stride = len(reverse_relation)
    indptr = relation_offsets(in_indptr, in_relation, stride)
    n = in_indptr.shape[0] - 1
    total = len(src)
    at = pair_edges(indptr, in_src, src, dst, relation, reverse_relation, stride, distinct=False)
    # every pair once per edge it names: an edge's pairs between its ends; a (vertex, relation)'s excludable in-edges
    per_edge = np.bincount(at, minlength=in_src.shape[0])
    slot = np.searchsorted(indptr, at, side="right") - 1
    per_slot = np.bincount(slot, minlength=n * stride)
    log_none = _log_in_none(batch_size, total, int(max(per_edge.max(initial=0), per_slot.max(initial=0))))
    return EdgeSeeds(edge_seed_probability(n, src, dst, dst_type, batch_size, negatives, sampler, candidates),
                     (-np.expm1(log_none[per_edge])).astype(np.float32), -np.expm1(log_none[per_slot]))


def edge_seed_probability(num_nodes: int, src: np.ndarray, dst: np.ndarray, dst_type: np.ndarray, batch_size: float,
                          negatives: int, sampler: str, candidates: Sequence[np.ndarray]) -> np.ndarray:
    """Each vertex's probability (float64) of being a seed of one of a part's edge minibatches: its training pairs
    ``src -> dst`` (ids in ``[0, num_nodes)``; ``dst_type``: each destination's node type), ``batch_size`` of them a
    batch (the part's pairs over the epoch's iterations), ``negatives`` per pair (``link.negatives``) drawn by
    ``sampler`` (``link.negative_sampler``) from ``candidates[t]``, the ids a negative of node type t is drawn from
    (every node of the type; for local negatives the part's own)."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    total = len(src)
    miss = np.ones(num_nodes)
    if total == 0:
        return 1.0 - miss
    ends = np.bincount(src, minlength=num_nodes) + np.bincount(dst[dst != src], minlength=num_nodes)
    miss *= np.exp(_log_in_none(batch_size, total, int(ends.max()))[ends])
    dst_type = np.asarray(dst_type, np.int64)
    share = batch_size / total  # a pair's chance of being in the batch
    for t, ids in enumerate(candidates):
        ids = np.asarray(ids, np.int64)
        ending = float((dst_type == t).sum())  # the pairs whose negatives are of type t
        draws = (negatives if ending else 0.0) if sampler == "joint" else negatives * share * ending
        if not len(ids) or not draws:
            continue
        miss[ids] *= np.exp(draws * np.log1p(-1.0 / len(ids)))
    return 1.0 - miss


def _log_in_none(batch_size: float, total: int, most: int) -> np.ndarray:
    """log P(none of m given pairs is in a batch of ``batch_size`` of ``total``), for m = 0 .. ``most``: the running
    sum of log(1 - b / (T - j)) (hypergeometric)."""
    j = np.arange(most)
    step = np.log1p(-np.minimum(batch_size / np.maximum(total - j, 1e-300), 1.0 - 1e-15))
    return np.concatenate([[0.0], np.cumsum(step)])
