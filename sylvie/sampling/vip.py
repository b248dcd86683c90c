"""VIP, the vertex inclusion probability of SALIENT++ (Kaler et al., MLSys 2023): for the minibatches of one part,
the probability that a vertex is sampled as a neighbour at some hop of a minibatch's L-hop neighbourhood.

For part k with training vertices T_k, batch size b and fanouts f_1..f_L (f_1 next to the seeds; DGL's
``NeighborSampler(fanouts)`` takes them the other way round, ``fanouts[-1]`` next to the seeds):

    p_0(v) = b / |T_k|                 if v in T_k, else 0
    w_h(u) = min(1, f_h / deg(u))      a given in-neighbour of u is sampled (without replacement)
    p_h(v) = 1 - prod over the edges v -> u of (1 - w_h(u) * d_{h-1}(u))
    VIP(v) = 1 - prod_{h=1..L} (1 - p_h(v))

with d_{h-1} = p_{h-1}, SALIENT++'s recurrence (it treats samplers and hops as independent). DGL's sampler lets
every vertex reached so far sample again (a block's sources include its destinations); using that frontier,
d_{h-1} = 1 - prod_{i<h} (1 - p_i), was no closer to DGL's measured inclusion frequencies on Cora (mean absolute
error 0.012 vs 0.009 and 0.0050 vs 0.0054 on two parts), so the published recurrence is kept. Products are sums of
log1p: one pass over the edges per hop, O(L x edges).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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


def vertex_inclusion_probability(in_indptr: np.ndarray, in_src: np.ndarray, train_nodes: np.ndarray,
                                 batch_size: float, fanouts_from_seeds: Sequence[int]) -> np.ndarray:
    """VIP of every vertex (float64) for minibatches of ``batch_size`` seeds drawn from ``train_nodes``, over the
    in-edges ``in_src[in_indptr[u]:in_indptr[u + 1]]`` of each u (the edges a sampler of u chooses from)."""
    n = in_indptr.shape[0] - 1
    in_deg = np.diff(in_indptr)
    deg = in_deg.astype(np.float64)
    p = np.zeros(n)
    if len(train_nodes):
        p[train_nodes] = min(1.0, batch_size / len(train_nodes))
    vip_log = np.zeros(n)  # log P(not sampled at any hop)
    for fanout in fanouts_from_seeds:
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(deg > 0, np.minimum(1.0, fanout / deg), 0.0)
        q = np.minimum(w * p, 1.0 - 1e-15)
        # an edge's term is its destination's (the vertex that samples it), and the edges are stored by
        # destination: the destination's term repeated, computed once a vertex instead of once an edge
        p = -np.expm1(np.bincount(in_src, weights=np.repeat(np.log1p(-q), in_deg), minlength=n))
        vip_log += np.log1p(-np.minimum(p, 1.0 - 1e-15))
    return -np.expm1(vip_log)

