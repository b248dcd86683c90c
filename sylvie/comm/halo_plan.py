"""The halo plan: which inner rows each peer needs from this rank, and where received rows go.

Built once from the shards. The halo table of a shard is sorted by owner, so the rows received from
peer j are the contiguous block of halo rows j owns; each rank tells every owner which of its inner
rows it needs (one all-to-all of counts, one of row indices), which gives the owner its send list.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from sylvie.partition.shard_format import Shard


@dataclass
class HaloPlan:
    send_index: torch.Tensor  # inner rows to send, concatenated peer by peer (int64)
    send_counts: list[int]  # rows sent to each peer
    recv_counts: list[int]  # halo rows received from each peer (halo rows are ordered by owner)
    num_inner: int
    num_halo: int

    @classmethod
    def build(cls, shard: Shard, device: torch.device | str = "cpu") -> HaloPlan:
        recv_counts = shard.halo_counts()
        world = dist.get_world_size() if dist.is_initialized() else 1
        if world != shard.num_parts:
            raise RuntimeError(f"world size {world} differs from the partition's {shard.num_parts} parts")
        if world == 1:
            return cls(torch.zeros(0, dtype=torch.long, device=device), [0], [0], shard.num_inner, 0)
        needed = torch.tensor(shard.halo_owner_index, dtype=torch.long, device=device)
        recv = torch.from_numpy(recv_counts).to(device)
        send = torch.empty_like(recv)
        dist.all_to_all_single(send, recv)
        send_counts = send.tolist()
        send_index = torch.empty(sum(send_counts), dtype=torch.long, device=device)
        dist.all_to_all_single(send_index, needed, send_counts, recv_counts.tolist())
        return cls(send_index, send_counts, recv_counts.tolist(), shard.num_inner, shard.num_halo)
