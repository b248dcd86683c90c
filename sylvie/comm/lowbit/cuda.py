"""Low-bit Module CUDA kernels: numba-cuda, a warp per row.

Same layout (``lowbit.format``) and scalar arithmetic (``lowbit.scalar``) as the CPU kernels, so the bytes are
identical for the same random numbers. Torch CUDA tensors pass without copies (CUDA array interface), on torch's
current stream. Encode: a ``shfl_xor_sync`` butterfly gives every lane the row's range (no shared memory), codes are
packed by ``ballot_sync`` (1 bit) or shuffles (2-8 bits). Loops end on warp votes, which keeps them from unrolling.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

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

THREADS_PER_ROW = 32  # a warp per row
ROWS_PER_BLOCK = 8
FULL_MASK = 0xFFFFFFFF


def _compile_encode(bits: int):
    """The encode kernel for ``bits`` (a constant in it: with the bit width a run-time value it held 40 registers)."""
    levels = (1 << bits) - 1
    per_byte = 8 // bits

    def _encode(x, xbits, dest_offset, dest_start, dest_rows, key, uniforms, out, bad):
        lane = cuda.threadIdx.x
        i = cuda.blockIdx.x * ROWS_PER_BLOCK + cuda.threadIdx.y
        n = x.shape[0]
        d = x.shape[1]
        if i >= n:  # the whole warp: every warp intrinsic below is called by all 32 lanes
            return
        # The row's range in order keys (lowbit.scalar.order_key): each lane's, then a butterfly over the warp.
        kmin = I32(0x7FFFFFFF)
        kmax = I32(-0x80000000)
        for j in range(lane, d, THREADS_PER_ROW):
            k = order_key(xbits[i, j])
            kmin = min(kmin, k)
            kmax = max(kmax, k)
        for apart in (16, 8, 4, 2, 1):
            kmin = min(kmin, cuda.shfl_xor_sync(FULL_MASK, kmin, apart))
            kmax = max(kmax, cuda.shfl_xor_sync(FULL_MASK, kmax, apart))
        emax = range_exponent_field(kmin, kmax)
        if emax == EXPONENT_FIELD_NONFINITE:
            if lane == 0:
                bad[i] = 1
            return
        lo = I32(order_key(kmin)).view(F32)  # the minimum and the maximum back from their order keys
        hi = I32(order_key(kmax)).view(F32)
        rb = (d * bits + 7) // 8
        lo_bits, step_bits, e, grid_min, step = row_params(lo, hi, emax, levels)
        inv = reciprocal(step)
        base, r, m = row_place(dest_offset, dest_start, dest_rows, i)
        if lane == 0:
            write_row_header(out, base, r, m, lo_bits, step_bits, e)
        given = uniforms.shape[0] > 0
        rk = row_key(key, i)
        p = base + 5 * m + r * rb  # any byte: rows are 5 + rb bytes apart, so code bytes are written one by one
        # Lane t quantizes element j = 32s + t at step s. Each loop ends on a warp vote rather than a count: the
        # compiler does not unroll a loop whose trip count it cannot compute (unrolled, the kernel held 40 registers).
        j = lane
        if bits == 1:
            # The step's ballot is a 32-bit word whose bit t is lane t's code: code bytes 4s..4s+3, little-endian
            # (element j at bit j % 8 of byte j // 8); lanes 0-3 write one byte each.
            while True:
                q = 0
                if j < d:
                    u = uniforms[i, j] if given else uniform(rk, j)
                    q = quantize(x[i, j], grid_min, inv, u, levels)
                word = cuda.ballot_sync(FULL_MASK, q != 0)
                k = (j - lane) // 8 + lane
                if lane < 4 and k < rb:
                    out[p + k] = (word >> (lane * 8)) & 255
                j += THREADS_PER_ROW
                if not cuda.any_sync(FULL_MASK, j < d):
                    break
        else:
            # 2, 4, 8 bits: the per_byte lanes of one byte OR their shifted codes together by shuffles, and the first
            # of them writes it (a step's bytes are consecutive).
            while True:
                q = I32(0)
                if j < d:
                    u = uniforms[i, j] if given else uniform(rk, j)
                    q = I32(quantize(x[i, j], grid_min, inv, u, levels) << ((lane % per_byte) * bits))
                apart = 1
                while apart < per_byte:
                    q |= cuda.shfl_xor_sync(FULL_MASK, q, apart)
                    apart *= 2
                if j < d and lane % per_byte == 0:
                    out[p + j // per_byte] = q
                j += THREADS_PER_ROW
                if not cuda.any_sync(FULL_MASK, j < d):
                    break

    return cuda.jit(_encode)


_ENCODE = {}


def encode_kernel(bits: int):
    """The encode kernel for ``bits`` in {1, 2, 4, 8} (numba-cuda compiles it at its first launch)."""
    if bits not in _ENCODE:
        _ENCODE[bits] = _compile_encode(bits)
    return _ENCODE[bits]


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
    _launch(encode_kernel(bits), x.shape[0], x, x, _bits_view(x), *tables, key, uniforms, out, bad)


def decode_rows_cuda(buf, bits, dest_offset, dest_start, dest_rows, out):
    """Decode every row of ``buf`` (uint8) into float32 ``out`` (n, d)."""
    tables = _device_tables((dest_offset, dest_start, dest_rows), out)
    _launch(_decode, out.shape[0], out, buf, bits, *tables, out)
