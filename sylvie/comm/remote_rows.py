"""Rows of vertices other ranks own, fetched on demand: the communication primitive of sampled training.

Vertex ids live in a partition's id space, where rank j owns ``part_offsets[j] .. part_offsets[j + 1]`` and holds
their rows in that order. ``fetch(ids)`` is collective (every rank calls it, with its own ids, possibly none):
one all-to-all of counts, one of ids, then the owners answer with one all-to-all of rows through a ``Wire``, in
fp32 or at a Low-bit width (``bits``: the Sylvie idea applied to fetched features). The rows come back in the
order of ``ids``.
"""
from __future__ import annotations

import torch

from sylvie.comm.collective import AllToAll, torch_all_to_all
from sylvie.comm.halo_wire import FORWARD, Wire
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.stats import CommStats


class RemoteRows:
    def __init__(self, rank: int, part_offsets, own_rows: torch.Tensor, bits: int = FULL_PRECISION, seed: int = 0,
                 all_to_all: AllToAll | None = None, stats: CommStats | None = None):
        self.rank, self.bits, self.seed = rank, bits, seed
        self.part_offsets = torch.as_tensor(part_offsets, dtype=torch.long)
        self.world = len(self.part_offsets) - 1
        if own_rows.shape[0] != int(self.part_offsets[rank + 1] - self.part_offsets[rank]):
            raise ValueError(f"rank {rank} holds {own_rows.shape[0]} rows but owns "
                             f"{int(self.part_offsets[rank + 1] - self.part_offsets[rank])} ids")
        self.own_rows = own_rows
        self.all_to_all = all_to_all or torch_all_to_all()
        self.stats = stats or CommStats()
        self.calls = 0

    def owner(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.part_offsets, ids, right=True) - 1

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of ``ids`` (int64, any owners), in that order."""
        ids = ids.to(torch.long)
        owners = self.owner(ids)
        if ids.numel() and (owners.min() < 0 or owners.max() >= self.world):
            raise ValueError(f"ids outside [0, {int(self.part_offsets[-1])})")
        order = torch.argsort(owners, stable=True)
        want = ids[order]
        send_counts = torch.bincount(owners, minlength=self.world)
        recv_counts = torch.empty_like(send_counts)
        self.all_to_all(recv_counts, send_counts, [1] * self.world, [1] * self.world, False)
        asked = torch.empty(int(recv_counts.sum()), dtype=torch.long)
        self.all_to_all(asked, want, recv_counts.tolist(), send_counts.tolist(), False)
        answer = self.own_rows[asked - self.part_offsets[self.rank]]
        wire = Wire(self.bits, (self.seed, self.rank, self.calls), 0, self.stats, self.all_to_all)
        self.calls += 1
        got = wire.send(answer.contiguous(), recv_counts.tolist(), send_counts.tolist(), FORWARD)
        rows = torch.empty_like(got)
        rows[order] = got
        return rows
