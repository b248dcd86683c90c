"""One part's edges in its shard's local ids: the edges into its nodes in the graph's edge order, each source its
inner row or its halo row (halo sources sorted by owner, then global id).

Two numba passes over a byte an edge (its destination part) that write only the two output columns: numpy's
selections made several part-sized temporaries, whose first touch cost as much as the work.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass
class PartEdges:
    """A part's nodes (in their row order), its edges (the shard's ``edge_src`` and ``edge_dst``, int64 local rows)
    and its halo table's nodes."""
    inner: np.ndarray  # int64 global ids of the part's nodes, ascending: its inner rows
    edge_src: np.ndarray
    edge_dst: np.ndarray
    halo: np.ndarray  # int64 global ids of the halo rows, in row order
    cut: int  # edges whose source is a halo row
    relation: np.ndarray | None = None  # a typed graph's: each edge's relation


@njit(cache=True, nogil=True)
def _count_and_mark_halo(dst_part, src, part_of, part, is_halo):
    """(the part's edges, those of them whose source is of another part); ``is_halo[s]`` set to 1 for every such
    source ``s``."""
    count = 0
    cut = 0
    for e in range(dst_part.shape[0]):
        if dst_part[e] == part:
            count += 1
            s = src[e]
            if part_of[s] != part:
                is_halo[s] = 1
                cut += 1
    return count, cut


@njit(cache=True, nogil=True)
def _fill(dst_part, src, dst, part, row_of, edge_src, edge_dst):
    j = 0
    for e in range(dst_part.shape[0]):
        if dst_part[e] == part:
            edge_src[j] = row_of[src[e]]
            edge_dst[j] = row_of[dst[e]]
            j += 1


@njit(cache=True, nogil=True)
def _fill_relation(dst_part, part, relation, out):
    j = 0
    for e in range(dst_part.shape[0]):
        if dst_part[e] == part:
            out[j] = relation[e]
            j += 1


def part_edges(dst_part: np.ndarray, src: np.ndarray, dst: np.ndarray, part_of: np.ndarray, part: int,
               local_of: np.ndarray, is_halo: np.ndarray, out: tuple | None = None,
               relation: np.ndarray | None = None) -> PartEdges:
    """Part ``part``'s nodes and edges: ``dst_part`` every edge's destination part and ``part_of`` every node's (both
    of one small integer type), ``local_of`` every node's row in its own part's shard; ``is_halo`` a uint8 scratch
    array, one entry a node, all zero (left all zero again); ``out``: two int64 arrays at least as long as the
    part's edges, whose beginnings become its columns (None: new arrays); ``relation``: a typed graph's edge
    relations, of which the part's are taken in the same order."""
    count, cut = _count_and_mark_halo(dst_part, src, part_of, part, is_halo)
    marked = np.flatnonzero(is_halo)
    is_halo[marked] = 0
    halo = marked[np.argsort(part_of[marked], kind="stable")]  # by owner, then global id
    inner = np.flatnonzero(part_of == part)
    # every node's row in this shard (its inner row, or its halo row after the inner rows; others never read), in
    # the narrowest type that holds them: the one table the edges look up, read in order for their sources (the
    # edge list is by source) and at random for their destinations
    row_of = np.empty(part_of.shape[0], dtype=np.int32 if inner.shape[0] + halo.shape[0] < 2 ** 31 else np.int64)
    row_of[inner] = local_of[inner]
    row_of[halo] = inner.shape[0] + np.arange(halo.shape[0])
    edge_src, edge_dst = (np.empty(count, dtype=np.int64) for _ in "sd") if out is None else (a[:count] for a in out)
    _fill(dst_part, src, dst, part, row_of, edge_src, edge_dst)
    rel = None
    if relation is not None:
        rel = np.empty(count, dtype=relation.dtype)
        _fill_relation(dst_part, part, relation, rel)
    return PartEdges(inner, edge_src, edge_dst, halo, int(cut), rel)
