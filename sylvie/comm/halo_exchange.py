"""Halo exchange with autograd: features forward, feature gradients backward, optionally quantized.

Forward: gather the rows peers need, encode them (Low-bit Module; fp32 at 32 bits), one all-to-all of
bytes, decode: the received block *is* the halo rows (they are ordered by owner).
Backward: the halo rows' gradients travel back to their owners the same way and are added into the
owners' inner-row gradients.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.lowbit import decode, encode, message_key
from sylvie.comm.lowbit_format import FULL_PRECISION, Layout
from sylvie.comm.stats import CommStats

FORWARD, BACKWARD = 0, 1


class _Wire:
    """How one exchange is encoded: bit width and the random stream of its messages."""

    def __init__(self, bits: int, key_parts: tuple[int, ...], layer: int, stats: CommStats):
        self.bits, self.key_parts, self.layer, self.stats = bits, key_parts, layer, stats

    def send(self, rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], direction: int):
        """Send ``send_counts[j]`` rows to peer j, receive ``recv_counts[j]`` from j; returns the received rows."""
        what = f"layer {self.layer} {'forward features' if direction == FORWARD else 'backward feature gradients'}"
        dim = rows.shape[1]
        t0 = time.perf_counter()
        enc = encode(rows.contiguous(), self.bits, send_counts, key=message_key(*self.key_parts, self.layer, direction),
                     what=what)
        recv_layout = Layout.of(recv_counts, dim, self.bits)
        recv = torch.empty(recv_layout.total_bytes, dtype=torch.uint8, device=rows.device)
        t1 = time.perf_counter()
        dist.all_to_all_single(recv, enc.buffer, list(recv_layout.sizes), list(enc.layout.sizes))
        t2 = time.perf_counter()
        out = decode(recv, recv_layout)  # at 32 bits: a view of the receive buffer, which nothing else holds
        t3 = time.perf_counter()
        self.stats.add(seconds=t2 - t1, codec_seconds=(t1 - t0) + (t3 - t2), sent=enc.layout.total_bytes,
                       received=recv_layout.total_bytes, fp32_sent=rows.shape[0] * dim * 4)
        return out


class _HaloRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inner: torch.Tensor, plan: HaloPlan, wire: _Wire):
        ctx.plan, ctx.wire = plan, wire
        return wire.send(inner[plan.send_index], plan.send_counts, plan.recv_counts, FORWARD)

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        plan = ctx.plan
        grad_sent = ctx.wire.send(grad_halo, plan.recv_counts, plan.send_counts, BACKWARD)
        grad_inner = grad_halo.new_zeros((plan.num_inner,) + tuple(grad_halo.shape[1:]))
        grad_inner.index_add_(0, plan.send_index, grad_sent)
        return grad_inner, None, None


class HaloExchange:
    """Callable ``(inner_rows, layer) -> halo_rows`` handed to the model; differentiable.

    ``bits`` applies to layers >= 1; layer 0 (the input features, exchanged once) is always fp32.
    The random streams of quantization depend on (seed, rank, round, layer, direction), so a run
    repeats exactly, also after resuming; call ``begin_round`` once per training step.
    """

    def __init__(self, plan: HaloPlan, stats: CommStats | None = None, bits: int = FULL_PRECISION,
                 seed: int = 0, rank: int = 0):
        self.plan = plan
        self.stats = stats or CommStats()
        self.bits, self.seed, self.rank, self.round = bits, seed, rank, 0

    def begin_round(self, round_: int) -> None:
        self.round = round_

    def __call__(self, inner: torch.Tensor, layer: int = 0) -> torch.Tensor:
        if len(self.plan.send_counts) == 1:  # one rank: no halo. Otherwise every rank joins the collective.
            return inner.new_empty((0,) + tuple(inner.shape[1:]))
        bits = FULL_PRECISION if layer == 0 else self.bits
        wire = _Wire(bits, (self.seed, self.rank, self.round), layer, self.stats)
        return _HaloRows.apply(inner, self.plan, wire)
