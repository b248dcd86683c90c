"""One node type's input rows of a sampled minibatch on their way to the training device, inside the minibatch's one
buffer (``sylvie.sampling.batch_transfer``).

``BatchRows`` lays out the rows by who serves each (``TieredRows.served_by``): rows the CPU gives (fetched ones, and
the table's where the GPU does not read it), and rows the GPU gathers itself. ``write`` fills the host buffer;
``finish`` makes the input rows on the device from the copy.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from sylvie.comm.gather_cpu import put_rows
from sylvie.sampling.batch_transfer import Layout


@dataclass(frozen=True)
class PendingRows:
    """``n`` input rows: those at ``held_at`` are the table's, at positions ``slots``; those at ``fetched_at`` are
    ``fetched`` (from their owners, on the host)."""
    n: int
    slots: torch.Tensor
    held_at: torch.Tensor
    fetched: torch.Tensor
    fetched_at: torch.Tensor


class BatchRows:
    def __init__(self, features, pending: PendingRows, layout: Layout):
        """``features``: the ``RankFeatures`` that fetched ``pending``."""
        self.features, self.pending = features, pending
        tiers = features.tiers
        self.dim, self.dtype = tiers.dim, tiers.table.dtype
        by_cpu, resident, mapped = tiers.served_by(pending.slots)
        self.cpu_slots, self.cpu_at = pending.slots[by_cpu], pending.held_at[by_cpu]
        self.resident = (pending.slots[resident], pending.held_at[resident])
        self.mapped = (pending.slots[mapped], pending.held_at[mapped])
        given = self.cpu_slots.numel() + pending.fetched.shape[0]
        self.in_place = given == pending.n
        self.rows = layout.add(self.dtype, (pending.n if self.in_place else given, self.dim))
        self.places = None if self.in_place else layout.add(torch.int64, (given,))
        self.gathered = [(layout.add_like(s), layout.add_like(a)) for s, a in (self.resident, self.mapped)]

    def write(self, views: list[torch.Tensor]) -> None:
        """Fill the host buffer's segments (``views`` of it)."""
        t0 = time.perf_counter()
        p, rows = self.pending, views[self.rows]
        fetched = p.fetched.to(self.dtype).contiguous().numpy()
        if self.in_place:
            self.features.tiers.gather_into(self.cpu_slots, rows, self.cpu_at)
            put_rows(fetched, rows.numpy(), p.fetched_at.numpy())
        else:
            k = self.cpu_slots.numel()
            self.features.tiers.gather_into(self.cpu_slots, rows, torch.arange(k))
            put_rows(fetched, rows.numpy(), torch.arange(k, rows.shape[0]).numpy())
            places = views[self.places]
            places[:k] = self.cpu_at
            places[k:] = p.fetched_at
        for (s, a), (slots, at) in zip(self.gathered, (self.resident, self.mapped), strict=True):
            views[s].copy_(slots)
            views[a].copy_(at)
        self.features.seconds += time.perf_counter() - t0

    def finish(self, views: list[torch.Tensor], hand_over=None) -> torch.Tensor:
        """The input rows on the device, from the copied buffer's ``views``; ``hand_over(t)`` for each tensor
        made here that the training's stream uses (``BatchTransfer.hand_over``)."""
        if self.in_place:
            return views[self.rows]
        x = torch.empty((self.pending.n, self.dim), dtype=self.dtype, device=views[self.rows].device)
        if hand_over is not None:
            hand_over(x)
        x.index_copy_(0, views[self.places], views[self.rows])
        (rs, ra), (ms, ma) = self.gathered
        tiers = self.features.tiers
        tiers.gather_resident(views[rs], x, views[ra])
        tiers.gather_mapped(views[ms], x, views[ma])
        return x


def gather_once(features, pending: PendingRows) -> torch.Tensor:
    """``pending``'s rows on the training device, through a buffer of their own (a gather outside a minibatch's
    transfer: one copy of its own on a GPU)."""
    layout = Layout()
    rows = BatchRows(features, pending, layout)
    host = torch.empty(layout.nbytes, dtype=torch.uint8)
    rows.write(layout.views(host))
    device = host if features.tiers.device.type == "cpu" else host.to(features.tiers.device)
    return rows.finish(layout.views(device))
