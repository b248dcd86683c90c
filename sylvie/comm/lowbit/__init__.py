"""The Low-bit Module: stochastic b-bit quantization of rows for the wire (Sylvie).

``encode(rows, bits, counts)`` packs each destination's rows into one self-describing buffer (``lowbit.format``);
``decode`` turns it back into float32. Each row has its own min-max grid of 2**b levels, rounded stochastically so
E[decode(encode(x))] = x; ``bits = 32`` is unquantized. CPU (numba) and GPU (numba-cuda) kernels write the same
bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sylvie.comm.lowbit.format import FULL_PRECISION, Layout, check_bits
from sylvie.errors import SylvieError

BACKENDS = ("cpu", "cuda")


class NonFiniteRowsError(SylvieError):
    """Rows to be sent hold NaN or inf."""


@dataclass
class Encoded:
    buffer: torch.Tensor  # uint8: every destination's buffer, concatenated
    layout: Layout

    def parts(self) -> list[torch.Tensor]:
        """One buffer per destination (views)."""
        return self.layout.split(self.buffer)


def message_key(*parts: int) -> int:
    """A 32-bit key for the random stream of one message, from integers (seed, round, layer, ...): ``hash32`` of
    the low and the high 32 bits of each in turn, on Python integers (on numpy scalars: 50 us a message, 10x)."""
    key = 0x5EED
    for p in parts:
        p = int(p)
        key = _hash32_int(key ^ _hash32_int(p))
        key = _hash32_int(key ^ (p >> 32))
    return key


def _hash32_int(h: int) -> int:
    """``scalar.hash32`` of the low 32 bits of ``h``, as an unsigned 32-bit Python integer."""
    h &= 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x7FEB352D) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x846CA68B) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _int32(v: int) -> np.int32:
    """The low 32 bits of ``v`` as int32 (two's complement)."""
    return np.int32(np.int64(v & 0xFFFFFFFF))


def _backend(t: torch.Tensor, backend: str | None) -> str:
    if backend is None:
        return "cuda" if t.is_cuda else "cpu"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend}")
    if backend == "cpu" and t.is_cuda:
        raise ValueError("the cpu backend needs CPU tensors")
    return backend


def _array(t: torch.Tensor, backend: str):
    """What a kernel takes: numpy views of CPU tensors (CPU kernels and the simulator), tensors on a GPU."""
    return t if t.is_cuda else t.numpy()


def encode(rows: torch.Tensor, bits: int, counts=None, *, key: int = 0, uniforms: torch.Tensor | None = None,
           what: str = "rows", backend: str | None = None, out: torch.Tensor | None = None) -> Encoded:
    """Quantize float32 ``rows`` (n, d) bound for len(counts) destinations (``counts[j]`` consecutive rows
    each; default: one destination) to ``bits`` bits.

    ``key`` selects the random stream (``message_key``); ``uniforms`` (n, d float32 in [0, 1)) replaces it.
    ``what`` names the rows in errors, e.g. "layer 2 forward features". ``out``: a uint8 buffer of
    ``Layout.of(counts, d, bits).total_bytes`` to write into (default: a new one).
    """
    bits = check_bits(bits)
    if rows.dim() != 2 or rows.dtype != torch.float32:
        raise ValueError(f"{what}: expected a 2-D float32 tensor, got {tuple(rows.shape)} {rows.dtype}")
    counts = [rows.shape[0]] if counts is None else [int(c) for c in counts]
    if sum(counts) != rows.shape[0] or min(counts, default=0) < 0:
        raise ValueError(f"{what}: counts {counts} do not add up to the {rows.shape[0]} rows")
    layout = Layout.of(counts, rows.shape[1], bits)
    rows = rows.contiguous()
    if bits == FULL_PRECISION:
        return Encoded(rows.view(torch.uint8).reshape(-1), layout)
    if out is None:
        out = torch.empty(layout.total_bytes, dtype=torch.uint8, device=rows.device)
    elif out.dtype != torch.uint8 or out.shape != (layout.total_bytes,) or out.device != rows.device:
        raise ValueError(f"out must be a uint8 buffer of {layout.total_bytes} bytes on {rows.device}")
    for start, stop in layout.padding:
        out[start:stop] = 0  # alignment padding
    if layout.num_rows == 0:
        return Encoded(out, layout)
    backend = _backend(rows, backend)
    if uniforms is None:
        uniforms = rows.new_empty((0, rows.shape[1]))
    elif uniforms.shape != rows.shape or uniforms.dtype != torch.float32 or uniforms.device != rows.device:
        raise ValueError(f"uniforms must be float32 {tuple(rows.shape)} on {rows.device}")
    bad = torch.zeros(rows.shape[0], dtype=torch.uint8, device=rows.device)
    args = (_array(rows, backend), bits, *layout.tables, _int32(key),
            _array(uniforms.contiguous(), backend), _array(out, backend), _array(bad, backend))
    if backend == "cpu":
        from sylvie.comm.lowbit.cpu import encode_rows
        encode_rows(*args)
    else:
        from sylvie.comm.lowbit.cuda import encode_rows_cuda
        encode_rows_cuda(*args)
    if bool(bad.any()):
        first = int(bad.nonzero()[0, 0])
        raise NonFiniteRowsError(f"{what}: {int(bad.sum())} of {rows.shape[0]} rows to send hold NaN or inf "
                                 f"(first: row {first}); training diverged: lower train.lr or check the input "
                                 f"features")
    return Encoded(out, layout)


def decode(buffer: torch.Tensor, layout: Layout, *, backend: str | None = None,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """float32 rows (layout.num_rows, layout.dim) from a buffer laid out as ``layout`` (into ``out`` if
    given). With bits = 32 the result is a view of the buffer."""
    if buffer.dtype != torch.uint8 or buffer.dim() != 1 or buffer.numel() != layout.total_bytes:
        raise ValueError(f"expected a 1-D uint8 buffer of {layout.total_bytes} bytes, got {buffer.numel()} "
                         f"{buffer.dtype}")
    n, d = layout.num_rows, layout.dim
    if layout.bits == FULL_PRECISION:
        rows = buffer.view(torch.float32).view(n, d)
        return rows if out is None else out.copy_(rows)
    if out is None:
        out = torch.empty((n, d), dtype=torch.float32, device=buffer.device)
    elif out.dtype != torch.float32 or out.shape != (n, d) or not out.is_contiguous() or out.device != buffer.device:
        raise ValueError(f"out must be a contiguous float32 ({n}, {d}) tensor on {buffer.device}")
    if n == 0:
        return out
    backend = _backend(buffer, backend)
    args = (_array(buffer.contiguous(), backend), layout.bits, *layout.tables,
            _array(out, backend))
    if backend == "cpu":
        from sylvie.comm.lowbit.cpu import decode_rows
        decode_rows(*args)
    else:
        from sylvie.comm.lowbit.cuda import decode_rows_cuda
        decode_rows_cuda(*args)
    return out
