"""The CPU kernels of message passing (numba): a sum over each row's edges, with node factors on either side. One kernel
serves both directions of every layer we ship, forward over a block's in-edges and backward over its out-edges with
the factors' roles swapped, so neither direction scatters and no two threads write one row.
"""
# ``gather_sum``: ``out[v] = row_scale[v] * sum over e in indptr[v]..indptr[v+1] of edge_scale[u] * x[u]`` (``u =
# indices[e]``, the edge's other end), each factor optional. GCN: ``edge_scale`` the sources' out-degree^-1/2,
# ``row_scale`` the destinations' in-degree^-1/2; GraphSAGE's mean: ``row_scale`` 1 / in-edges. The backward
# (``Transpose``) is the same sum with the factors' roles swapped.
#
# Rows are split into chunks of about equal work (edges + rows, ``balanced_chunks``), since degrees are skewed; each
# chunk accumulates a row in a buffer of its own (a vector loop over the features that does not alias the output) and
# writes it once. The kernels release the GIL (``nogil``), so the communication and sampling threads run beside them;
# with one numba thread the serial kernel runs, as numba's parallel launch has a fixed cost even then.
from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit, prange

CHUNKS_PER_THREAD = 8
PARALLEL_MIN_WORK = 1 << 14  # edges + rows below which one thread does it all


@njit(cache=True, inline="always")
def _rows(indptr, indices, x, edge_scale, row_scale, out, acc, start, stop):
    """Rows ``start`` to ``stop``, four edges at a time: four independent row reads in flight, one pass over the buffer
    for them (timings: benchmarks/records/2026-11-27_floor_2core-vm.md)."""
    with_edge, with_row = edge_scale.shape[0] > 0, row_scale.shape[0] > 0
    d = x.shape[1]
    for v in range(start, stop):
        acc[:] = 0
        e, hi = indptr[v], indptr[v + 1]
        if with_edge:
            while e + 4 <= hi:
                u0, u1, u2, u3 = indices[e], indices[e + 1], indices[e + 2], indices[e + 3]
                s0, s1, s2, s3 = edge_scale[u0], edge_scale[u1], edge_scale[u2], edge_scale[u3]
                for k in range(d):
                    acc[k] += (s0 * x[u0, k] + s1 * x[u1, k]) + (s2 * x[u2, k] + s3 * x[u3, k])
                e += 4
            while e < hi:
                u = indices[e]
                s = edge_scale[u]
                for k in range(d):
                    acc[k] += s * x[u, k]
                e += 1
        else:
            while e + 4 <= hi:
                u0, u1, u2, u3 = indices[e], indices[e + 1], indices[e + 2], indices[e + 3]
                for k in range(d):
                    acc[k] += (x[u0, k] + x[u1, k]) + (x[u2, k] + x[u3, k])
                e += 4
            while e < hi:
                u = indices[e]
                for k in range(d):
                    acc[k] += x[u, k]
                e += 1
        if with_row:
            s = row_scale[v]
            for k in range(d):
                out[v, k] = acc[k] * s
        else:
            for k in range(d):
                out[v, k] = acc[k]


@njit(cache=True, nogil=True)
def _gather_sum_serial(indptr, indices, x, edge_scale, row_scale, out, bounds):
    acc = np.empty(x.shape[1], dtype=out.dtype)
    _rows(indptr, indices, x, edge_scale, row_scale, out, acc, bounds[0], bounds[-1])


@njit(cache=True, nogil=True, parallel=True)
def _gather_sum_parallel(indptr, indices, x, edge_scale, row_scale, out, bounds):
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty(x.shape[1], dtype=out.dtype)
        _rows(indptr, indices, x, edge_scale, row_scale, out, acc, bounds[c], bounds[c + 1])


def balanced_chunks(indptr: np.ndarray, chunks: int) -> np.ndarray:
    """Row boundaries (``chunks + 1`` of them at most, first 0, last the rows) cutting rows into runs of about
    equal edges + rows."""
    rows = indptr.shape[0] - 1
    if chunks <= 1 or rows <= 1:
        return np.array([0, rows], dtype=np.int64)
    work = indptr[1:] + np.arange(1, rows + 1)  # edges + rows up to and including each row
    targets = np.linspace(0, work[-1], chunks + 1)[1:-1]
    cuts = np.searchsorted(work, targets, side="left") + 1
    return np.unique(np.concatenate([[0], cuts, [rows]])).astype(np.int64)


def work_chunks(indptr: np.ndarray) -> np.ndarray:
    """The chunks ``gather_sum`` splits these rows into with numba's threads now."""
    threads = numba.get_num_threads()
    work = indptr.shape[0] - 1 + int(indptr[-1])
    if threads <= 1 or work < PARALLEL_MIN_WORK:
        return np.array([0, indptr.shape[0] - 1], dtype=np.int64)
    return balanced_chunks(indptr, threads * CHUNKS_PER_THREAD)


_NONE = {np.dtype(np.float32): np.zeros(0, np.float32), np.dtype(np.float64): np.zeros(0, np.float64)}


def gather_sum(indptr: torch.Tensor, indices: torch.Tensor, x: torch.Tensor, edge_scale: torch.Tensor | None,
               row_scale: torch.Tensor | None, bounds: np.ndarray) -> torch.Tensor:
    """A new ``(rows, features)`` tensor, ``x``'s dtype (float32 or float64, CPU); ``x`` is 2-d (it is made
    contiguous); the scales are 1-d of ``x``'s dtype, or None."""
    x = x.detach().contiguous()
    out = torch.empty((indptr.shape[0] - 1, x.shape[1]), dtype=x.dtype)
    if out.numel() == 0:
        return out.zero_()
    xn = x.numpy()
    none = _NONE[xn.dtype]
    es = none if edge_scale is None else edge_scale.detach().contiguous().numpy()
    rs = none if row_scale is None else row_scale.detach().contiguous().numpy()
    kernel = _gather_sum_parallel if bounds.shape[0] > 2 else _gather_sum_serial
    kernel(indptr.numpy(), indices.numpy(), xn, es, rs, out.numpy(), bounds)
    return out
