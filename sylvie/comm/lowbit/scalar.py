"""Scalar arithmetic of the Low-bit Module, one source for the CPU (numba) and CUDA (numba-cuda) kernels.

Every function is ``register_jitable``. All values are float32 with explicit casts and no product is added to before
it is exact or clamped, so the CPU, GPU and simulator round identically whether or not the compiler fuses
multiply-adds. Random numbers are a hash of (key, row, column): any kernel or thread layout draws the same.
"""
from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

F32 = np.float32
I32 = np.int32
I64 = np.int64
TWO_POW_M24 = np.float32(1.0 / 16777216.0)
EXPONENT_MIN, EXPONENT_MAX = -127, 127  # int8 range of the per-row exponent
FP16_HEADROOM = 14  # a row's largest magnitude maps into [2**13, 2**14): its step stays below fp16's max
GOLDEN = -1640531527  # 0x9E3779B9 as int32
POW2 = np.array([2.0 ** e for e in range(-149, 128)], dtype=np.float32)
EXPONENT_FIELD_NONFINITE = 255


@register_jitable
def hash32(h):
    """A 32-bit integer hash (lowbias32, Wellons) on int32 bit patterns.

    Products are taken in int64 and truncated, so numba, numba-cuda and numpy (simulator) wrap alike, and
    LLVM narrows them to 32-bit vector multiplies; shifts are logical through their masks.
    """
    h = I32(h)
    h = I32(h ^ ((h >> 16) & 0xFFFF))
    h = I32(I64(h) * I64(0x7FEB352D))
    h = I32(h ^ ((h >> 15) & 0x1FFFF))
    h = I32(I64(h) * I64(-2073254261))  # 0x846CA68B
    h = I32(h ^ ((h >> 16) & 0xFFFF))
    return h


@register_jitable
def row_key(key, row):
    """Per-row stream key from the message key (int32) and the row's index."""
    return hash32(I32(key) ^ hash32(I32(I64(row) & 0xFFFFFFFF)))


@register_jitable
def counter(rkey, col):
    """The RNG counter of element ``col`` of the row with key ``rkey``: rkey + col * golden ratio (int32,
    wrapping). A loop over a row can step it by ``GOLDEN`` instead of multiplying."""
    return I32(I64(rkey) + I64(I32(I64(col) * I64(GOLDEN))))


@register_jitable
def uniform_at(ctr):
    """U[0, 1) float32 on a 2**-24 grid for the RNG counter ``ctr``."""
    return F32((hash32(ctr) >> 8) & 0xFFFFFF) * TWO_POW_M24


@register_jitable
def uniform(rkey, col):
    """U[0, 1) float32 on a 2**-24 grid for element ``col`` of the row with key ``rkey``."""
    return uniform_at(counter(rkey, col))


@register_jitable
def pow2(e):
    """2**e as float32, e in [-149, 127] (exact; from a table)."""
    return POW2[e + 149]


@register_jitable
def fp16_directed(v, up):
    """The fp16 number next to float32 ``v`` (|v| < 65504) towards +inf (``up``) or -inf.

    Returns (bits, value): the fp16 bit pattern and the same number as float32. Integer work on the float32
    bit pattern, branch free: it runs twice per row, where a libm frexp or a loop costs more than the row.
    """
    neg = v < F32(0.0)
    b = I64(F32(v).view(I32)) & 0x7FFFFFFF  # |v|
    field = b >> 23
    sig = (b & 0x7FFFFF) | (I64(0x800000) if field > 0 else I64(0))  # |v| = sig 2**(max(field, 1) - 150)
    normal = field >= 113  # |v| >= 2**-14: an fp16 normal; below, fp16's subnormals (quantum 2**-24)
    shift = I64(13) if normal else min(126 - max(field, I64(1)), I64(31))  # float32 quanta to fp16 quanta
    kk = sig >> shift
    # fp16 bits: exponent field (field - 112) over the 10 kept significand bits, or the subnormal count
    h = (((field - 112) << 10) + kk - 1024) if normal else kk
    # rounding the magnitude up adds one quantum; a carry out of the significand bumps the exponent
    h += I64(1) if (up != neg) and (sig & ((I64(1) << shift) - 1)) != 0 else I64(0)
    value = fp16_value(h)
    return h | (0x8000 if neg else 0), -value if neg else value


@register_jitable
def fp16_value(bits):
    """float32 value of an fp16 bit pattern (finite)."""
    biased = (bits >> 10) & 31
    mant = bits & 1023
    normal = 1 if biased > 0 else 0
    value = F32(mant + 1024 * normal) * pow2(max(biased, 1) - 25)
    sign = F32(-1.0) if bits & 0x8000 else F32(1.0)
    return sign * value


@register_jitable
def row_exponent(biased_max):
    """The row's power-of-two exponent e from the largest biased float32 exponent field of its elements:
    the largest magnitude maps into [2**13, 2**14) (tiny rows clamp at 2**-127)."""
    e = np.int64(biased_max) - (127 + FP16_HEADROOM - 1)
    if e < EXPONENT_MIN:
        return EXPONENT_MIN
    if e > EXPONENT_MAX:
        return EXPONENT_MAX
    return e


@register_jitable
def row_params(lo, hi, biased_max, levels):
    """Quantization grid of a row with minimum ``lo``, maximum ``hi`` and largest biased exponent field
    ``biased_max``, at ``levels`` = 2**b - 1.

    The transmitted minimum is rounded down and the step up, so the grid covers [lo, hi] and stochastic
    rounding stays unbiased. Returns (min fp16 bits, step fp16 bits, e, grid minimum, grid step), the last two
    as float32 in the rows' own units.
    """
    e = row_exponent(biased_max)
    unit, inv_unit = pow2(e), pow2(-e)  # scaling by either is exact
    lo_bits, lo16 = fp16_directed(lo * inv_unit, False)
    step_bits, step16 = fp16_directed((hi * inv_unit - lo16) / F32(levels), True)
    return lo_bits, step_bits, e, lo16 * unit, step16 * unit


@register_jitable
def reciprocal(step):
    """1 / step, correctly rounded; 0 for a constant row (step 0: every code is 0)."""
    return F32(1.0) / step if step > F32(0.0) else F32(0.0)


@register_jitable
def quantize(x, grid_min, inv, u, levels):
    """Stochastic rounding of ``x`` to the grid: floor(t + u) with t = (x - grid_min) / step, i.e. the code
    (int32 in [0, levels]) of the upper neighbour with probability = the remainder of t. ``inv`` =
    reciprocal(step).

    t >= 0 exactly (x >= grid_min), so truncation is floor. The sum t + u is rounded to float32, which
    moves the threshold by at most half an ulp of t (2**-17 of a step at 8 bits, less below). The product
    is clamped before u is added, so no compiler can fuse the two into an FMA.
    """
    t = min((x - grid_min) * inv, F32(levels))
    return min(I32(t + u), levels)


@register_jitable
def dequantize(q, grid_min, step):
    """Decoded value; ``q * step`` is exact (at most 8 + 11 significant bits), so fused or not it rounds once."""
    return grid_min + F32(q) * step


@register_jitable
def destination(dest_start, row):
    """Index of the destination whose rows include ``row``: the last one starting at or before it (those
    before it with the same start are empty)."""
    lo = 0
    hi = dest_start.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if dest_start[mid] <= row:
            lo = mid
        else:
            hi = mid - 1
    return lo


@register_jitable
def order_key(b):
    """int32 order key of a float32 bit pattern (and back: the map is its own inverse). Flipping the low 31
    bits of negative floats makes int32 order equal float order; NaN and inf order beyond every finite
    value (float min/max reductions do not vectorize in numba; integer ones do)."""
    return I32(b ^ ((b >> 31) & 0x7FFFFFFF))


@register_jitable
def range_exponent_field(kmin, kmax):
    """Largest biased exponent field of a row, from the order keys of its minimum and maximum: 255 exactly
    when the row holds NaN or inf (they end up as the minimum or the maximum)."""
    return max((order_key(kmin) >> 23) & 255, (order_key(kmax) >> 23) & 255)


@register_jitable
def row_place(dest_offset, dest_start, dest_rows, row):
    """(byte offset of the row's destination buffer, row's index in it, rows in that buffer)."""
    dest = destination(dest_start, row)
    return dest_offset[dest], row - dest_start[dest], dest_rows[dest]


@register_jitable
def write_row_header(out, base, r, m, min_bits, step_bits, e):
    """Row r's fp16 minimum, fp16 step and int8 exponent into the buffer of m rows at ``base``."""
    out[base + 2 * r] = min_bits & 255
    out[base + 2 * r + 1] = min_bits >> 8
    out[base + 2 * m + 2 * r] = step_bits & 255
    out[base + 2 * m + 2 * r + 1] = step_bits >> 8
    out[base + 4 * m + r] = e & 255


@register_jitable
def read_row_grid(buf, base, r, m):
    """(grid minimum, grid step) of row r as float32, from the header written by write_row_header."""
    min_bits = np.int64(buf[base + 2 * r]) | (np.int64(buf[base + 2 * r + 1]) << 8)
    step_bits = np.int64(buf[base + 2 * m + 2 * r]) | (np.int64(buf[base + 2 * m + 2 * r + 1]) << 8)
    e = np.int64(buf[base + 4 * m + r])
    if e >= 128:
        e -= 256
    unit = pow2(e)
    return fp16_value(min_bits) * unit, fp16_value(step_bits) * unit
