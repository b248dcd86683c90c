"""Low-bit Module CUDA kernels: numba-cuda, one warp-wide team of threads per row.

Same layout (``lowbit.format``) and the same scalar arithmetic (``lowbit.scalar``) as the CPU kernels, so
the bytes are identical for the same random numbers. On a GPU the arguments are torch CUDA tensors, passed
without copies through the CUDA array interface, and the kernels run on torch's current stream. Under
``NUMBA_ENABLE_CUDASIM=1`` the same kernels run on the CPU with numpy arrays (for tests).

Block = (32 threads per row) x (8 rows). A row's range is a shared-memory tree reduction over its
32 threads of (order key, value) pairs; then each thread writes every 32nd code byte of the row.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import float32, int32

from sylvie.comm.lowbit.scalar import (
    EXPONENT_FIELD_NONFINITE,
    F32,
    I32,
    dequantize,
    order_key,
    quantize,
    range_exponent_field,
    read_row_grid,
    reciprocal,
    row_key,
    row_params,
    row_place,
    uniform,
    write_row_header,
)
from sylvie.numba_cuda import cuda

THREADS_PER_ROW = 32
ROWS_PER_BLOCK = 8


@cuda.jit
def _encode(x, xbits, bits, dest_offset, dest_start, dest_rows, key, uniforms, out, bad):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = cuda.blockIdx.x * ROWS_PER_BLOCK + ty
    n = x.shape[0]
    d = x.shape[1]
    kmin_s = cuda.shared.array((ROWS_PER_BLOCK, THREADS_PER_ROW), int32)
    kmax_s = cuda.shared.array((ROWS_PER_BLOCK, THREADS_PER_ROW), int32)
    vmin_s = cuda.shared.array((ROWS_PER_BLOCK, THREADS_PER_ROW), float32)
    vmax_s = cuda.shared.array((ROWS_PER_BLOCK, THREADS_PER_ROW), float32)
    # The row's range in order keys (lowbit.scalar.order_key); each key travels with its element's value.
    kmin = I32(0x7FFFFFFF)
    kmax = I32(-0x80000000)
    vmin = F32(0.0)
    vmax = F32(0.0)
    if i < n:
        for j in range(tx, d, THREADS_PER_ROW):
            k = order_key(xbits[i, j])
            if k < kmin:
                kmin = k
                vmin = x[i, j]
            if k > kmax:
                kmax = k
                vmax = x[i, j]
    kmin_s[ty, tx] = kmin
    kmax_s[ty, tx] = kmax
    vmin_s[ty, tx] = vmin
    vmax_s[ty, tx] = vmax
    cuda.syncthreads()
    s = THREADS_PER_ROW // 2
    while s > 0:
        if tx < s:
            if kmin_s[ty, tx + s] < kmin_s[ty, tx]:
                kmin_s[ty, tx] = kmin_s[ty, tx + s]
                vmin_s[ty, tx] = vmin_s[ty, tx + s]
            if kmax_s[ty, tx + s] > kmax_s[ty, tx]:
                kmax_s[ty, tx] = kmax_s[ty, tx + s]
                vmax_s[ty, tx] = vmax_s[ty, tx + s]
        cuda.syncthreads()
        s //= 2
    if i >= n:
        return
    emax = range_exponent_field(kmin_s[ty, 0], kmax_s[ty, 0])
    if emax == EXPONENT_FIELD_NONFINITE:
        if tx == 0:
            bad[i] = 1
        return
    lo = vmin_s[ty, 0]
    hi = vmax_s[ty, 0]
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    rb = (d * bits + 7) // 8
    lo_bits, step_bits, e, grid_min, step = row_params(lo, hi, emax, levels)
    inv = reciprocal(step)
    base, r, m = row_place(dest_offset, dest_start, dest_rows, i)
    if tx == 0:
        write_row_header(out, base, r, m, lo_bits, step_bits, e)
    given = uniforms.shape[0] > 0
    rk = row_key(key, i)
    p = base + 5 * m + r * rb
    for k in range(tx, rb, THREADS_PER_ROW):
        byte = 0
        for t in range(per_byte):
            j = k * per_byte + t
            if j < d:
                u = uniforms[i, j] if given else uniform(rk, j)
                byte |= quantize(x[i, j], grid_min, inv, u, levels) << (t * bits)
        out[p + k] = byte


@cuda.jit
def _decode(buf, bits, dest_offset, dest_start, dest_rows, out):
    tx = cuda.threadIdx.x
    i = cuda.blockIdx.x * ROWS_PER_BLOCK + cuda.threadIdx.y
    n = out.shape[0]
    d = out.shape[1]
    if i >= n:
        return
    base, r, m = row_place(dest_offset, dest_start, dest_rows, i)
    grid_min, step = read_row_grid(buf, base, r, m)
    levels = (1 << bits) - 1
    rb = (d * bits + 7) // 8
    p = base + 5 * m + r * rb
    for j in range(tx, d, THREADS_PER_ROW):
        q = (np.int64(buf[p + ((j * bits) >> 3)]) >> ((j * bits) & 7)) & levels
        out[i, j] = dequantize(q, grid_min, step)


def _launch(kernel, n: int, like, *args) -> None:
    grid = (n + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK
    block = (THREADS_PER_ROW, ROWS_PER_BLOCK)
    if isinstance(like, np.ndarray):  # the simulator
        kernel[grid, block](*args)
        return
    import torch

    stream = cuda.external_stream(torch.cuda.current_stream(like.device).cuda_stream)
    kernel[grid, block, stream](*args)


def _bits_view(x):
    if isinstance(x, np.ndarray):
        return x.view(np.int32)
    import torch

    return x.view(torch.int32)


@lru_cache(maxsize=64)
def _cached_device_tables(tables_key, device):
    import torch

    return tuple(torch.tensor(t, dtype=torch.int64, device=device) for t in tables_key)


def _device_tables(tables, like):
    if isinstance(like, np.ndarray):
        return tables
    return _cached_device_tables(tuple(tuple(int(v) for v in t) for t in tables), str(like.device))


def encode_rows_cuda(x, bits, dest_offset, dest_start, dest_rows, key, uniforms, out, bad):
    """Quantize float32 ``x`` (n, d) into ``out`` (uint8); ``bad[i] = 1`` for rows holding NaN or inf."""
    tables = _device_tables((dest_offset, dest_start, dest_rows), x)
    _launch(_encode, x.shape[0], x, x, _bits_view(x), bits, *tables, key, uniforms, out, bad)


def decode_rows_cuda(buf, bits, dest_offset, dest_start, dest_rows, out):
    """Decode every row of ``buf`` (uint8) into float32 ``out`` (n, d)."""
    tables = _device_tables((dest_offset, dest_start, dest_rows), out)
    _launch(_decode, out.shape[0], out, buf, bits, *tables, out)
