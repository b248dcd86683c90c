"""Stale (pipelined) halo rows: compute with what arrived during the previous epoch while this epoch's
rows go out in the background.

Forward, layer l of epoch t returns the halo rows peers sent at epoch t-1 (waiting only if they are still
on the wire) and starts sending this epoch's rows. Backward, the gradients added into the inner rows are
those peers sent back at epoch t-1, and this epoch's halo gradients start on their way. Optional
exponential smoothing (PipeGCN): the rows used are ``s * rows used last epoch + (1 - s) * rows received``.
"""
from __future__ import annotations

import torch

from sylvie.comm.boundary_drift import BoundaryDrift
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_wire import BACKWARD, FORWARD, InFlight, Wire


class StaleHalo:
    """What the next epoch computes with, per (layer, direction): received rows, or an exchange in flight."""

    def __init__(self, smoothing: float = 0.0):
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing = smoothing
        self.incoming: dict[tuple[int, int], torch.Tensor | InFlight] = {}
        self.used: dict[tuple[int, int], torch.Tensor] = {}

    def put(self, layer: int, direction: int, item: torch.Tensor | InFlight) -> None:
        """Keep rows (from a synchronous exchange; also the new smoothing state) or a background exchange."""
        if isinstance(item, torch.Tensor):
            item = item.detach()
            self.used[(layer, direction)] = item
        self.incoming[(layer, direction)] = item

    def take(self, layer: int, direction: int) -> torch.Tensor:
        """The rows kept for this epoch (waiting for them if they are still on the wire), smoothed."""
        item = self.incoming.pop((layer, direction), None)
        if item is None:
            raise RuntimeError(f"layer {layer}: a stale epoch found no halo data from the previous epoch; the "
                               f"epoch before a stale one must keep its data (begin_round(..., keep=True))")
        rows = item.wait() if isinstance(item, InFlight) else item
        prev = self.used.get((layer, direction))
        if self.smoothing > 0 and prev is not None and prev.shape == rows.shape:
            rows = self.smoothing * prev + (1.0 - self.smoothing) * rows
        self.used[(layer, direction)] = rows
        return rows.detach()

    def clear_pending(self) -> None:
        """Finish and drop whatever nobody will use (collectives must complete on every rank)."""
        for item in self.incoming.values():
            if isinstance(item, InFlight):
                item.wait()
        self.incoming.clear()


class StaleHaloRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inner: torch.Tensor, plan: HaloPlan, wire: Wire, stale: StaleHalo, keep: bool,
                drift: BoundaryDrift | None):
        ctx.plan, ctx.wire, ctx.stale, ctx.keep, ctx.drift = plan, wire, stale, keep, drift
        rows = inner[plan.send_index]
        if drift is not None:
            drift.observe(wire.layer, FORWARD, rows)
        halo = stale.take(wire.layer, FORWARD)
        if keep:
            stale.put(wire.layer, FORWARD, wire.start(rows, plan.send_counts, plan.recv_counts, FORWARD))
        return halo

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        plan, wire, stale = ctx.plan, ctx.wire, ctx.stale
        if ctx.drift is not None:
            ctx.drift.observe(wire.layer, BACKWARD, grad_halo)
        grad_sent = stale.take(wire.layer, BACKWARD)
        if ctx.keep:
            stale.put(wire.layer, BACKWARD, wire.start(grad_halo, plan.recv_counts, plan.send_counts, BACKWARD))
        grad_inner = grad_halo.new_zeros((plan.num_inner,) + tuple(grad_halo.shape[1:]))
        grad_inner.index_add_(0, plan.send_index, grad_sent)
        return grad_inner, None, None, None, None, None
