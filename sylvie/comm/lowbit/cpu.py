"""Low-bit Module CPU kernels: numba, rows in parallel chunks (``prange``), one kernel pair per bit width.

Layout in ``lowbit.format``, arithmetic in ``lowbit.scalar`` (shared with the CUDA kernels: the same bytes for the
same random numbers). The kernels release the GIL, so the pipelined exchange's threads and the model run beside
them. Each row is read once; the bit width is a compile-time constant, so packing loops unroll.
"""
from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange

from sylvie.comm.lowbit import scalar as lowbit_scalar
from sylvie.comm.lowbit.scalar import (
    EXPONENT_FIELD_NONFINITE,
    F32,
    GOLDEN,
    I32,
    I64,
    counter,
    dequantize,
    order_key,
    quantize,
    range_exponent_field,
    read_row_grid,
    reciprocal,
    row_key,
    row_params,
    row_place,
    uniform_at,
    write_row_header,
)

CHUNK_ROWS = 32
PARALLEL_MIN_ELEMENTS = 1 << 16
U64 = np.uint64

# numba's on-disk cache keys a kernel on its own code and closure variables, not on the functions it
# inlines: closing over a digest of lowbit/scalar.py recompiles the kernels whenever that file changes.
_SCALAR_DIGEST = hashlib.sha256(Path(lowbit_scalar.__file__).read_bytes()).hexdigest()


_WORD = {1: np.uint64, 2: np.uint32, 4: np.uint16, 8: np.uint8}  # the codes of one output byte, as bytes


def _compile(bits: int, parallel: bool, digest: str):
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    word = _WORD[bits]

    @njit(parallel=parallel, cache=True, nogil=True)
    def encode_rows(x, xbits, dest_offset, dest_start, dest_rows, key, uniforms, out, bad):
        assert len(digest) > 0
        n, d = x.shape
        rb = (d * bits + 7) // 8
        given = uniforms.shape[0] > 0
        for c in prange((n + CHUNK_ROWS - 1) // CHUNK_ROWS):
            # codes[j] holds element j's code in the low bits of byte j; the per_byte codes of one output byte,
            # read as one little-endian integer, are folded onto its low byte by shifts of 8 - bits, 2 (8 - bits)
            # and 4 (8 - bits). (Shifting each code into place while quantizing halves the loop's speed.)
            codes = np.zeros(rb * per_byte, np.uint8)
            words = codes.view(word)
            for i in range(c * CHUNK_ROWS, min(n, (c + 1) * CHUNK_ROWS)):
                kmin = I32(0x7FFFFFFF)  # the row's range in order keys, one vectorized pass
                kmax = I32(-0x80000000)
                for j in range(d):
                    k = order_key(xbits[i, j])
                    kmin = min(kmin, k)
                    kmax = max(kmax, k)
                emax = range_exponent_field(kmin, kmax)
                if emax == EXPONENT_FIELD_NONFINITE:
                    bad[i] = 1
                    continue
                lo = I32(order_key(kmin)).view(F32)  # min and max back from their order keys
                hi = I32(order_key(kmax)).view(F32)
                lo_bits, step_bits, e, grid_min, step = row_params(lo, hi, emax, levels)
                inv = reciprocal(step)
                base, r, m = row_place(dest_offset, dest_start, dest_rows, i)
                write_row_header(out, base, r, m, lo_bits, step_bits, e)
                p = base + 5 * m + r * rb
                rk = row_key(key, i)
                if given:
                    for j in range(d):
                        q = quantize(x[i, j], grid_min, inv, uniforms[i, j], levels)
                        codes[j] = np.uint8(q)
                else:
                    ctr = counter(rk, 0)  # uniform(rk, j), with the counter stepped rather than multiplied
                    for j in range(d):
                        q = quantize(x[i, j], grid_min, inv, uniform_at(ctr), levels)
                        codes[j] = np.uint8(q)
                        ctr = I32(I64(ctr) + I64(GOLDEN))
                dst = out[p:p + rb]  # a view: its indices start at 0, so LLVM vectorizes the stores
                for k in range(rb):
                    w = words[k]
                    if per_byte >= 2:
                        w |= w >> word(8 - bits)
                    if per_byte >= 4:
                        w |= w >> word(2 * (8 - bits))
                    if per_byte >= 8:
                        w |= w >> word(4 * (8 - bits))
                    dst[k] = np.uint8(w & word(255))

    @njit(parallel=parallel, cache=True, nogil=True)
    def decode_rows(buf, dest_offset, dest_start, dest_rows, out):
        assert len(digest) > 0
        n, d = out.shape
        rb = (d * bits + 7) // 8
        for c in prange((n + CHUNK_ROWS - 1) // CHUNK_ROWS):
            codes = np.zeros(rb * per_byte, np.float32)
            # 1 bit: each byte's 8 codes spread onto the 8 bytes of a word at once (a multiply and masks), as the
            # per-code shifts do not vectorize at 8 codes a byte (far slower than at 2, 4 or 8 bits)
            flags = np.zeros(rb * 8, np.uint8)
            spread = flags.view(np.uint64)
            for i in range(c * CHUNK_ROWS, min(n, (c + 1) * CHUNK_ROWS)):
                base, r, m = row_place(dest_offset, dest_start, dest_rows, i)
                grid_min, step = read_row_grid(buf, base, r, m)
                p = base + 5 * m + r * rb
                src = buf[p:p + rb]
                if bits == 1:
                    for k in range(rb):
                        # byte t of the word keeps bit t of the code byte, then becomes 1 if that bit was set
                        w = (U64(src[k]) * U64(0x0101010101010101)) & U64(0x8040201008040201)
                        spread[k] = ((w + U64(0x7F7F7F7F7F7F7F7F)) >> U64(7)) & U64(0x0101010101010101)
                    for j in range(d):
                        out[i, j] = dequantize(flags[j], grid_min, step)
                else:
                    for k in range(rb):
                        byte = src[k]
                        for t in range(per_byte):
                            codes[k * per_byte + t] = F32((byte >> (t * bits)) & levels)
                    for j in range(d):
                        out[i, j] = dequantize(codes[j], grid_min, step)

    return encode_rows, decode_rows


@cache
def kernels(bits: int, parallel: bool = True):
    """(encode_rows, decode_rows) for ``bits`` in {1, 2, 4, 8}; compiled on first use, cached on disk.
    Serial variants serve small messages, where waking numba's thread pool costs more than it saves."""
    # The cache key holds the kernels' closure variables, not the decorator's options: the digest names both.
    return _compile(bits, parallel, f"{_SCALAR_DIGEST}-{'parallel' if parallel else 'serial'}")


def _parallel(elements: int) -> bool:
    """Whether a message is worth numba's thread pool: large, and more than one thread to run it (a parallel
    launch is costly on a one-thread rank whose process started the pool with more, e.g. numba.set_num_threads)."""
    return elements >= PARALLEL_MIN_ELEMENTS and numba.get_num_threads() > 1


def encode_rows(x, bits, dest_offset, dest_start, dest_rows, key, uniforms, out, bad):
    """Quantize float32 ``x`` (n, d) into ``out`` (uint8, zeroed); ``bad[i] = 1`` for rows holding NaN or
    inf (their bytes are left untouched). ``uniforms`` (n, d) replaces the counter-based RNG unless empty."""
    encode_kernel = kernels(bits, _parallel(x.size))[0]
    encode_kernel(x, x.view(np.int32), dest_offset, dest_start, dest_rows, key, uniforms, out, bad)


def decode_rows(buf, bits, dest_offset, dest_start, dest_rows, out):
    """Decode every row of ``buf`` (uint8) into float32 ``out`` (n, d)."""
    kernels(bits, _parallel(out.size))[1](buf, dest_offset, dest_start, dest_rows, out)
