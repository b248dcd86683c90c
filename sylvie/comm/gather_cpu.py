"""Row gather on the CPU, ``out[i] = table[idx[i]]``, parallel over rows (numba): the feature store's host tier
without a GPU, an owner's rows for the wire, and the zero-copy GPU gather's reference. With ``at`` the rows land at
``out[at[i]]``. A leaf module; ``gather_rows`` checks its input, the kernel trusts it.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@njit(parallel=True, nogil=True, cache=True)
def _gather(table, idx, out):
    """Copies the rows; returns how many indices were out of range (their rows are left as they were)."""
    rows, width = table.shape
    bad = 0
    for i in prange(idx.shape[0]):
        row = idx[i]
        if row < 0 or row >= rows:
            bad += 1
            continue
        for j in range(width):  # an explicit loop: faster here than a slice assignment (benchmarks/gather.py)
            out[i, j] = table[row, j]
    return bad


@njit(parallel=True, nogil=True, cache=True)
def _gather_at(table, idx, out, at):
    """``out[at[i]] = table[idx[i]]``; returns how many indices were out of range (of the table or of ``out``)."""
    rows, width = table.shape
    bad = 0
    for i in prange(idx.shape[0]):
        row, dst = idx[i], at[i]
        if row < 0 or row >= rows or dst < 0 or dst >= out.shape[0]:
            bad += 1
            continue
        for j in range(width):
            out[dst, j] = table[row, j]
    return bad


def _words(table: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as the widest unsigned words that tile a row: a bitwise copy of any dtype, in few words."""
    row_bytes = table.shape[1] * table.dtype.itemsize
    word = _BITS[next(w for w in (8, 4, 2, 1) if row_bytes % w == 0)]  # >= the itemsize, which divides it
    return table.view(word), out.view(word)  # C-contiguous: only the last axis changes


def check_gather(table: np.ndarray, idx: np.ndarray, what: str = "table", check_range: bool = True) -> None:
    """A clear error for a table or indices the gather kernels cannot take."""
    if table.ndim != 2:
        raise ValueError(f"{what}: must be 2-D (rows x features), got shape {table.shape}")
    if not table.flags.c_contiguous:
        raise ValueError(f"{what}: rows must be back to back (C-contiguous) for the gather; got strides "
                         f"{table.strides} for shape {table.shape}; pass np.ascontiguousarray(table)")
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise ValueError(f"indices must be a 1-D integer array, got {idx.dtype} of shape {idx.shape}")
    if check_range and idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= table.shape[0]:
            bad = lo if lo < 0 else hi
            raise IndexError(f"index {bad} is out of range for a {what} of {table.shape[0]} rows")


def gather_rows(table: np.ndarray, idx: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``table[idx]`` gathered in parallel into ``out`` (allocated if None); returns ``out``."""
    idx = np.asarray(idx)
    check_gather(table, idx, check_range=False)  # the kernel counts out-of-range indices as it goes
    if out is None:
        out = np.empty((idx.shape[0], table.shape[1]), dtype=table.dtype)
    elif out.shape != (idx.shape[0], table.shape[1]) or out.dtype != table.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {table.dtype} array of shape {(idx.shape[0], table.shape[1])}")
    if idx.size:
        words, out_words = _words(table, out)
        if _gather(words, idx.astype(np.int64, copy=False), out_words):
            check_gather(table, idx)  # names the first bad index
    return out


def gather_rows_at(table: np.ndarray, idx: np.ndarray, out: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``out[at] = table[idx]`` in one parallel pass (``at``: distinct rows of ``out``, one per index); returns
    ``out``."""
    idx, at = np.asarray(idx), np.asarray(at)
    check_gather(table, idx, check_range=False)
    if out.ndim != 2 or out.shape[1] != table.shape[1] or out.dtype != table.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {table.dtype} array of {table.shape[1]} columns, got "
                         f"{out.dtype} of shape {out.shape}")
    if at.shape != idx.shape or at.dtype.kind not in "iu":
        raise ValueError(f"at must be integers, one per index ({idx.shape}), got {at.dtype} of shape {at.shape}")
    if idx.size:
        words, out_words = _words(table, out)
        if _gather_at(words, idx.astype(np.int64, copy=False), out_words, at.astype(np.int64, copy=False)):
            check_gather(table, idx)  # names the first bad index
            check_gather(out, at, "destination table")
    return out


def put_rows(rows: np.ndarray, out: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``out[at] = rows`` in one parallel pass; returns ``out``."""
    return gather_rows_at(rows, np.arange(rows.shape[0]), out, at)
