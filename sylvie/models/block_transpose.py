"""A block's out-edges from its in-edges: a counting sort of the edges by source (numba on the CPU, torch's stable sort
elsewhere); within a source, edges keep the block's order (by destination), so both paths give the same arrays. Each
out-edge's position among the in-edges (``Transpose.edge``) is made only where asked for (``edges=True``: the
attention's backward and the sparse product's transposed matrix), as it costs an id per edge for the whole run
(benchmarks/records/2026-12-06_allocators_2core-vm.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit


@dataclass(frozen=True)
class Transpose:
    """The block's out-edges (CSR by source): source u's edges are ``dst[indptr[u]:indptr[u + 1]]``, and
    ``edge[e]`` is that edge's position among the block's in-edges (for per-edge values such as attention)."""

    indptr: torch.Tensor  # (num_src + 1,) int64
    dst: torch.Tensor  # (num_edges,) the block's id type
    edge: torch.Tensor | None  # (num_edges,) the block's id type; None where not asked for (``edges=False``)

    def to(self, device) -> Transpose:
        return Transpose(self.indptr.to(device), self.dst.to(device),
                         None if self.edge is None else self.edge.to(device))


@njit(cache=True, nogil=True)
def _transpose(indptr, indices, num_src, t_indptr, t_dst, t_edge):
    for e in range(indices.shape[0]):
        t_indptr[indices[e] + 1] += 1
    for u in range(num_src):
        t_indptr[u + 1] += t_indptr[u]
    cursor = t_indptr[:-1].copy()
    for v in range(indptr.shape[0] - 1):
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            at = cursor[u]
            t_dst[at] = v
            if t_edge.shape[0]:
                t_edge[at] = e
            cursor[u] = at + 1


def transpose(indptr: torch.Tensor, indices: torch.Tensor, num_src: int, edges: bool = False) -> Transpose:
    """The out-edges (CSR by source) of the in-edges ``indptr``/``indices`` over ``num_src`` sources; ``edges``:
    with each one's position among the in-edges."""
    if indices.device.type == "cpu":
        ids = indices.numpy()
        t_indptr = np.zeros(num_src + 1, dtype=np.int64)
        t_dst = np.empty(ids.shape[0], dtype=ids.dtype)
        t_edge = np.empty(ids.shape[0] if edges else 0, dtype=ids.dtype)
        _transpose(indptr.numpy(), ids, num_src, t_indptr, t_dst, t_edge)
        return Transpose(torch.from_numpy(t_indptr), torch.from_numpy(t_dst),
                         torch.from_numpy(t_edge) if edges else None)
    return transpose_torch(indptr, indices, num_src, edges)


def transpose_torch(indptr: torch.Tensor, indices: torch.Tensor, num_src: int, edges: bool = False) -> Transpose:
    """``transpose`` with PyTorch's operations (what a GPU runs): a stable sort of the edges by source."""
    order = torch.argsort(indices, stable=True)
    dst = torch.repeat_interleave(torch.arange(indptr.shape[0] - 1, device=indices.device),
                                  indptr[1:] - indptr[:-1], output_size=indices.shape[0])
    t_indptr = torch.zeros(num_src + 1, dtype=torch.int64, device=indices.device)
    torch.cumsum(torch.bincount(indices.long(), minlength=num_src), 0, out=t_indptr[1:])
    return Transpose(t_indptr, dst[order].to(indices.dtype), order.to(indices.dtype) if edges else None)
