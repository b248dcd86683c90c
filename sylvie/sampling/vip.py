"""VIP, the vertex inclusion probability of SALIENT++ (Kaler et al., MLSys 2023): for part k's minibatches, the
probability that a vertex is among a minibatch's inputs.

``salient_vip`` is the published recurrence. ``vertex_inclusion_probability`` also follows what it leaves out (a
reached vertex samples again at later hops; a cavity over reverse edges), so it tracks our sampler more closely
(``tests/test_typed_sampling.py``). Formulas: below.
"""
# The two recurrences, for the edge e: v -> u (u samples v), f_1..f_L the fanouts (f_1 next to the seeds):
#
#     SALIENT++:  p_0(v) = b / |T_k| if v in T_k, else 0;  w_h(u) = min(1, f_h / deg(u))
#                 p_h(v) = 1 - prod over the edges v -> u of (1 - w_h(u) * p_{h-1}(u))
#                 VIP(v) = 1 - prod_{h=1..L} (1 - p_h(v))
#     ours:       R_0(v) = p_0(v)
#                 C_j(e) = 1 - (1 - R_j(u)) / (1 - M_j(e'))   u reached by hop j, not through v (e': u -> v)
#                 M_h(e) = sum_{j<h} (C_j(e) - C_{j-1}(e)) (1 - prod_{i=j+1..h} (1 - w_i(e)))
#                 R_h(v) = 1 - (1 - p_0(v)) prod over the edges e: v -> u of (1 - M_h(e));  VIP(v) = R_L(v)
#
# Products are sums of log1p over the edges: O(L^2 x edges) time (numba, parallel over destinations), a float32 per
# edge and hop, reverse edges found by bisection (the topology is sorted). A typed graph: an edge v -> u of relation r
# is drawn with w_h(e) = min(1, f_h[r] / deg_r(u)); e's reverse is the reverse relation's edge.
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit, prange

from sylvie.sampling.edge_seeds import EdgeSeeds
from sylvie.sampling.excluded_edges import first_from
from sylvie.sampling.neighbor_picks import relation_offsets

# The analysis's files are sylvie.formats.vip_file's; sylvie/train/run.py still imports their reader from here.


def edge_destinations(in_indptr: np.ndarray) -> np.ndarray:
    """For in-edges stored by destination (``in_src[in_indptr[u]:in_indptr[u + 1]]``), each edge's destination u."""
    return np.repeat(np.arange(in_indptr.shape[0] - 1), np.diff(in_indptr))


def iterations_per_epoch(train_counts, batch_size: int) -> int:
    """Minibatches per epoch, the same for every part: enough for the part with the most training vertices at
    ``batch_size``. The sampled trainer cuts each part's training vertices evenly into that many minibatches, so a
    part's minibatches hold ``len(train) / iterations`` seeds (at most ``batch_size``): the batch size its VIP is
    for."""
    return max(1, -(-int(max(train_counts)) // batch_size))


def _edge_weights(in_indptr, in_relation, fanouts_from_seeds):
    """Per hop, each in-edge's probability w_h(e) of being drawn by its destination (float64, edge order)."""
    in_deg = np.diff(in_indptr)
    num_rel = _num_relations(in_relation, fanouts_from_seeds)
    offsets = relation_offsets(in_indptr, in_relation, num_rel)
    pair = np.repeat(np.arange(in_indptr.shape[0] - 1, dtype=np.int64) * num_rel, in_deg)  # each edge's (v, r)
    if num_rel > 1:
        pair += in_relation
    deg = (offsets[pair + 1] - offsets[pair]).astype(np.float64)
    for fanout in fanouts_from_seeds:
        f = np.asarray(fanout, np.float64)[in_relation] if num_rel > 1 else float(np.max(fanout))
        with np.errstate(divide="ignore", invalid="ignore"):
            yield np.minimum(1.0, f / deg)


def _num_relations(in_relation, fanouts_from_seeds) -> int:
    if in_relation is None:
        return 1
    return max((len(f) for f in fanouts_from_seeds if isinstance(f, Sequence)), default=1)


def _fanout_table(fanouts_from_seeds, num_rel: int) -> np.ndarray:
    """(hops, relations) float64: each hop's fanout of each relation."""
    return np.array([[float(f)] * num_rel if not isinstance(f, Sequence) else [float(x) for x in f]
                     for f in fanouts_from_seeds], np.float64).reshape(len(fanouts_from_seeds), num_rel)


def _seed_probability(n: int, train_nodes: np.ndarray, batch_size: float) -> np.ndarray:
    p = np.zeros(n)
    if len(train_nodes):
        p[train_nodes] = min(1.0, batch_size / len(train_nodes))
    return p


@njit(cache=True, parallel=True, nogil=True)
def _reverse_edges(in_indptr, in_src, relation, has_relation, offsets, num_rel, rev_rel, out):
    """For each edge v -> u of relation r, the edge u -> v of relation ``rev_rel[r]`` (found by bisection among v's
    in-edges of that relation, sorted by source), or -1."""
    n = in_indptr.shape[0] - 1
    for u in prange(n):
        for e in range(in_indptr[u], in_indptr[u + 1]):
            r = relation[e] if has_relation else 0
            back = rev_rel[r]
            out[e] = -1
            if back < 0:
                continue
            v = in_src[e]
            end = offsets[v * num_rel + back + 1]
            lo = first_from(in_src, offsets[v * num_rel + back], end, u)
            if lo < end and in_src[lo] == u:
                out[e] = lo


def reverse_edges(in_indptr: np.ndarray, in_src: np.ndarray, in_relation: np.ndarray | None = None,
                  reverse_relation: Sequence[int] | None = None) -> np.ndarray:
    """For each in-edge v -> u (relation r), the index of an edge u -> v of relation ``reverse_relation[r]``, or -1
    (none, or r has no reverse: -1 in ``reverse_relation``; None: a homogeneous graph's one relation is its own
    reverse, a typed graph's relations have none). The in-edges as the topology stores them: by destination, then
    relation, then source."""
    if reverse_relation is None:
        reverse_relation = [0] if in_relation is None else [-1] * (int(in_relation.max(initial=0)) + 1)
    rev = np.asarray(reverse_relation, np.int64)
    relation = np.zeros(1, np.int16) if in_relation is None else np.asarray(in_relation)
    offsets = relation_offsets(in_indptr, in_relation, len(rev))
    out = np.empty(in_src.shape[0], np.int64)
    _reverse_edges(np.asarray(in_indptr, np.int64), in_src, relation, in_relation is not None, offsets, len(rev),
                   rev, out)
    return out


@njit(cache=True, parallel=True, nogil=True)
def _picked_by_hop(h, in_indptr, relation, has_relation, offsets, num_rel, fanout, reach, picked, rev, together,
                   excluded):
    """``picked[h - 1, e]`` = M_h(e) for every edge (the module's docstring), from R_0..R_{h-1} (``reach``) and
    M_1..M_{h-1} of the reverse edges. Edge minibatches (else both empty): ``together[e]``, the probability that e's
    ends are seeds by one pair of the batch; ``excluded[u * num_rel + r]``, that the batch takes one of u's in-edges
    of relation r out of its candidates (u is an end of one of its pairs)."""
    n = in_indptr.shape[0] - 1
    for u in prange(n):
        for e in range(in_indptr[u], in_indptr[u + 1]):
            r = relation[e] if has_relation else 0
            deg = offsets[u * num_rel + r + 1] - offsets[u * num_rel + r]
            short = 0.0  # P(u, a seed, has an in-edge of r excluded): it draws from one candidate fewer
            if excluded.shape[0] and reach[0, u] > 0:
                short = min(1.0, excluded[u * num_rel + r] / reach[0, u])
            m, before = 0.0, 0.0
            for j in range(h):
                miss = 1.0 - reach[j, u]  # 1 - R_j(u), then without what v brought in
                if j > 0 and rev[e] >= 0:
                    miss /= max(1.0 - picked[j - 1, rev[e]], 1e-15)
                if together.shape[0]:  # and without seeding shared with v
                    miss /= max(1.0 - together[e], 1e-15)
                cavity = min(max(1.0 - miss, 0.0), 1.0)
                never = 1.0  # u, in from hop j, draws v at none of the hops j + 1 .. h
                never_short = 1.0  # the same from one candidate fewer
                for i in range(j + 1, h + 1):
                    never *= 1.0 - min(1.0, fanout[i - 1, r] / deg)
                    never_short *= 1.0 - (min(1.0, fanout[i - 1, r] / (deg - 1)) if deg > 1 else 0.0)
                if j == 0:
                    never = (1.0 - short) * never + short * never_short
                m += max(cavity - before, 0.0) * (1.0 - never)
                before = cavity
            picked[h - 1, e] = m


def vertex_inclusion_probability(in_indptr: np.ndarray, in_src: np.ndarray, train_nodes: np.ndarray | None,
                                 batch_size: float | None, fanouts_from_seeds: Sequence,
                                 in_relation: np.ndarray | None = None,
                                 reverse_relation: Sequence[int] | None = None,
                                 reverse: np.ndarray | None = None,
                                 edge_seeds: EdgeSeeds | None = None) -> np.ndarray:
    """VIP of every vertex (float64) for minibatches of ``batch_size`` seeds drawn from ``train_nodes``, over the
    in-edges ``in_src[in_indptr[u]:in_indptr[u + 1]]`` of each u (the edges a sampler of u chooses from; by source
    within a destination, a typed graph's by relation first). A typed graph: each in-edge's relation
    ``in_relation``, per hop a fanout per relation (a tuple) or one for all, and each relation's reverse
    (``reverse_relation``, -1: none). ``reverse``: ``reverse_edges``' answer, when the caller has it already (the same
    for every part). ``edge_seeds``: link prediction's minibatches (``sylvie.sampling.edge_seeds``), instead of
    ``train_nodes`` and ``batch_size``: each vertex's probability of being a seed, the pairs that make two neighbours
    seeds at once, and the edges the batch keeps out of its neighbourhoods. Memory: a float32 per edge and hop, and
    the reverse edges' int64."""
    n, hops = in_indptr.shape[0] - 1, len(fanouts_from_seeds)
    in_indptr = np.asarray(in_indptr, np.int64)
    num_rel = _num_relations(in_relation, fanouts_from_seeds)
    rev = reverse_edges(in_indptr, in_src, in_relation, reverse_relation) if reverse is None else reverse
    relation = np.zeros(1, np.int16) if in_relation is None else np.asarray(in_relation)
    offsets = relation_offsets(in_indptr, in_relation, num_rel)
    fanout = _fanout_table(fanouts_from_seeds, num_rel)
    p0 = _seed_probability(n, train_nodes, batch_size) if edge_seeds is None else \
        np.asarray(edge_seeds.probability, np.float64)
    log_not_seed = np.log1p(-np.minimum(p0, 1.0 - 1e-15))
    reach = np.zeros((hops + 1, n))  # R_j per vertex
    reach[0] = p0
    picked = np.zeros((hops, in_src.shape[0]), np.float32)  # M_h per edge
    together = np.zeros(0, np.float32) if edge_seeds is None else np.asarray(edge_seeds.together, np.float32)
    excluded = np.zeros(0) if edge_seeds is None else np.asarray(edge_seeds.excluded, np.float64)
    for h in range(1, hops + 1):
        _picked_by_hop(h, in_indptr, relation, in_relation is not None, offsets, num_rel, fanout, reach, picked, rev,
                       together, excluded)
        m = picked[h - 1].astype(np.float64)
        got = np.bincount(in_src, weights=np.log1p(-np.minimum(m, 1.0 - 1e-15)), minlength=n)
        reach[h] = -np.expm1(log_not_seed + got)
    return reach[hops]


def salient_vip(in_indptr: np.ndarray, in_src: np.ndarray, train_nodes: np.ndarray, batch_size: float,
                fanouts_from_seeds: Sequence, in_relation: np.ndarray | None = None) -> np.ndarray:
    """SALIENT++'s published recurrence (the module's docstring), edge by edge: the baseline VIP is measured against."""
    n = in_indptr.shape[0] - 1
    in_deg = np.diff(in_indptr)
    p = _seed_probability(n, train_nodes, batch_size)
    vip_log = np.zeros(n)  # log P(not sampled at any hop)
    for w in _edge_weights(in_indptr, in_relation, fanouts_from_seeds):
        q = np.minimum(w * np.repeat(p, in_deg), 1.0 - 1e-15)
        p = -np.expm1(np.bincount(in_src, weights=np.log1p(-q), minlength=n))
        vip_log += np.log1p(-np.minimum(p, 1.0 - 1e-15))
    return -np.expm1(vip_log)
