"""Byte layout of Low-bit Module messages: one self-describing buffer per destination.

Per row: an fp16 minimum and step and an int8 power-of-two exponent (which keeps fp16 in range for tiny gradients),
then the packed codes; a row decodes to ``(min + q * step) * 2**e``. Buffers are padded to 8 bytes; ``bits == 32``
is the raw float32 rows. Layout: below.
"""
# For n rows of D features at b bits (R = ceil(D * b / 8) code bytes per row), one destination's buffer:
#
#     [0,    2n)        fp16 row minimum, little-endian, in units of 2**e
#     [2n,   4n)        fp16 row step (the scale), in units of 2**e
#     [4n,   5n)        int8 e: the row's power-of-two exponent
#     [5n,   5n + nR)   codes, row after row; element j sits at bit (j*b) % 8 of byte (j*b) // 8, low bits first
#     zero padding to a multiple of 8 bytes (so the next destination's buffer stays aligned)
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

BITS = (1, 2, 4, 8)
FULL_PRECISION = 32
HEADER_BYTES_PER_ROW = 5  # fp16 min + fp16 step + int8 exponent
ALIGN = 8


def check_bits(bits: int) -> int:
    if bits not in BITS + (FULL_PRECISION,):
        raise ValueError(f"bits must be one of {', '.join(map(str, BITS + (FULL_PRECISION,)))}; got {bits}")
    return int(bits)


def row_bytes(dim: int, bits: int) -> int:
    """Code bytes per row."""
    return (dim * bits + 7) // 8


def buffer_bytes(rows: int, dim: int, bits: int) -> int:
    """Size in bytes of one destination's buffer holding ``rows`` rows."""
    if bits == FULL_PRECISION:
        return rows * dim * 4
    if rows == 0:
        return 0
    raw = rows * (HEADER_BYTES_PER_ROW + row_bytes(dim, bits))
    return -(-raw // ALIGN) * ALIGN


@dataclass(frozen=True)
class Layout:
    """Where each destination's rows and bytes sit in a concatenated message."""

    counts: tuple[int, ...]  # rows per destination
    dim: int
    bits: int
    sizes: tuple[int, ...] = field(init=False)  # bytes per destination
    offsets: tuple[int, ...] = field(init=False)  # byte offset of each destination's buffer

    def __post_init__(self):
        check_bits(self.bits)
        if self.dim < 1 and sum(self.counts):
            raise ValueError(f"rows need at least one feature; got dim={self.dim}")
        sizes = tuple(buffer_bytes(int(c), self.dim, self.bits) for c in self.counts)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "offsets", tuple(int(o) for o in np.concatenate([[0], np.cumsum(sizes)[:-1]]))
                           if sizes else ())

    @classmethod
    def of(cls, counts, dim: int, bits: int) -> Layout:
        """The layout (one object per distinct arguments: a halo exchange sends the same counts every epoch, and
        its kernel tables are computed once)."""
        return _layout(tuple(int(c) for c in counts), int(dim), int(bits))

    @property
    def num_rows(self) -> int:
        return sum(self.counts)

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)

    @property
    def used(self) -> tuple[int, ...]:
        """Bytes per destination before the alignment padding."""
        if self.bits == FULL_PRECISION:
            return self.sizes
        return tuple(c * (HEADER_BYTES_PER_ROW + self.row_bytes) for c in self.counts)

    @property
    def row_bytes(self) -> int:
        return row_bytes(self.dim, self.bits)

    @cached_property
    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Kernel tables, per destination: byte offset of its buffer, first row, row count (int64; a layout is
        shared, and kernels only read them)."""
        counts = np.asarray(self.counts, dtype=np.int64)
        dest_start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts
        return np.asarray(self.offsets, dtype=np.int64), dest_start, counts

    @cached_property
    def padding(self) -> tuple[tuple[int, int], ...]:
        """(start, stop) of each destination's alignment padding, where it has any."""
        return tuple((o + u, o + s) for o, u, s in zip(self.offsets, self.used, self.sizes) if u < s)

    def split(self, buffer):
        """Per-destination views of a concatenated buffer (numpy array or torch tensor)."""
        return [buffer[o:o + s] for o, s in zip(self.offsets, self.sizes)]


@lru_cache(maxsize=1024)
def _layout(counts: tuple[int, ...], dim: int, bits: int) -> Layout:
    return Layout(counts, dim, bits)
