"""Boundary-node sampling (BNS-GCN, Wan et al., MLSys 2022): each epoch every rank keeps a random share p of its
halo rows; the rest and their edges drop out of that epoch, so its exchanges carry only the kept rows.

Every decision comes from a generator seeded by (run seed, epoch, receiver, owner), so sender and receiver agree
without a message and any epoch's sample can be drawn ahead (as pipelining needs). p = 1 is the full plan itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sylvie.comm.halo_plan import HaloPlan

STREAM = 0xB0B5  # separates these generators from any other stream seeded by the run seed


@dataclass(frozen=True)
class BoundarySample:
    """One epoch's sample of a rank's halo rows: the sub-plan its exchanges use and which halo rows it keeps."""
    epoch: int
    plan: HaloPlan  # restricted to the kept rows (send list and halo rows); the full plan when all are kept
    halo_kept: torch.Tensor  # indices of the kept halo rows among the rank's halo rows, ascending (int64)
    every_halo_row: bool  # this rank keeps all its halo rows: the epoch's graph is its whole partition (peers may
    # still drop rows of its send list; with both whole, ``plan`` is the full plan itself)


def keep_draw(seed: int, epoch: int, receiver: int, owner: int, rows: int, share: float) -> np.ndarray:
    """Whether receiver ``receiver`` keeps each of its ``rows`` halo rows owned by ``owner`` at ``epoch`` (bool);
    the owner draws the same for its send list to the receiver."""
    uniforms = np.random.default_rng([STREAM, seed, epoch, receiver, owner]).random(rows)
    return uniforms < share


class BoundarySampler:
    """The per-epoch ``BoundarySample`` of one rank with full halo plan ``plan``, keeping a share ``share`` (0 < p
    <= 1) of the halo rows. Samples are kept for the last few epochs, so the plan a pipelined epoch sent ahead for
    is the very object the next epoch computes with."""

    KEEP = 3  # epochs remembered

    def __init__(self, plan: HaloPlan, share: float, seed: int, rank: int):
        if not 0.0 < share <= 1.0:
            raise ValueError(f"train.boundary_sampling must be above 0 and at most 1, got {share}")
        self.plan, self.share, self.seed, self.rank = plan, share, seed, rank
        self._samples: dict[int, BoundarySample] = {}
        self._all = torch.arange(plan.num_halo, device=plan.send_index.device)

    def sample(self, epoch: int) -> BoundarySample:
        """The sample of ``epoch`` (the same object when asked again while remembered)."""
        if epoch not in self._samples:
            self._samples[epoch] = self._draw(epoch)
            for old in sorted(self._samples)[:-self.KEEP]:
                del self._samples[old]
        return self._samples[epoch]

    def _draw(self, epoch: int) -> BoundarySample:
        plan = self.plan
        if self.share >= 1.0 or plan.num_halo + len(plan.send_index) == 0:
            return BoundarySample(epoch, plan, self._all, True)
        me, world = self.rank, len(plan.send_counts)
        # receiver: my halo rows, owner by owner; owner: my send list, peer by peer (each in the receiver's order)
        recv_keep = np.concatenate([keep_draw(self.seed, epoch, me, j, plan.recv_counts[j], self.share)
                                    for j in range(world)])
        send_keep = np.concatenate([keep_draw(self.seed, epoch, r, me, plan.send_counts[r], self.share)
                                    for r in range(world)])
        every_halo_row = bool(recv_keep.all())
        if every_halo_row and send_keep.all():
            return BoundarySample(epoch, plan, self._all, True)
        sub = plan.restrict(send_keep, recv_keep)
        return BoundarySample(epoch, sub, self._all if every_halo_row else sub.halo_rows, every_halo_row)
