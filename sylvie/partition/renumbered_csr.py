"""The in-edges of an undirected graph stored in its sorted form (``sylvie.data.edge_form``) in the partition's id
space, without a sort: part k owns the new ids ``part_offsets[k] ..`` in the order of its nodes' old ids, so a row
of old ids ascending, its entries stably ordered by their part (a counting sort of the row by part), is a row of new
ids ascending. The same arrays the sort of every edge's key gives (``shard_writer._topology_columns``), in one pass
(numba)."""
from __future__ import annotations

import numpy as np
from numba import njit

from sylvie.data.edge_form import row_offsets


@njit(cache=True, nogil=True)
def _rows(original, xadj, neighbours, part_of, new_id, parts, out):
    counts = np.zeros(parts + 1, dtype=np.int64)
    pos = 0
    for r in range(original.shape[0]):
        o = original[r]
        first, last = xadj[o], xadj[o + 1]
        counts[:] = 0
        for e in range(first, last):
            counts[part_of[neighbours[e]] + 1] += 1
        for p in range(parts):
            counts[p + 1] += counts[p]
        for e in range(first, last):
            s = neighbours[e]
            p = part_of[s]
            out[pos + counts[p]] = new_id[s]
            counts[p] += 1
        pos += last - first


def in_sources_in_new_order(degree: np.ndarray, dst: np.ndarray, assign: np.ndarray, new_id: np.ndarray,
                            original: np.ndarray) -> np.ndarray:
    """int64: for each new id in turn (node ``original[i]`` is new id i), the new ids of its in-neighbours ascending,
    for a graph whose ``src -> dst`` is its sorted undirected form (so its in-neighbours are its out-neighbours, the
    row of ``dst`` it starts) and ``degree`` every node's degree (its row's length)."""
    n = assign.shape[0]
    out = np.empty(dst.shape[0], dtype=np.int64)
    _rows(original, row_offsets(degree), dst, assign, new_id, int(assign.max()) + 1 if n else 0, out)
    return out
