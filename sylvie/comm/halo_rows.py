"""The halo rows as an autograd function: features forward, feature gradients backward, fresh or stale.

Fresh: gather the rows peers need, send them (``halo_wire``); backward, gradients travel back and are added into the
owners' inner rows. Stale (pipelined): use the previous round's rows and gradients while this round's go out in the
background (``StaleHalo``). Under boundary-node sampling each round has its own plan, so rows kept for the next round
are always gathered with that round's plan.
"""
from __future__ import annotations

import torch

from sylvie.comm.boundary_drift import BoundaryDrift
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_wire import BACKWARD, FORWARD, Wire
from sylvie.comm.stale_halo import StaleHalo


class HaloRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inner: torch.Tensor, plan: HaloPlan, next_plan: HaloPlan, wire: Wire,
                stale_rows: StaleHalo | None, fresh: bool, keep_for_next: bool, drift: BoundaryDrift | None):
        ctx.plan, ctx.wire, ctx.stale_rows, ctx.fresh, ctx.keep_for_next, ctx.drift = (
            plan, wire, stale_rows, fresh, keep_for_next, drift)
        layer = wire.layer
        if fresh:
            incoming = wire.send(plan.gather(inner), plan.send_counts, plan.recv_counts, FORWARD)
            if keep_for_next and next_plan is plan:
                stale_rows.put(layer, FORWARD, incoming, plan)
            elif keep_for_next:  # the next round's sample: its rows, sent ahead
                stale_rows.put(layer, FORWARD, wire.ahead().start(next_plan.gather(inner), next_plan.send_counts,
                                                                  next_plan.recv_counts, FORWARD), next_plan)
            return incoming
        incoming = stale_rows.take(layer, FORWARD)
        if stale_rows.used_plan(layer, FORWARD) is not plan:
            raise RuntimeError(f"layer {layer}: the halo rows kept for this stale round belong to another plan (the "
                               f"previous round must be told this round's plan: begin_round(..., next_plan=...))")
        if keep_for_next:
            stale_rows.put(layer, FORWARD, wire.start(next_plan.gather(inner), next_plan.send_counts,
                                                      next_plan.recv_counts, FORWARD), next_plan)
        return incoming

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        plan, wire, stale_rows, layer = ctx.plan, ctx.wire, ctx.stale_rows, ctx.wire.layer
        if ctx.drift is not None:
            ctx.drift.observe(layer, BACKWARD, grad_halo, plan.halo_rows, plan.full_num_halo)
        if ctx.fresh:
            grad_sent = wire.send(grad_halo, plan.recv_counts, plan.send_counts, BACKWARD)
            if ctx.keep_for_next:
                stale_rows.put(layer, BACKWARD, grad_sent, plan)
            return plan.scatter_add(grad_sent), None, None, None, None, None, None, None
        grad_sent = stale_rows.take(layer, BACKWARD)
        sent_for = stale_rows.used_plan(layer, BACKWARD)  # the previous round's plan: whose rows peers sent back for
        if ctx.keep_for_next:
            stale_rows.put(layer, BACKWARD, wire.start(grad_halo, plan.recv_counts, plan.send_counts, BACKWARD), plan)
        return sent_for.scatter_add(grad_sent), None, None, None, None, None, None, None
