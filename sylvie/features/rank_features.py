"""Where a rank finds the input rows of its minibatches: its own rows, its cache of remote rows, or their owners.

A rank's table holds its own rows, hottest first (``local_order``: by VIP when known, the order the feature store's
tiers will follow), then the rows of the remote vertices it caches. ``slot[v]`` is v's row in the table, or -1.
The cache is filled once at start-up, from the owners, with one exchange (ids, then rows, in fp32). ``gather`` is
collective, like ``RemoteRows.fetch``: every rank calls it once per minibatch, in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.remote_rows import RemoteRows
from sylvie.comm.stats import CommStats


@dataclass
class GatherCounts:
    """Rows of one gather by where they came from."""
    local: int = 0
    cached: int = 0
    remote: int = 0

    def add(self, other: GatherCounts) -> None:
        self.local += other.local
        self.cached += other.cached
        self.remote += other.remote


class RankFeatures:
    def __init__(self, rank: int, part_offsets, own_rows: np.ndarray, local_order: np.ndarray,
                 cached_ids: np.ndarray, all_to_all, remote_bits: int = FULL_PRECISION, seed: int = 0):
        """``own_rows[i]`` is the row of vertex ``part_offsets[rank] + i``; ``local_order`` lists the rank's own
        ids in table order; ``cached_ids`` the remote vertices to cache (fetched here, collectively)."""
        offsets = np.asarray(part_offsets, np.int64)
        lo, n = int(offsets[rank]), int(offsets[-1])
        local_order = np.asarray(local_order, np.int64)
        self.num_own = local_order.shape[0]
        self.table = torch.tensor(np.asarray(own_rows)[local_order - lo])  # a copy: shard rows are read-only
        dtype = torch.int32 if n + len(cached_ids) < 2**31 else torch.int64
        self.slot = torch.full((n,), -1, dtype=dtype)
        self.slot[torch.from_numpy(local_order)] = torch.arange(self.num_own, dtype=dtype)
        own_index = self.slot[lo:lo + self.num_own].to(torch.long)  # own vertex i -> its row
        self.fill_stats = CommStats()
        filler = RemoteRows(rank, offsets, self.table, FULL_PRECISION, seed, all_to_all, self.fill_stats, own_index)
        cached_ids = torch.from_numpy(np.asarray(cached_ids, np.int64))
        if cached_ids.numel() and bool((filler.owner(cached_ids) == rank).any()):
            raise ValueError(f"rank {rank}: the cache may hold only other ranks' vertices")
        cached_rows = filler.fetch(cached_ids)
        self.slot[cached_ids] = torch.arange(self.num_own, self.num_own + cached_ids.numel(), dtype=dtype)
        self.table = torch.cat([self.table, cached_rows])
        self.num_cached = int(cached_ids.numel())
        self.stats = CommStats()  # the minibatches' remote fetches
        self.remote = RemoteRows(rank, offsets, self.table, remote_bits, seed, all_to_all, self.stats, own_index)

    @property
    def dim(self) -> int:
        return self.table.shape[1]

    def gather(self, ids: torch.Tensor, key: tuple[int, ...] | None = None) -> tuple[torch.Tensor, GatherCounts]:
        """The rows of ``ids`` in that order, and how many came from own rows, the cache and the owners; ``key``
        names the random stream of Low-bit remote rows (``RemoteRows.fetch``)."""
        ids = ids.to(torch.long)
        slots = self.slot[ids].to(torch.long)
        held = slots >= 0
        rows = torch.empty(ids.shape[0], self.dim, dtype=self.table.dtype)
        rows[held] = self.table[slots[held]]
        missing = ~held
        rows[missing] = self.remote.fetch(ids[missing], key)
        own = int((held & (slots < self.num_own)).sum())
        return rows, GatherCounts(own, int(held.sum()) - own, int(missing.sum()))
