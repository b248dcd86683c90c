"""The halo rows as an autograd function: features forward, feature gradients backward, obtained two ways.

**Fresh** (synchronous): gather the rows peers need, send them (``halo_wire``), and the received block *is*
the halo rows (they are ordered by owner). Backward, the halo rows' gradients travel back to their owners
the same way and are added into the owners' inner-row gradients.

**Stale** (pipelined): the halo rows are those received during the previous round, and the gradients added
into the inner rows are those peers sent back during the previous round's backward; this round's rows and
gradients go out in the background, for the next round (``StaleHalo`` holds them).

With ``keep_for_next``, what this round receives (fresh) or sends in the background (stale) is kept in the
``StaleHalo`` for the next round.
"""
from __future__ import annotations

import torch

from sylvie.comm.boundary_drift import BoundaryDrift
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_wire import BACKWARD, FORWARD, Wire
from sylvie.comm.stale_halo import StaleHalo


class HaloRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inner: torch.Tensor, plan: HaloPlan, wire: Wire, stale_rows: StaleHalo | None, fresh: bool,
                keep_for_next: bool, drift: BoundaryDrift | None):
        ctx.plan, ctx.wire, ctx.stale_rows, ctx.fresh, ctx.keep_for_next, ctx.drift = (
            plan, wire, stale_rows, fresh, keep_for_next, drift)
        rows = plan.gather(inner)
        if drift is not None:
            drift.observe(wire.layer, FORWARD, rows)
        return _obtain(wire, stale_rows, fresh, keep_for_next, rows, plan.send_counts, plan.recv_counts, FORWARD)

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        plan, wire = ctx.plan, ctx.wire
        if ctx.drift is not None:
            ctx.drift.observe(wire.layer, BACKWARD, grad_halo)
        grad_sent = _obtain(wire, ctx.stale_rows, ctx.fresh, ctx.keep_for_next, grad_halo, plan.recv_counts,
                            plan.send_counts, BACKWARD)
        return plan.scatter_add(grad_sent), None, None, None, None, None, None


def _obtain(wire: Wire, stale_rows: StaleHalo | None, fresh: bool, keep_for_next: bool, outgoing: torch.Tensor,
            send_counts: list[int], recv_counts: list[int], direction: int) -> torch.Tensor:
    """What peers send this way: exchanged now (fresh), or what they sent last round (stale)."""
    if fresh:
        incoming = wire.send(outgoing, send_counts, recv_counts, direction)
        if keep_for_next:
            stale_rows.put(wire.layer, direction, incoming)
        return incoming
    incoming = stale_rows.take(wire.layer, direction)
    if keep_for_next:
        stale_rows.put(wire.layer, direction, wire.start(outgoing, send_counts, recv_counts, direction))
    return incoming
