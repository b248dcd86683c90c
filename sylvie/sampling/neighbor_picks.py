"""Which in-neighbours each vertex of a frontier draws: without replacement, counter based, in parallel (numba).

A vertex draws a uniform subset of min(fanout, in-degree) in-edges (Floyd's algorithm), as DGL's and SALIENT++'s
samplers do. Every random number hashes (minibatch key, hop, vertex, draw), so the picks do not depend on order or
thread count. Inlined helpers live here: numba's cache keys a kernel on its own module.

Edges can be excluded (an edge minibatch's pairs and their reverses, ``sylvie.sampling.excluded_edges``): they leave
the candidates before the draw, as DGL's ``sample_neighbors(exclude_edges=...)`` removes them, so a vertex draws a
uniform subset of min(fanout, in-degree less its excluded in-edges) of the rest. With nothing excluded the draws are
bit for bit those of the sampler without exclusion.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

U64 = np.uint64
GOLDEN = U64(0x9E3779B97F4A7C15)
_M1, _M2 = U64(0xBF58476D1CE4E5B9), U64(0x94D049BB133111EB)
MASK64 = (1 << 64) - 1
PARALLEL_MIN_FRONTIER = 2048  # below this a parallel launch costs more than it saves
CHUNK = 512  # frontier vertices per parallel task
_NONE = np.zeros(0, np.int64)  # no edge excluded


@njit(cache=True, inline="always")
def _mix64(z):
    """splitmix64's finaliser (Steele, Lea and Flood 2014): a bijection of uint64 with full avalanche."""
    z = (z ^ (z >> U64(30))) * _M1
    z = (z ^ (z >> U64(27))) * _M2
    return z ^ (z >> U64(31))


@njit(cache=True, inline="always")
def _below(x, m):
    """A uniform integer in [0, m) from the uint64 ``x``: its top 53 bits as a double in [0, 1), times m (bias
    below m / 2**53)."""
    t = np.int64(np.float64(x >> U64(11)) * 1.1102230246251565e-16 * np.float64(m))  # 2**-53
    return min(t, m - 1)


@njit(cache=True, inline="always")
def _pick_range(indptr, stride, relation, src, frontier, offsets, loop, hop_key, excluded, out, chosen, lo, hi):
    """The picks of frontier vertices ``lo .. hi - 1`` into ``out`` (their slices by ``offsets``); ``chosen`` is
    scratch of at least the largest count; ``excluded``: edge positions (ascending, distinct) no vertex draws."""
    for i in range(lo, hi):
        v, start = frontier[i], offsets[i]
        at = v * stride + relation
        k, first = offsets[i + 1] - start, indptr[at]
        stored = indptr[at + 1] - first
        x_lo = x_hi = 0  # v's excluded in-edges: excluded[x_lo:x_hi]
        if excluded.shape[0]:
            x_lo = np.searchsorted(excluded, first)
            x_hi = np.searchsorted(excluded, first + stored)
        deg = stored - (x_hi - x_lo)  # the candidates: v's in-edges less the excluded ones
        d = deg + loop
        if k == d:  # every candidate (fanout at least the degree), in the topology's order
            q, n = x_lo, 0
            for j in range(stored):
                if q < x_hi and excluded[q] == first + j:
                    q += 1
                    continue
                out[start + n] = src[first + j]
                n += 1
            if loop:
                out[start + deg] = v
            continue
        # Floyd: for j in d-k .. d-1, draw t in [0, j]; keep t, or j when t is kept already (a uniform k-subset)
        vkey = _mix64(hop_key + U64(v) * GOLDEN)
        for n in range(k):
            j = d - k + n
            t = _below(_mix64(vkey + U64(j + 1) * GOLDEN), j + 1)
            kept = False
            for q in range(n):  # no early exit: a branch-free scan is faster than a mispredicted one
                kept |= chosen[q] == t
            chosen[n] = j if kept else t
        for n in range(k):
            p = chosen[n]
            if p == deg:
                out[start + n] = v
                continue
            e = first + p  # the p-th candidate: past every excluded edge at or before it
            for q in range(x_lo, x_hi):
                if excluded[q] > e:
                    break
                e += 1
            out[start + n] = src[e]


@njit(cache=True, nogil=True)
def _pick_serial(indptr, stride, relation, src, frontier, offsets, loop, hop_key, excluded, out, most):
    chosen = np.empty(most, np.int64)
    _pick_range(indptr, stride, relation, src, frontier, offsets, loop, hop_key, excluded, out, chosen, 0,
                frontier.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def _pick_parallel(indptr, stride, relation, src, frontier, offsets, loop, hop_key, excluded, out, most):
    n = frontier.shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        chosen = np.empty(most, np.int64)
        _pick_range(indptr, stride, relation, src, frontier, offsets, loop, hop_key, excluded, out, chosen,
                    c * CHUNK, min(n, (c + 1) * CHUNK))


def hop_key(minibatch_key: int, hop: int) -> np.uint64:
    """The key of one hop of one minibatch (hops count from the seeds: 0 draws the seeds' neighbours)."""
    return U64(mix64((minibatch_key + (hop + 1) * int(GOLDEN)) & MASK64))


def relation_key(hop: np.uint64, relation: int) -> np.uint64:
    """The key of one relation's draws at one hop (``hop``: ``hop_key(...)``); relation 0's is the hop's own, so a
    homogeneous graph (one relation) draws as it always has."""
    return U64(hop) if relation == 0 else U64(mix64((int(hop) + relation * int(GOLDEN)) & MASK64))


def relation_offsets(in_indptr: np.ndarray, in_relation: np.ndarray | None, num_relations: int) -> np.ndarray:
    """The in-edges' offsets by (destination, relation), ``pick_neighbors``' ``indptr`` with ``stride``
    ``num_relations``: v's edges of relation r are ``out[v * R + r]`` up to ``out[v * R + r + 1]``, for a topology
    ordered by destination, then relation (``Topology.in_relation``); with one relation (or none given),
    ``in_indptr`` itself."""
    if in_relation is None or num_relations == 1:
        return np.asarray(in_indptr, np.int64)
    n = in_indptr.shape[0] - 1
    pair = np.repeat(np.arange(n, dtype=np.int64) * num_relations, np.diff(in_indptr))
    pair += in_relation
    out = np.zeros(n * num_relations + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair, minlength=n * num_relations), out=out[1:])
    return out


def pick_neighbors(indptr: np.ndarray, src: np.ndarray, frontier: np.ndarray, fanout: int, key: np.uint64,
                   self_loop: bool = False, stride: int = 1, relation: int = 0,
                   excluded: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each frontier vertex's picks: (offsets, picked), vertex i's sources ``picked[offsets[i]:offsets[i + 1]]``
    (int64 ids). ``indptr``/``src``: in-edges by destination (CSC); ``key``: ``hop_key(...)``. A typed graph's
    in-edges by (destination, relation): vertex v's edges of relation r are ``indptr[v * stride + r]`` up to
    ``indptr[v * stride + r + 1]`` (``stride``: the number of relations), and ``relation`` picks among those.
    ``excluded``: positions in ``src`` (ascending, distinct) that are no vertex's candidates."""
    if fanout < 1:
        raise ValueError(f"fanout must be at least 1, got {fanout}")
    frontier = np.ascontiguousarray(frontier, dtype=np.int64)
    excluded = _NONE if excluded is None else np.ascontiguousarray(excluded, dtype=np.int64)
    loop = int(bool(self_loop))
    at = frontier * stride + relation if stride != 1 or relation else frontier
    degrees = indptr[at + 1] - indptr[at]
    if excluded.shape[0]:
        degrees = degrees - (np.searchsorted(excluded, indptr[at + 1]) - np.searchsorted(excluded, indptr[at]))
    counts = np.minimum(degrees + loop, fanout)
    offsets = np.zeros(frontier.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.int64)
    kernel = (_pick_parallel if frontier.shape[0] >= PARALLEL_MIN_FRONTIER and numba.get_num_threads() > 1
              else _pick_serial)
    kernel(indptr, stride, relation, src, frontier, offsets, loop, U64(key), excluded, out,
           max(1, int(counts.max(initial=0))))
    return offsets, out


# ------------------------------------------------------------------------------------ the same, in plain Python

def mix64(z: int) -> int:
    """``_mix64`` on Python ints (the reference the tests hold the kernel to)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def reference_picks(indptr, src, v: int, fanout: int, key: int, self_loop: bool = False,
                    excluded=()) -> list[int]:
    """Vertex ``v``'s picks computed one number at a time in Python: the kernel's specification (``excluded``: edge
    positions that are not candidates)."""
    gone = {int(e) for e in excluded}
    candidates = [e for e in range(int(indptr[v]), int(indptr[v + 1])) if e not in gone]
    d = len(candidates) + int(self_loop)
    k = min(fanout, d)
    if k == d:
        positions = list(range(d))
    else:
        vkey = mix64((int(key) + v * int(GOLDEN)) & MASK64)
        chosen: list[int] = []
        for j in range(d - k, d):
            x = mix64((vkey + (j + 1) * int(GOLDEN)) & MASK64)
            t = min(int(float(x >> 11) * 2.0 ** -53 * float(j + 1)), j)  # _below(x, j + 1)
            chosen.append(j if t in chosen else t)
        positions = chosen
    return [v if p == len(candidates) else int(src[candidates[p]]) for p in positions]
