"""Every rank's compute and wait time of an epoch, gathered in the epoch's one all-reduce: each rank writes its own
two times into its slots of a zero tensor, and the sum over the ranks is every rank's times on every rank."""
from __future__ import annotations

import torch


def rank_times_slots(rank: int, world: int, compute: float, wait: float, device) -> torch.Tensor:
    """[2, world] float64: this rank's ``compute`` and ``wait`` seconds in column ``rank``, zeros elsewhere (to be
    summed over the ranks, e.g. as an ``extra`` of an ``end_epoch``)."""
    slots = torch.zeros(2, world, dtype=torch.float64, device=device)
    slots[0, rank], slots[1, rank] = compute, wait
    return slots


def rank_times(summed: torch.Tensor) -> dict[str, list[float]]:
    """The summed slots as the epoch record's fields: every rank's compute and wait time, rank 0 first."""
    compute, wait = summed.tolist()
    return {"rank_compute_time": compute, "rank_wait_time": wait}
