"""Where a rank finds the input rows of its minibatches: its own rows, its cache of remote rows, or their owners.

The rank's ``TieredRows`` holds its own rows hottest first, then its cached remote rows (filled once at start-up);
``slot[v]`` is v's row, or -1. ``gather`` is collective, once per minibatch in the same order on every rank. Each
epoch's account (``end_epoch``) counts rows by source, bytes and time.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sylvie.comm.collective import all_reduce_sum_together
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.remote_rows import RemoteRows
from sylvie.comm.stats import CommStats
from sylvie.features.batch_rows import PendingRows, gather_once
from sylvie.features.host_memory import huge_page_table
from sylvie.features.tiered_rows import TieredRows, check_store_options


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


@dataclass(frozen=True)
class FetchEpoch:
    """One epoch of every rank's gathers: rows by source and bytes summed over the ranks; ``seconds`` this rank's
    time in ``gather``."""
    rows: GatherCounts
    bytes_sent: int  # the remote fetches' (ids and rows), at their bits
    fp32_bytes_sent: int
    bytes_received: int
    store_device_bytes: int
    store_host_bytes: int
    seconds: float

    @staticmethod
    def of(account: torch.Tensor, seconds: float) -> FetchEpoch:
        """From an account (``RankFeatures.account``, summed over types or ranks)."""
        v = [int(x) for x in account.tolist()]
        return FetchEpoch(GatherCounts(v[0], v[1], v[2]), v[3], v[4], v[5], v[6], v[7], seconds)

    @property
    def cache_hit_rate(self) -> float | None:
        """Of the rows a rank did not own, the share its cache held (None: every row was its own)."""
        wanted = self.rows.cached + self.rows.remote
        return self.rows.cached / wanted if wanted else None


class RankFeatures:
    def __init__(self, rank: int, part_offsets, own_rows: np.ndarray, local_order: np.ndarray,
                 cached_ids: np.ndarray, all_to_all, remote_bits: int = FULL_PRECISION, seed: int = 0,
                 gpu_fraction: float = 0.0, zero_copy: str = "auto", device: torch.device | str = "cpu"):
        """``own_rows[i]`` is the row of vertex ``part_offsets[rank] + i``; ``local_order`` lists the rank's own
        ids in table order; ``cached_ids`` the remote vertices to cache (fetched here, collectively).
        ``gpu_fraction``, ``zero_copy`` and ``device`` place the table's tiers (``TieredRows``)."""
        offsets = np.asarray(part_offsets, np.int64)
        lo, n = int(offsets[rank]), int(offsets[-1])
        local_order = np.asarray(local_order, np.int64)
        cached_ids = torch.from_numpy(np.asarray(cached_ids, np.int64))
        own_rows = np.asarray(own_rows)
        self.num_own, self.num_cached = local_order.shape[0], int(cached_ids.numel())
        check_store_options(gpu_fraction, zero_copy, torch.device(device).type == "cuda")
        dtype = torch.from_numpy(np.empty(0, own_rows.dtype)).dtype  # (own_rows may be read-only: no view of it)
        shape = (self.num_own + self.num_cached, own_rows.shape[1])
        if torch.device(device).type == "cuda" and zero_copy != "off":  # read zero-copy: allocate it pinned
            table = torch.empty(shape, dtype=dtype, pin_memory=True)
        else:  # gathered by the CPU at random: huge pages spare it most TLB misses
            table = huge_page_table(shape, dtype)
        np.take(own_rows, local_order - lo, axis=0, out=table[:self.num_own].numpy())  # hottest first
        dtype = torch.int32 if n + self.num_cached < 2**31 else torch.int64
        self.slot = torch.full((n,), -1, dtype=dtype)
        self.slot[torch.from_numpy(local_order)] = torch.arange(self.num_own, dtype=dtype)
        own_index = self.slot[lo:lo + self.num_own].to(torch.long)  # own vertex i -> its row
        self.fill_stats = CommStats()
        filler = RemoteRows(rank, offsets, table, FULL_PRECISION, seed, all_to_all, self.fill_stats, own_index)
        if self.num_cached and bool((filler.owner(cached_ids) == rank).any()):
            raise ValueError(f"rank {rank}: the cache may hold only other ranks' vertices")
        table[self.num_own:] = filler.fetch(cached_ids)
        self.slot[cached_ids] = torch.arange(self.num_own, self.num_own + self.num_cached, dtype=dtype)
        self.tiers = TieredRows(table, gpu_fraction, zero_copy, device)
        self.stats = CommStats()  # the minibatches' remote fetches
        self.remote = RemoteRows(rank, offsets, self.tiers.table, remote_bits, seed, all_to_all, self.stats,
                                 own_index)
        self.begin_epoch()

    def begin_epoch(self) -> None:
        """Start the epoch's account (``end_epoch``)."""
        self.stats.reset()
        self.tiers.bytes_served.update({tier: 0 for tier in self.tiers.bytes_served})
        self.rows, self.seconds = GatherCounts(), 0.0

    def account(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """This rank's account of the epoch so far (float64; ``FetchEpoch.of`` reads a sum of them)."""
        served, s = self.tiers.bytes_served, self.stats
        return torch.tensor([self.rows.local, self.rows.cached, self.rows.remote, s.bytes_sent, s.fp32_bytes_sent,
                             s.bytes_received, served["device"], served["host"]], dtype=torch.float64, device=device)

    def end_epoch(self, device: torch.device | str = "cpu", extra: Sequence[torch.Tensor] = ()) -> FetchEpoch:
        """The epoch's account summed over the ranks: a collective of the calling thread's default process group
        (every rank calls it, after its last ``gather`` of the epoch); each tensor of ``extra`` (float64, on
        ``device``), e.g. the epoch's accuracy counts, is summed in place in the same collective."""
        own = self.account(device)
        all_reduce_sum_together([own, *extra])
        return FetchEpoch.of(own, self.seconds)

    @property
    def table(self) -> torch.Tensor:
        """Every row the rank holds (own rows hottest first, then cached ones), on the host."""
        return self.tiers.table

    @property
    def dim(self) -> int:
        return self.tiers.dim

    def fetch(self, ids: torch.Tensor, key: tuple[int, ...] | None = None) -> PendingRows:
        """Where the rows of ``ids`` are: the table positions of those held, the others fetched from their owners
        (collective); ``key`` names the random stream of Low-bit remote rows (``RemoteRows.fetch``). The rows reach
        the device through ``batch_rows.BatchRows`` (a minibatch's buffer) or ``gather``."""
        t0 = time.perf_counter()
        ids = ids.to(torch.long)
        slots = self.slot[ids].to(torch.long)
        held = slots >= 0
        held_at, missing_at = held.nonzero().squeeze(1), (~held).nonzero().squeeze(1)
        held_slots = slots[held_at]
        got, order = self.remote.fetch_unordered(ids[missing_at], key)
        own = int((held_slots < self.num_own).sum())
        self.rows.add(GatherCounts(own, held_at.numel() - own, missing_at.numel()))
        self.seconds += time.perf_counter() - t0
        return PendingRows(ids.shape[0], held_slots, held_at, got, missing_at[order])

    def gather(self, ids: torch.Tensor, key: tuple[int, ...] | None = None) -> tuple[torch.Tensor, GatherCounts]:
        """The rows of ``ids`` in that order, on the training device, and how many came from own rows, the cache
        and the owners; ``key`` as ``fetch``'s."""
        before = GatherCounts(self.rows.local, self.rows.cached, self.rows.remote)
        rows = gather_once(self, self.fetch(ids, key))
        return rows, GatherCounts(self.rows.local - before.local, self.rows.cached - before.cached,
                                  self.rows.remote - before.remote)
