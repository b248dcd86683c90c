"""The halo plan: which inner rows each peer needs from this rank, and where received rows go.

Built once from a shard's halo table (halo rows sorted by owner, so each peer's rows are one block) with two
all-to-alls (counts, row indices). It gathers the rows to send and adds returned gradients into the inner rows.
``restrict`` gives the plan of a subset (boundary-node sampling).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist


@dataclass
class HaloPlan:
    send_index: torch.Tensor  # inner rows to send, concatenated peer by peer (int64)
    send_counts: list[int]  # rows sent to each peer
    recv_counts: list[int]  # halo rows received from each peer (halo rows are ordered by owner)
    num_inner: int
    num_halo: int
    # a restricted plan (``restrict``): which of the full plan's halo rows it keeps (ascending), and how many the
    # full plan has; None for the full plan
    halo_rows: torch.Tensor | None = None
    full_num_halo: int | None = None

    @classmethod
    def build(cls, halo_owner_index: np.ndarray, recv_counts: Sequence[int], num_inner: int,
              device: torch.device | str = "cpu") -> HaloPlan:
        """``halo_owner_index[h]``: halo row h's index among its owner's inner rows (halo rows sorted by owner);
        ``recv_counts[j]``: how many halo rows rank j owns. Every rank calls it (two all-to-alls)."""
        world = dist.get_world_size() if dist.is_initialized() else 1
        if world != len(recv_counts):
            raise RuntimeError(f"world size {world} differs from the {len(recv_counts)} ranks the halo table names")
        if world == 1:
            return cls(torch.zeros(0, dtype=torch.long, device=device), [0], [0], num_inner, 0)
        needed = torch.tensor(halo_owner_index, dtype=torch.long, device=device)
        recv = torch.tensor(list(recv_counts), dtype=torch.long, device=device)
        send = torch.empty_like(recv)
        dist.all_to_all_single(send, recv)
        send_counts = send.tolist()
        send_index = torch.empty(sum(send_counts), dtype=torch.long, device=device)
        dist.all_to_all_single(send_index, needed, send_counts, [int(c) for c in recv_counts])
        return cls(send_index, send_counts, [int(c) for c in recv_counts], num_inner, len(halo_owner_index))

    def restrict(self, send_keep: np.ndarray, recv_keep: np.ndarray) -> HaloPlan:
        """The plan of a subset of the rows: ``send_keep`` (bool, one per row of ``send_index``) which rows still
        go to each peer, ``recv_keep`` (bool, one per halo row) which halo rows still arrive. The two must agree
        across ranks: peer j keeps the rows of its send list to r that r keeps of its halo rows from j."""
        device = self.send_index.device
        send_index = self.send_index[torch.from_numpy(send_keep).to(device)]
        halo_rows = torch.from_numpy(np.flatnonzero(recv_keep)).to(device)
        return HaloPlan(send_index, _segment_sums(send_keep, self.send_counts),
                        _segment_sums(recv_keep, self.recv_counts), self.num_inner, int(halo_rows.shape[0]),
                        halo_rows, self.num_halo)

    def of_rows(self, inner_keep: np.ndarray, halo_keep: np.ndarray) -> HaloPlan:
        """The plan of a subset of the rows in a row space of their own (a typed graph's rows of some node types):
        ``inner_keep`` (bool, one per inner row) and ``halo_keep`` (bool, one per halo row) select them, and its
        inner rows are the kept ones in their order (its send list renumbered into them), its halo rows the kept
        ones in theirs. No collective: a peer keeps the rows of its send list that this rank keeps of its halo rows
        when both select by a property of the node (its type), as ``restrict`` needs."""
        send_index = self.send_index.cpu().numpy()
        send_keep = inner_keep[send_index]
        position = np.cumsum(inner_keep) - 1  # an inner row's index among the kept ones
        device = self.send_index.device
        return HaloPlan(torch.from_numpy(position[send_index[send_keep]]).to(device),
                        _segment_sums(send_keep, self.send_counts), _segment_sums(halo_keep, self.recv_counts),
                        int(inner_keep.sum()), int(halo_keep.sum()))

    def gather(self, inner: torch.Tensor) -> torch.Tensor:
        """The inner rows peers need, peer after peer."""
        return inner[self.send_index]

    def scatter_add(self, grad_sent: torch.Tensor) -> torch.Tensor:
        """Inner-row gradients from the gradients peers sent back for the rows they received."""
        grad_inner = grad_sent.new_zeros((self.num_inner,) + tuple(grad_sent.shape[1:]))
        grad_inner.index_add_(0, self.send_index, grad_sent)
        return grad_inner


def _segment_sums(mask: np.ndarray, counts: list[int]) -> list[int]:
    """True values of ``mask`` in each of its consecutive segments of lengths ``counts``."""
    ends = np.cumsum([0, *counts])
    total = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    return [int(c) for c in total[ends[1:]] - total[ends[:-1]]]
