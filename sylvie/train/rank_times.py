"""Every rank's compute and wait time of an epoch, its page faults and its peak memory, gathered in the epoch's one
all-reduce: each rank writes its own numbers into its slots of a zero tensor, and the sum over the ranks is every
rank's numbers on every rank."""
from __future__ import annotations

import resource
import sys

import torch

SLOTS = ("rank_compute_time", "rank_wait_time", "rank_minor_faults", "rank_peak_rss")


def minor_faults() -> int:
    """This process's minor page faults so far (a page the kernel mapped in without reading the disk: memory first
    touched, mostly)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def peak_rss() -> int:
    """This process's peak resident set so far, in bytes (the kernel's high-water mark)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib if sys.platform == "darwin" else kib * 1024  # bytes on macOS, KiB on Linux


def rank_times_slots(rank: int, world: int, compute: float, wait: float, device,
                     faults: int = 0) -> torch.Tensor:
    """[4, world] float64: this rank's ``compute`` and ``wait`` seconds, its minor page ``faults`` in the epoch and
    its peak RSS so far in column ``rank``, zeros elsewhere (to be summed over the ranks, e.g. as an ``extra`` of an
    ``end_epoch``)."""
    slots = torch.zeros(len(SLOTS), world, dtype=torch.float64, device=device)
    slots[0, rank], slots[1, rank], slots[2, rank], slots[3, rank] = compute, wait, faults, peak_rss()
    return slots


def rank_times(summed: torch.Tensor) -> dict[str, list]:
    """The summed slots as the epoch record's fields: every rank's compute and wait time, page faults and peak
    RSS (bytes), rank 0 first."""
    compute, wait, faults, rss = summed.tolist()
    return {"rank_compute_time": compute, "rank_wait_time": wait, "rank_minor_faults": [int(f) for f in faults],
            "rank_peak_rss": [int(r) for r in rss]}
