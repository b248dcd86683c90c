"""The zero-copy gather kernel (PyTorch-Direct): GPU threads read feature rows straight from page-locked host
memory mapped into the GPU's address space, ``out[i] = table[idx[i]]``.

One warp per row (grid-stride over rows), each lane one element at a time, 32 consecutive elements per warp step.
PCIe serves reads in 128-byte requests, so a warp's step should cover one aligned 128-byte segment. Rows whose
size is not a multiple of 128 bytes (ogbn-products: 100 fp32 = 400 B) start anywhere in a segment; read naively
(``aligned=False``), each warp step then straddles two segments. PyTorch-Direct shifts each lane's element within
the row so source and destination addresses agree mod 128 (the misalignment moves to the writes into GPU memory);
DGL starts each row's reads at the 128-byte boundary at or below the row's start and leaves the lanes before the
row idle. We take DGL's way: every write stays at its natural place (a plain ``out[i, j]``), the idle lanes cost at
most one partial step per row, and it needs no modular arithmetic per element. ``base_shift`` is the table's own
misalignment (its address mod 128, in elements), so the segment arithmetic holds for any table base.

A leaf module. On a GPU the arguments are device arrays (a mapped host table through the CUDA array interface,
indices and output on the device), launched on torch's current stream; under ``NUMBA_ENABLE_CUDASIM=1`` the same
kernels run on numpy arrays (for tests; the simulator has no mapped memory).
"""
from __future__ import annotations

import numpy as np

from sylvie.numba_cuda import cuda

WARP = 32
SEGMENT_BYTES = 128
WARPS_PER_BLOCK = 4


@cuda.jit
def _gather_aligned(table, idx, out, base_shift, segment):
    """``table``: the rows flattened (1-D); ``segment``: elements per 128 bytes."""
    lane = cuda.threadIdx.x % WARP
    warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // WARP
    warps = cuda.gridDim.x * cuda.blockDim.x // WARP
    width = out.shape[1]
    for i in range(warp, idx.shape[0], warps):
        src = idx[i] * width
        start = src - (src + base_shift) % segment  # the segment boundary at or below the row's first element
        for e in range(start + lane, src + width, WARP):
            if e >= src:
                out[i, e - src] = table[e]


@cuda.jit
def _gather_unaligned(table, idx, out, base_shift, segment):
    lane = cuda.threadIdx.x % WARP
    warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // WARP
    warps = cuda.gridDim.x * cuda.blockDim.x // WARP
    width = out.shape[1]
    for i in range(warp, idx.shape[0], warps):
        src = idx[i] * width
        for j in range(lane, width, WARP):
            out[i, j] = table[src + j]


def _address(array) -> int:
    cai = getattr(array, "__cuda_array_interface__", None)
    return int(cai["data"][0]) if cai is not None else int(array.ctypes.data)


def launch_gather(table_flat, idx, out, aligned: bool = True, stream=0, max_blocks: int = 65_535) -> None:
    """``out[i, :] = table_flat[idx[i] * width : (idx[i] + 1) * width]`` with ``width = out.shape[1]``.
    ``table_flat`` is the table's rows back to back (1-D); the caller has checked the indices."""
    n = idx.shape[0]
    if n == 0:
        return
    itemsize = np.dtype(table_flat.dtype).itemsize
    segment = SEGMENT_BYTES // itemsize
    base_shift = (_address(table_flat) % SEGMENT_BYTES) // itemsize
    threads = WARP * WARPS_PER_BLOCK
    blocks = min(max_blocks, -(-n // WARPS_PER_BLOCK))
    kernel = _gather_aligned if aligned else _gather_unaligned
    kernel[blocks, threads, stream](table_flat, idx, out, base_shift, segment)
