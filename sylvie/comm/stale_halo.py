"""What a stale (pipelined) round computes with: the halo rows and gradients of the previous round.

Per (layer, direction), rows received by a synchronous round or an exchange still in flight in the
background; ``take`` waits only if they are still on the wire. Optional exponential smoothing (PipeGCN): the
rows used are ``s * rows used last round + (1 - s) * rows received``.
"""
from __future__ import annotations

import torch

from sylvie.comm.halo_wire import InFlight


class StaleHalo:
    """What the next epoch computes with, per (layer, direction): received rows, or an exchange in flight."""

    def __init__(self, smoothing: float = 0.0):
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing = smoothing
        self.incoming: dict[tuple[int, int], torch.Tensor | InFlight] = {}
        self.used: dict[tuple[int, int], torch.Tensor] = {}

    def put(self, layer: int, direction: int, item: torch.Tensor | InFlight) -> None:
        """Keep rows (from a synchronous exchange; also the new smoothing state) or a background exchange."""
        if isinstance(item, torch.Tensor):
            item = item.detach()
            self.used[(layer, direction)] = item
        self.incoming[(layer, direction)] = item

    def take(self, layer: int, direction: int) -> torch.Tensor:
        """The rows kept for this epoch (waiting for them if they are still on the wire), smoothed."""
        item = self.incoming.pop((layer, direction), None)
        if item is None:
            raise RuntimeError(f"layer {layer}: a stale epoch found no halo data from the previous epoch; the "
                               f"epoch before a stale one must keep its data (begin_round(..., keep=True))")
        rows = item.wait() if isinstance(item, InFlight) else item
        prev = self.used.get((layer, direction))
        if self.smoothing > 0 and prev is not None and prev.shape == rows.shape:
            rows = self.smoothing * prev + (1.0 - self.smoothing) * rows
        self.used[(layer, direction)] = rows
        return rows.detach()

    def clear_pending(self) -> None:
        """Finish and drop whatever nobody will use (collectives must complete on every rank)."""
        for item in self.incoming.values():
            if isinstance(item, InFlight):
                item.wait()
        self.incoming.clear()
