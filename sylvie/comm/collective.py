"""The all-to-all the halo exchange sends with: torch.distributed by default, injectable for tests.

An all-to-all is a callable ``(recv, send, recv_sizes, send_sizes, async_op) -> work``: it sends
``send_sizes[j]`` elements of ``send`` to rank j and receives ``recv_sizes[j]`` from j into ``recv``; with
``async_op`` it returns a handle whose ``wait()`` completes it, otherwise None. A simulator of several ranks
in one process (tests) plugs in here, so the exchange's autograd runs without torchrun.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

AllToAll = Callable[[torch.Tensor, torch.Tensor, list[int], list[int], bool], object]


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over the ranks in place (nothing to do in a single process); returns it."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t)
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
