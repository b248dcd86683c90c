"""Rows of vertices other ranks own, fetched on demand: the communication primitive of sampled training.

``fetch(ids)`` is collective: all-to-alls of counts, ids, then rows (fp32, fp16 or Low-bit through a ``Wire``), the
rows returned in the order of ``ids``. ``key`` names the fetch's random stream, so a resumed run rounds as the
uninterrupted one did. ``send_to_owners`` is the way back (a learnt table's gradient rows).
"""
from __future__ import annotations

import time

import torch

from sylvie.comm.collective import AllToAll, torch_all_to_all
from sylvie.comm.gather_cpu import gather_rows
from sylvie.comm.halo_wire import BACKWARD, FORWARD, Wire
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.stats import CommStats
from sylvie.errors import SylvieError

HALF_PRECISION = 16


class RemoteRows:
    def __init__(self, rank: int, part_offsets, own_rows: torch.Tensor, bits: int = FULL_PRECISION, seed: int = 0,
                 all_to_all: AllToAll | None = None, stats: CommStats | None = None,
                 own_index: torch.Tensor | None = None):
        self.rank, self.bits, self.seed = rank, bits, seed
        self.part_offsets = torch.as_tensor(part_offsets, dtype=torch.long)
        self.world = len(self.part_offsets) - 1
        owned = int(self.part_offsets[rank + 1] - self.part_offsets[rank])
        if own_rows.shape[0] < owned or (own_index is None and own_rows.shape[0] != owned):
            raise ValueError(f"rank {rank} holds {own_rows.shape[0]} rows but owns {owned} ids")
        self.own_rows, self.own_index = own_rows, own_index
        self.all_to_all = all_to_all or torch_all_to_all()
        self.stats = stats or CommStats()
        self.calls = 0

    def owner(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.part_offsets, ids, right=True) - 1

    def _own(self, local: torch.Tensor) -> torch.Tensor:
        rows = local if self.own_index is None else self.own_index[local]
        # the numba kernel on the host: parallel, and 2-3x torch's indexing on a minibatch's answer
        if rows.numel() and self.own_rows.device.type == "cpu" and self.own_rows.is_contiguous():
            return torch.from_numpy(gather_rows(self.own_rows.numpy(), rows.numpy()))
        return self.own_rows[rows]

    def fetch(self, ids: torch.Tensor, key: tuple[int, ...] | None = None) -> torch.Tensor:
        """The rows of ``ids`` (int64, any owners), in that order; ``key``: the random stream of Low-bit rounding
        (default: the number of earlier fetches)."""
        got, order = self.fetch_unordered(ids, key)
        rows = torch.empty_like(got)
        rows[order] = got
        return rows

    def fetch_unordered(self, ids: torch.Tensor, key: tuple[int, ...] | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """``fetch`` as the rows arrive, by owner: ``(rows, order)`` with ``rows[i]`` the row of ``ids[order[i]]``,
        for a caller that places them itself (in one pass, with the rest of its rows)."""
        ids = ids.to(torch.long)
        owners = self.owner(ids)
        if ids.numel() and (owners.min() < 0 or owners.max() >= self.world):
            raise ValueError(f"ids outside [0, {int(self.part_offsets[-1])})")
        key = (self.seed, self.rank, *(key if key is not None else (self.calls,)))
        self.calls += 1
        if self.world == 1:
            return self._own(ids - self.part_offsets[0]), torch.arange(ids.numel())  # indexing copies
        order, asked, send_counts, recv_counts = self._route(ids, owners)
        answer = self._own(asked - self.part_offsets[self.rank])
        return self._send_rows(answer.contiguous(), recv_counts, send_counts, key), order

    def _route(self, ids: torch.Tensor, owners: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list, list]:
        """Each id to its owner (one all-to-all of counts, one of ids): ``ids``' order by owner, the ids this rank
        got from each peer (by peer), and the counts sent to and received from each."""
        order = torch.argsort(owners, stable=True)
        want = ids[order]
        send_counts = torch.bincount(owners, minlength=self.world)
        recv_counts = torch.empty_like(send_counts)
        t0 = time.perf_counter()
        self.all_to_all(recv_counts, send_counts, [1] * self.world, [1] * self.world, False)
        asked = torch.empty(int(recv_counts.sum()), dtype=torch.long)
        self.all_to_all(asked, want, recv_counts.tolist(), send_counts.tolist(), False)
        self.stats.add(seconds=time.perf_counter() - t0, sent=8 * want.numel(), received=8 * asked.numel(),
                       fp32_sent=8 * want.numel())
        return order, asked, send_counts.tolist(), recv_counts.tolist()

    def send_to_owners(self, ids: torch.Tensor, rows: torch.Tensor, bits: int = FULL_PRECISION,
                       key: tuple[int, ...] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row of ``rows`` (fp32, one per id of ``ids``) to the owner of its id; returns what this rank
        received: the local indices (among its own ids) and the rows. ``bits`` below 32: rows travel through the
        Low-bit Module (its backward direction; ``key`` names the random stream). Collective, like ``fetch``."""
        ids = ids.to(torch.long)
        if self.world == 1:
            return ids - self.part_offsets[0], rows
        order, got_ids, send, recv = self._route(ids, self.owner(ids))
        if bits != FULL_PRECISION:
            wire = Wire(bits, (self.seed, self.rank, *key), 0, self.stats, self.all_to_all)
            return got_ids - self.part_offsets[self.rank], wire.send(rows[order].to(torch.float32).contiguous(),
                                                                     send, recv, BACKWARD)
        dim = rows.shape[1]
        got = torch.empty((sum(recv), dim), dtype=torch.float32)
        t0 = time.perf_counter()
        self.all_to_all(got.reshape(-1), rows[order].to(torch.float32).contiguous().reshape(-1),
                        [c * dim for c in recv], [c * dim for c in send], False)
        self.stats.add(seconds=time.perf_counter() - t0, sent=4 * rows.numel(), received=4 * got.numel(),
                       fp32_sent=4 * rows.numel())
        return got_ids - self.part_offsets[self.rank], got

    def _send_rows(self, answer: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                   key: tuple[int, ...]) -> torch.Tensor:
        if self.bits != HALF_PRECISION:
            wire = Wire(self.bits, key, 0, self.stats, self.all_to_all)
            return wire.send(answer, send_counts, recv_counts, FORWARD)
        dim = answer.shape[1]
        t0 = time.perf_counter()
        half = answer.to(torch.float16)
        if answer.numel() and not bool(torch.isfinite(half).all()) and bool(torch.isfinite(answer).all()):
            raise SylvieError(f"rank {self.rank}: feature values beyond fp16's range (|x| > 65504) cannot travel at "
                              f"sampling.remote_bits 16; use 32, or a Low-bit width (scaled per row)")
        half = half.view(torch.uint8)  # bytes, so the all-to-all moves any dtype alike
        recv = torch.empty(sum(recv_counts) * dim * 2, dtype=torch.uint8, device=answer.device)
        t1 = time.perf_counter()
        self.all_to_all(recv, half.reshape(-1), [c * dim * 2 for c in recv_counts],
                        [c * dim * 2 for c in send_counts], False)
        t2 = time.perf_counter()
        rows = recv.view(torch.float16).reshape(-1, dim).to(torch.float32)
        self.stats.add(seconds=t2 - t1, codec_seconds=t1 - t0 + time.perf_counter() - t2, sent=half.numel(),
                       received=recv.numel(), fp32_sent=answer.numel() * 4)
        return rows
