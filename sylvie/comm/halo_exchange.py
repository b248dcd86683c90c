"""Halo exchange with autograd: features forward, feature gradients backward, optionally quantized and
optionally pipelined.

Synchronous (fresh): gather the rows peers need, send them (``halo_wire``), and the received block *is*
the halo rows (they are ordered by owner). Backward, the halo rows' gradients travel back to their owners
the same way and are added into the owners' inner-row gradients.

Stale (pipelined): the halo rows are those received during the previous epoch, and the gradients added
into the inner rows are those peers sent back during the previous epoch's backward; this epoch's rows and
gradients go out in the background, for the next epoch (``stale_halo``).
"""
from __future__ import annotations

import torch

from sylvie.comm.boundary_drift import BoundaryDrift
from sylvie.comm.collective import AllToAll, torch_all_to_all
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_wire import BACKWARD, FORWARD, Wire
from sylvie.comm.lowbit_format import FULL_PRECISION
from sylvie.comm.stale_halo import StaleHalo, StaleHaloRows
from sylvie.comm.stats import CommStats


class _HaloRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inner: torch.Tensor, plan: HaloPlan, wire: Wire, keep: StaleHalo | None,
                drift: BoundaryDrift | None):
        ctx.plan, ctx.wire, ctx.keep, ctx.drift = plan, wire, keep, drift
        rows = inner[plan.send_index]
        if drift is not None:
            drift.observe(wire.layer, FORWARD, rows)
        halo = wire.send(rows, plan.send_counts, plan.recv_counts, FORWARD)
        if keep is not None:  # the next epoch computes with these
            keep.put(wire.layer, FORWARD, halo)
        return halo

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        plan = ctx.plan
        if ctx.drift is not None:
            ctx.drift.observe(ctx.wire.layer, BACKWARD, grad_halo)
        grad_sent = ctx.wire.send(grad_halo, plan.recv_counts, plan.send_counts, BACKWARD)
        if ctx.keep is not None:
            ctx.keep.put(ctx.wire.layer, BACKWARD, grad_sent)
        grad_inner = grad_halo.new_zeros((plan.num_inner,) + tuple(grad_halo.shape[1:]))
        grad_inner.index_add_(0, plan.send_index, grad_sent)
        return grad_inner, None, None, None, None


class HaloExchange:
    """Callable ``(inner_rows, layer) -> halo_rows`` handed to the model; differentiable.

    ``bits`` applies to layers >= 1; layer 0 (the input features, exchanged once) is always fp32 and
    always synchronous. The random streams of quantization depend on (seed, rank, round, layer,
    direction), so a run repeats exactly, also after resuming.

    Call ``begin_round(epoch, fresh=..., keep=...)`` once per training step: ``fresh`` exchanges now
    (synchronous) rather than computing with the previous round's data; ``keep`` makes this round's data
    available to the next round (a stale one), sent in the background when this round is itself stale.
    ``pipelined=True`` is needed for stale rounds: it gives the background exchanges their own process
    group (made here, so every rank must construct the exchange), so they never queue behind the
    gradient all-reduce, and records the boundary drift. ``all_to_all`` replaces torch.distributed (e.g. a
    simulator of several ranks in one process).
    """

    def __init__(self, plan: HaloPlan, stats: CommStats | None = None, bits: int = FULL_PRECISION,
                 seed: int = 0, rank: int = 0, pipelined: bool = False, smoothing: float = 0.0,
                 all_to_all: AllToAll | None = None):
        self.plan = plan
        self.stats = stats or CommStats()
        self.bits, self.seed, self.rank, self.round = bits, seed, rank, 0
        self.fresh, self.keep = True, False
        self.pipelined = pipelined and len(plan.send_counts) > 1
        self.drift = BoundaryDrift()
        self.stale = StaleHalo(smoothing)
        if all_to_all is None:
            group = None
            if self.pipelined:
                import torch.distributed as dist
                group = dist.new_group(backend=dist.get_backend())
            all_to_all = torch_all_to_all(group)
        self.all_to_all = all_to_all

    def begin_round(self, round_: int, fresh: bool = True, keep: bool = False) -> None:
        if not fresh and not self.pipelined:
            raise ValueError("a stale round needs HaloExchange(pipelined=True)")
        self.round, self.fresh, self.keep = round_, fresh, keep and self.pipelined
        if fresh:
            self.stale.clear_pending()

    def __call__(self, inner: torch.Tensor, layer: int = 0) -> torch.Tensor:
        if len(self.plan.send_counts) == 1:  # one rank: no halo. Otherwise every rank joins the collective.
            return inner.new_empty((0,) + tuple(inner.shape[1:]))
        bits = FULL_PRECISION if layer == 0 else self.bits
        wire = Wire(bits, (self.seed, self.rank, self.round), layer, self.stats, self.all_to_all)
        if layer == 0 or not torch.is_grad_enabled():  # input features, or evaluation: always fresh
            return _HaloRows.apply(inner, self.plan, wire, None, None)
        drift = self.drift if self.pipelined else None
        if self.fresh:
            return _HaloRows.apply(inner, self.plan, wire, self.stale if self.keep else None, drift)
        return StaleHaloRows.apply(inner, self.plan, wire, self.stale, self.keep, drift)
