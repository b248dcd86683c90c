"""The edges an edge minibatch keeps out of its sampled neighbourhoods: each of its positive pairs' edge and that
edge's reverse (DGL's ``exclude="reverse_id"``), so that no pair's own edge carries a message to its ends: the model
learns to predict an edge from the rest of the graph, which is all it sees of a validation or test pair.
"""
# Positions are indices into the topology's in-edges (``in_src``), what ``pick_neighbors`` takes as ``excluded``. The
# edge u -> v of relation r lies among v's in-edges of r, sorted by source (``Topology``), so a bisection finds it;
# every parallel copy is found. The reverse of relation r is ``GraphTypes.reverse_index()[r]`` (a homogeneous graph's
# one relation is its own: an undirected graph stores both directions in it); a relation without one excludes only
# the pair's own edge. A pair that is no edge of the graph (a directed graph's reverse, a split's held-out edge)
# excludes nothing.
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def first_from(src, lo, hi, u):
    """The first position in ``lo .. hi`` of ``src`` (ascending there: a node's in-edges of one relation) whose source
    is at least ``u`` (bisection); ``hi`` if none is."""
    while lo < hi:
        mid = (lo + hi) // 2
        if src[mid] < u:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _find(indptr, src, stride, u, v, r, out, n):
    """Append to ``out`` (from ``n``) the positions of the edges u -> v of relation r; return the new count."""
    end = indptr[v * stride + r + 1]
    lo = first_from(src, indptr[v * stride + r], end, u)
    while lo < end and src[lo] == u:
        out[n] = lo
        n += 1
        lo += 1
    return n


@njit(cache=True, nogil=True)
def _pair_edges(indptr, src, stride, pair_src, pair_dst, relation, reverse, out):
    n = 0
    for i in range(pair_src.shape[0]):
        u, v, r = pair_src[i], pair_dst[i], relation[i]
        if n + (indptr[v * stride + r + 1] - indptr[v * stride + r]) > out.shape[0]:
            return -1  # out too small: the caller grows it
        n = _find(indptr, src, stride, u, v, r, out, n)
        back = reverse[r]
        if back >= 0:
            if n + (indptr[u * stride + back + 1] - indptr[u * stride + back]) > out.shape[0]:
                return -1
            n = _find(indptr, src, stride, v, u, back, out, n)
    return n


def pair_edges(indptr: np.ndarray, src: np.ndarray, pair_src: np.ndarray, pair_dst: np.ndarray,
               relation: np.ndarray | None = None, reverse_relation=(0,), stride: int = 1,
               distinct: bool = True) -> np.ndarray:
    """The positions (ascending, distinct; ``distinct`` False: once per pair that names them, in no order) of the
    edges ``pair_src[i] -> pair_dst[i]`` of relation ``relation[i]``
    (None: 0) and of their reverses ``pair_dst[i] -> pair_src[i]`` of relation ``reverse_relation[relation[i]]`` (-1:
    none), among the in-edges ``src`` by (destination, relation) at ``indptr`` (``relation_offsets``, ``stride``
    relations)."""
    pair_src = np.ascontiguousarray(pair_src, np.int64)
    pair_dst = np.ascontiguousarray(pair_dst, np.int64)
    if not pair_src.shape[0]:
        return np.zeros(0, np.int64)
    relation = np.zeros(pair_src.shape[0], np.int64) if relation is None else \
        np.ascontiguousarray(relation, np.int64)
    reverse = np.asarray(reverse_relation, np.int64)
    size = 4 * pair_src.shape[0]
    while True:
        out = np.empty(size, np.int64)
        n = _pair_edges(np.asarray(indptr, np.int64), src, stride, pair_src, pair_dst, relation, reverse, out)
        if n >= 0:
            return np.unique(out[:n]) if distinct else out[:n]
        size *= 4
