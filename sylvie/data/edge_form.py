"""Whether an edge list is already in the undirected form METIS and the topology want: both directions, no
self-loops or duplicates, sorted by source then destination. Then the list is the graph's CSR and nothing needs
sorting.

One numba pass: keys strictly increasing, and symmetry checked by comparing two 64-bit hashed sums (forward and
transposed).
"""
from __future__ import annotations

import numpy as np
from numba import njit

_U = np.uint64


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finaliser: a bijection of uint64 that scatters every input bit over the output."""
    x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
    return x ^ (x >> _U(31))


@njit(cache=True, nogil=True)
def _scan(src, dst, n):
    prev = -1
    forward_a = forward_b = backward_a = backward_b = _U(0)
    offset = _U(0x9E3779B97F4A7C15)
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if u == v:
            return False
        key = u * n + v
        if key <= prev:
            return False
        prev = key
        k, t = _U(key), _U(v * n + u)
        forward_a += _mix(k)
        forward_b += _mix(k + offset)
        backward_a += _mix(t)
        backward_b += _mix(t + offset)
    return forward_a == backward_a and forward_b == backward_b


def stored_undirected(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> bool:
    """Whether ``src -> dst`` (int64) is the sorted undirected form of its graph (see the module)."""
    if src.dtype != np.int64 or dst.dtype != np.int64:
        return False
    return bool(_scan(src, dst, np.int64(num_nodes)))


def row_offsets(lengths: np.ndarray) -> np.ndarray:
    """int64 [len(lengths) + 1]: where each row of a CSR begins, given every row's length (for an edge list in the
    sorted undirected form: the nodes' degrees)."""
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets
