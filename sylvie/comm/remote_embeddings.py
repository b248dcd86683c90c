"""Rows of a tensor that other ranks own, fetched with autograd: the forward fetches them from their owners
(``RemoteRows``: fp32, or Low-bit rounded per row), the backward sends their gradients back to the owners, who add
them into their own rows' gradients. Link prediction scores pairs whose ends live on different ranks with it.
"""
from __future__ import annotations

import torch

from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.remote_rows import RemoteRows
from sylvie.comm.stats import CommStats


class _Fetch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, own: torch.Tensor, ids: torch.Tensor, remote: RemoteRows, key: tuple, bits: int):
        ctx.remote, ctx.key, ctx.bits, ctx.rows = remote, key, bits, own.shape[0]
        ctx.save_for_backward(ids)
        return remote.fetch(ids, key=key)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (ids,) = ctx.saved_tensors
        local, rows = ctx.remote.send_to_owners(ids, grad.contiguous(), ctx.bits, (*ctx.key, 1))
        out = torch.zeros(ctx.rows, grad.shape[1], dtype=grad.dtype, device=grad.device)
        out.index_add_(0, local.to(grad.device), rows.to(grad.dtype))
        return out, None, None, None, None


class RemoteEmbeddings:
    """Fetches rows of ``own`` (this rank's rows of a tensor split over the ranks by ``part_offsets``: rank r holds
    ids ``part_offsets[r] .. part_offsets[r + 1] - 1``) by id; collective: every rank calls ``fetch`` together, and
    every rank that fetched with gradients runs its backward together."""

    def __init__(self, rank: int, part_offsets, bits: int = FULL_PRECISION, seed: int = 0,
                 stats: CommStats | None = None):
        self.rank, self.part_offsets, self.bits, self.seed = rank, part_offsets, bits, seed
        self.stats = stats or CommStats()

    def fetch(self, own: torch.Tensor, ids: torch.Tensor, key: tuple[int, ...]) -> torch.Tensor:
        """The rows of ``ids`` (any owners, repeats allowed), in their order; differentiable in ``own``. ``key``
        names the random stream of Low-bit rounding (forward, and backward with a 1 appended)."""
        unique, inverse = torch.unique(ids.to(torch.long).cpu(), return_inverse=True)
        remote = RemoteRows(self.rank, self.part_offsets, own.detach().cpu() if own.device.type != "cpu" else
                            own.detach(), self.bits, self.seed, stats=self.stats)
        if own.dtype != torch.float32 and self.bits != FULL_PRECISION:
            raise ValueError("Low-bit rows travel as float32 rows")
        rows = _Fetch.apply(own, unique, remote, tuple(key), self.bits)
        return rows.to(own.device)[inverse.to(own.device)]
