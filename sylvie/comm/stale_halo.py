"""What a stale (pipelined) round computes with: the halo rows and gradients of the previous round.

Per (layer, direction), the rows received or still in flight, each with the halo plan it belongs to (under
boundary-node sampling every round has its own); ``take`` waits only if they are still on the wire. Optional
exponential smoothing (PipeGCN) blends rows only of the same plan.
"""
from __future__ import annotations

import torch

from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_wire import InFlight


class StaleHalo:
    """What the next epoch computes with, per (layer, direction): received rows, or an exchange in flight, and the
    plan they belong to."""

    def __init__(self, smoothing: float = 0.0):
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing = smoothing
        self.incoming: dict[tuple[int, int], tuple[torch.Tensor | InFlight, HaloPlan | None]] = {}
        self.used: dict[tuple[int, int], tuple[torch.Tensor, HaloPlan | None]] = {}

    def put(self, layer: int, direction: int, item: torch.Tensor | InFlight, plan: HaloPlan | None = None) -> None:
        """Keep rows (from a synchronous exchange; also the new smoothing state) or a background exchange, and the
        plan whose rows they are."""
        if isinstance(item, torch.Tensor):
            item = item.detach()
            self.used[(layer, direction)] = (item if self.smoothing > 0 else None, plan)
        self.incoming[(layer, direction)] = (item, plan)

    def take(self, layer: int, direction: int) -> torch.Tensor:
        """The rows kept for this epoch (waiting for them if they are still on the wire), smoothed; ``used_plan``
        tells whose rows they are."""
        entry = self.incoming.pop((layer, direction), None)
        if entry is None:
            raise RuntimeError(f"layer {layer}: a stale epoch found no halo data from the previous epoch; the "
                               f"epoch before a stale one must keep its data (begin_round(..., keep=True))")
        item, plan = entry
        rows = item.wait() if isinstance(item, InFlight) else item
        prev, prev_plan = self.used.get((layer, direction), (None, None))
        if self.smoothing > 0 and prev is not None and prev_plan is plan and prev.shape == rows.shape:
            rows = self.smoothing * prev + (1.0 - self.smoothing) * rows
        # the rows themselves only where the next take smooths with them: kept, they are a halo's rows held
        # across the step for nothing (4 of them on a 3-layer model, a tensor over every halo row each)
        self.used[(layer, direction)] = (rows if self.smoothing > 0 else None, plan)
        return rows.detach()

    def used_plan(self, layer: int, direction: int) -> HaloPlan | None:
        """The plan of the rows ``take`` gave last for (layer, direction)."""
        return self.used[(layer, direction)][1]

    def clear_pending(self) -> None:
        """Finish and drop whatever nobody will use (collectives must complete on every rank)."""
        for item, _ in self.incoming.values():
            if isinstance(item, InFlight):
                item.wait()
        self.incoming.clear()
