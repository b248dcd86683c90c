"""Synchronous fp32 halo exchange with autograd: features forward, feature gradients backward.

Forward: gather the rows peers need, one all-to-all, the received block *is* the halo rows.
Backward: the halo rows' gradients travel back to their owners by the reverse all-to-all and are added
into the owners' inner-row gradients.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.stats import CommStats


def _all_to_all_rows(rows: torch.Tensor, out_rows: int, out_counts: list[int], in_counts: list[int],
                     stats: CommStats) -> torch.Tensor:
    """Send ``in_counts[j]`` rows of ``rows`` to peer j; receive ``out_counts[j]`` rows from j."""
    out = rows.new_empty((out_rows,) + tuple(rows.shape[1:]))
    row_bytes = int(torch.Size(rows.shape[1:]).numel()) * rows.element_size()
    with stats.timed(sent=rows.shape[0] * row_bytes, received=out_rows * row_bytes):
        dist.all_to_all_single(out, rows.contiguous(), out_counts, in_counts)
    return out


class _HaloRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inner: torch.Tensor, plan: HaloPlan, stats: CommStats):
        ctx.plan, ctx.stats = plan, stats
        return _all_to_all_rows(inner[plan.send_index], plan.num_halo, plan.recv_counts, plan.send_counts, stats)

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        plan = ctx.plan
        grad_sent = _all_to_all_rows(grad_halo, int(plan.send_index.shape[0]), plan.send_counts,
                                     plan.recv_counts, ctx.stats)
        grad_inner = grad_halo.new_zeros((plan.num_inner,) + tuple(grad_halo.shape[1:]))
        grad_inner.index_add_(0, plan.send_index, grad_sent)
        return grad_inner, None, None


class HaloExchange:
    """Callable ``(inner_rows, layer) -> halo_rows`` handed to the model; differentiable."""

    def __init__(self, plan: HaloPlan, stats: CommStats | None = None):
        self.plan = plan
        self.stats = stats or CommStats()

    def __call__(self, inner: torch.Tensor, layer: int = 0) -> torch.Tensor:
        if len(self.plan.send_counts) == 1:  # one rank: no halo. Otherwise every rank joins the collective.
            return inner.new_empty((0,) + tuple(inner.shape[1:]))
        return _HaloRows.apply(inner, self.plan, self.stats)
