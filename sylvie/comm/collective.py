"""The collectives of a run: the all-to-all the halo exchange sends with (torch.distributed by default, injectable)
and the all-reduce of sums, made of all-to-alls on the CPU. An all-to-all is a callable ``(recv, send, recv_sizes,
send_sizes, async_op) -> work``, so tests plug in a simulator of several ranks in one process.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

AllToAll = Callable[[torch.Tensor, torch.Tensor, list[int], list[int], bool], object]


# Up to this many bytes, an all-reduce on the CPU is one all-to-all: every rank sends the whole tensor to every peer
# and adds up the copies it gets. gloo's all-reduce is a ring of 2(P-1) steps, each a wake-up of the next rank: for
# a small tensor it costs several all-to-alls. Above it the ring sends fewer bytes ((2(P-1)/P x the tensor against
# (P-1) x) and wins. benchmarks/collectives.py chose this bound: benchmarks/records/2026-11-27_collectives_2core-vm.md.
ONE_STEP_BYTES = 128 * 1024


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over the ranks in place (nothing to do in a single process); returns it. Every rank gets the same
    bits. A small tensor on the CPU (gloo) takes one all-to-all (``all_reduce_by_all_to_all``), anything else the
    backend's all-reduce."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        if (t.device.type == "cpu" and t.numel() * t.element_size() <= ONE_STEP_BYTES
                and dist.get_backend() == "gloo"):
            all_reduce_by_all_to_all(t, dist.get_world_size(), _all_to_all_in_equal_parts)
        else:
            dist.all_reduce(t)
    return t


def _all_to_all_in_equal_parts(recv: torch.Tensor, send: torch.Tensor) -> None:
    dist.all_to_all_single(recv, send)


def all_reduce_by_all_to_all(t: torch.Tensor, world: int,
                             exchange: Callable[[torch.Tensor, torch.Tensor], None]) -> torch.Tensor:
    """Sum ``t`` over ``world`` ranks in place with one ``exchange(recv, send)``, an all-to-all in ``world`` equal
    parts (part j of ``send`` to rank j, part j of ``recv`` from rank j): every rank sends all of ``t`` to every
    rank and adds up the copies in rank order, one after the other, so that every rank holds the same bits."""
    if not t.is_contiguous():
        return t.copy_(all_reduce_by_all_to_all(t.contiguous(), world, exchange))
    flat = t.view(-1)
    n = flat.numel()
    copies = torch.empty((world, n), dtype=t.dtype)
    exchange(copies.view(-1), flat.expand(world, n).contiguous().view(-1))
    flat.copy_(copies[0])
    for copy in copies[1:]:
        flat.add_(copy)
    return t


def all_reduce_sum_together(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Sum every tensor of ``tensors`` (one dtype, one device) over the ranks in place, in one collective; returns the
    flat sum of them all, in order."""
    flat = torch.cat([t.reshape(-1) for t in tensors])
    all_reduce_sum(flat)
    offset = 0
    for t in tensors:
        t.copy_(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return flat


def torch_all_to_all(group=None) -> AllToAll:
    """``dist.all_to_all_single`` on ``group`` (None: the default process group)."""
    def all_to_all(recv, send, recv_sizes, send_sizes, async_op=False):
        return dist.all_to_all_single(recv, send, recv_sizes, send_sizes, group=group, async_op=async_op)

    return all_to_all
