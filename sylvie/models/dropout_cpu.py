"""The CPU kernel of ``Dropout``: which elements are dropped, drawn and applied in one pass (numba). The numbers are
counter based, a function of (key, element) alone, so the backward draws the same mask again without storing it,
whatever the chunking or the number of threads, and nothing is drawn one number at a time as PyTorch's CPU generator
does. The kernels release the GIL; numba's thread count is ``NUMBA_NUM_THREADS``, which ``sylvie train`` sets from
``OMP_NUM_THREADS``.
"""
# Element i of a tensor of ``n`` (flat index) is dropped when the top 24 bits of ``hash32(key + i * golden)`` are below
# ``ceil(p * 2**24)``: uniforms on a 2**-24 grid, as ``torch.rand`` draws them for float32, so an element is dropped
# with probability p (to 2**-24).
from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

I32, I64 = np.int32, np.int64
GOLDEN = -1640531527  # 0x9E3779B9 as int32
BITS = 24
CHUNK = 1 << 16  # elements per parallel task
SEGMENT = 1 << 31  # elements per key: the counter of a key never wraps
PARALLEL_MIN_ELEMENTS = 1 << 18


@njit(cache=True, inline="always")
def _hash32(h):
    """lowbias32 (Wellons) on int32 bit patterns; products in int64, truncated, so LLVM narrows them to 32-bit
    vector multiplies; shifts are logical through their masks."""
    h = I32(h)
    h = I32(h ^ ((h >> 16) & 0xFFFF))
    h = I32(I64(h) * I64(0x7FEB352D))
    h = I32(h ^ ((h >> 15) & 0x1FFFF))
    h = I32(I64(h) * I64(-2073254261))  # 0x846CA68B
    h = I32(h ^ ((h >> 16) & 0xFFFF))
    return h


@njit(cache=True, inline="always")
def _kept(key, threshold, k):
    """Whether element ``k`` of the stream ``key`` is kept: the top 24 bits of its hash at or above the threshold."""
    return ((_hash32(I32(I64(key) + I64(I32(I64(k) * I64(GOLDEN))))) >> 8) & 0xFFFFFF) >= threshold


@njit(cache=True, inline="always")
def _apply(x, out, key, threshold, scale, zero, offset, start, stop):
    for i in range(start, stop):
        v = x[i] * scale
        out[i] = v if _kept(key, threshold, offset + i) else zero


@njit(cache=True, inline="always")
def _apply_in_place(x, key, threshold, scale, zero, offset, start, stop):
    # a loop of its own: with ``out`` the same array as ``x``, LLVM's runtime overlap check sends _apply's
    # vectorized loop to its much slower scalar fallback
    for i in range(start, stop):
        v = x[i] * scale
        x[i] = v if _kept(key, threshold, offset + i) else zero


@njit(cache=True, nogil=True)
def _drop_serial(x, out, key, threshold, scale, zero, offset):
    _apply(x, out, key, threshold, scale, zero, offset, 0, x.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def _drop_parallel(x, out, key, threshold, scale, zero, offset):
    n = x.shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        _apply(x, out, key, threshold, scale, zero, offset, c * CHUNK, min(n, (c + 1) * CHUNK))


@njit(cache=True, nogil=True)
def _drop_in_place_serial(x, key, threshold, scale, zero, offset):
    _apply_in_place(x, key, threshold, scale, zero, offset, 0, x.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def _drop_in_place_parallel(x, key, threshold, scale, zero, offset):
    n = x.shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        _apply_in_place(x, key, threshold, scale, zero, offset, c * CHUNK, min(n, (c + 1) * CHUNK))


def _hash32_py(h: int) -> int:
    """``_hash32`` on Python integers (unsigned 32-bit)."""
    h &= 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x7FEB352D) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x846CA68B) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _key(seed: int, segment: int) -> int:
    """A 32-bit key (as a signed int32 value) from the 62-bit seed and the segment of 2**31 elements."""
    k = 0x5EED
    for part in (seed, seed >> 32, segment):
        k = _hash32_py(k ^ _hash32_py(part))
    return k - (1 << 32) if k >= 1 << 31 else k


def threshold(p: float) -> int:
    """Uniforms on the 2**-24 grid below this (as integers) are dropped: the ceiling of p * 2**24 of them."""
    return math.ceil(p * (1 << BITS))


def drop(x: np.ndarray, out: np.ndarray, p: float, seed: int, offset: int = 0) -> None:
    """``out = x * mask / (1 - p)``, flat contiguous arrays of one float dtype (``out`` is ``x`` or does not overlap
    it), with the mask
    of elements ``offset`` to ``offset + len(x)`` of the stream ``seed``: a tensor dropped out in pieces gets the
    mask it gets whole."""
    scale, zero = x.dtype.type(1.0 / (1.0 - p)), x.dtype.type(0.0)
    thr = threshold(p)
    threads = numba.get_num_threads()
    in_place = x.ctypes.data == out.ctypes.data
    start = 0
    while start < x.shape[0]:
        segment, at = divmod(offset + start, SEGMENT)
        stop = min(x.shape[0], start + SEGMENT - at)  # to the end of the key's segment
        xs, os_ = x[start:stop], out[start:stop]
        key = _key(seed, segment)
        # numba's parallel launch has a fixed cost even on one thread (a rank's share of a small machine)
        parallel = threads > 1 and xs.shape[0] >= PARALLEL_MIN_ELEMENTS
        if in_place:
            (_drop_in_place_parallel if parallel else _drop_in_place_serial)(xs, key, thr, scale, zero, at)
        else:
            (_drop_parallel if parallel else _drop_serial)(xs, os_, key, thr, scale, zero, at)
        start = stop
