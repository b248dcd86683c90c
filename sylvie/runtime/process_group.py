"""Process-group set-up from the torchrun environment (gloo on CPU, nccl on GPU, gloo on a GPU ranks share)."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from sylvie.comm.collective import all_reduce_sum  # noqa: F401 - re-exported for the trainers
from sylvie.errors import SylvieError
from sylvie.formats.rank_failures import record_exception
from sylvie.runtime.freed_memory import return_freed_memory
from sylvie.runtime.peer_watchdog import PeerWatchdog, collective_timeout


@dataclass
class Context:
    rank: int
    world: int
    device: torch.device
    backend: str


def device_and_backend(use_cuda: bool, local_rank: int, local_world: int, devices: int) -> tuple[str, str]:
    """A rank's device and process-group backend: the CPU and gloo; or GPU ``local_rank`` and nccl, one GPU per
    local rank; or, with more local ranks than GPUs, GPU ``local_rank % devices`` shared and gloo (NCCL refuses two
    ranks on one device; gloo stages CUDA tensors through host memory)."""
    if not use_cuda:
        return "cpu", "gloo"
    shared = max(local_world, local_rank + 1) > devices
    return f"cuda:{local_rank % devices}", "gloo" if shared else "nccl"


def init_distributed(device: str = "auto", timeout_s: float = 120) -> Context:
    """Join the process group torchrun described in the environment; a plain process is rank 0 of 1. A
    collective that waits longer than ``timeout_s`` for a peer fails."""
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise SylvieError("train.device is cuda but no CUDA device is visible; use device auto or cpu")
    where, backend = device_and_backend(use_cuda, int(os.environ.get("LOCAL_RANK", 0)),
                                        int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
                                        torch.cuda.device_count() if use_cuda else 0)
    dev = torch.device(where)
    if use_cuda:
        torch.cuda.set_device(dev)
    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    if dist.is_initialized():  # (joined here, or by a caller: its backend)
        return Context(dist.get_rank(), dist.get_world_size(), dev, dist.get_backend())
    return Context(0, 1, dev, backend)


def sum_over_ranks(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor summed over the ranks, back on the CPU; through the training ``device``, as nccl takes no CPU
    tensors."""
    return all_reduce_sum(t.to(device)).cpu()


def shutdown(finished: bool = False) -> None:
    """Leave the process group. After a finished run every rank first waits for the others (rank 0 writes
    the outputs last), so no rank tears down its connections while a peer still uses them."""
    if dist.is_initialized():
        if finished and dist.get_world_size() > 1:
            dist.barrier()
        dist.destroy_process_group()



def _one_rank_per_part(world: int, num_parts: int, partition_dir) -> None:
    if world != num_parts:
        raise SylvieError(f"{partition_dir} has {num_parts} parts but {world} ranks were started; launch with "
                          f"torchrun --nproc-per-node {num_parts} (or sylvie launch --ranks {num_parts}): one rank "
                          "per part")


def _rank_and_world() -> tuple[int, int]:
    if dist.is_initialized():  # a caller joined the group for us
        return dist.get_rank(), dist.get_world_size()
    return (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) if "RANK" in os.environ else (0, 1)


@contextlib.contextmanager
def peers_watched(timeout_s: float, stage: str = "train", startup_timeout_s: float = 60):
    """For a rank's whole stage: count this rank in and beat from now on (``PeerWatchdog``), yielding the watchdog for
    ``one_rank_per_part``. A stage enters it before its own checks and reads of its inputs, so that the start-up bound
    measures how far apart the processes started, not how long their reads took (longer on a large graph, and on one
    node than another)."""
    rank, world = _rank_and_world()
    watchdog = PeerWatchdog(rank, world, timeout_s, stage, startup_timeout_s)
    try:
        yield watchdog.start()
    finally:
        watchdog.stop()


@contextlib.contextmanager
def one_rank_per_part(device: str, timeout_s: float, num_parts: int, partition_dir, stage: str = "train",
                      startup_timeout_s: float = 60, watchdog: PeerWatchdog | None = None,
                      part_sized_memory: bool = True):
    """The ranks of a run with one rank per part of ``partition_dir``: check there is a rank for every part, watch the
    peers, wait for every rank to start (at most ``startup_timeout_s``, then fail naming the ranks missing) and join the
    process group (``device``), yielding the ``Context``. On leaving after a finished body (or an error every rank
    raised at once, ``on_every_rank``: training that diverged), every rank waits for the others, so that rank 0 writes
    what it must before torchrun stops the run."""
    # ``watchdog``: one from ``peers_watched``, or one started here. After the join a silent peer fails the run after
    # ``timeout_s``; the backend's own timeout, a little later, is the backstop for a collective that hangs while every
    # peer still beats. A rank beats while it waits at the end, then leaves the group; a failure is recorded for the
    # launcher before the group is left, that is before the peers see this rank's connections close.
    # ``part_sized_memory``: blocks of 1 MB or more that the rank frees go back to the system at once (``freed_memory``,
    # under glibc's malloc: a rank's tensors span its part); not for ranks that allocate the same minibatch-sized
    # tensors every step.
    if part_sized_memory:
        return_freed_memory()
    _one_rank_per_part(_rank_and_world()[1], num_parts, partition_dir)  # before waiting for anyone
    with contextlib.ExitStack() as stack:
        if watchdog is None:
            watchdog = stack.enter_context(peers_watched(timeout_s, stage, startup_timeout_s))
        finished = False
        try:
            watchdog.wait_for_peers()
            ctx = init_distributed(device, collective_timeout(timeout_s))
            if watchdog.deferred:  # the store is rank 0's, made as it joined: count in and watch from now on
                watchdog.start().wait_for_peers()
            yield ctx
            finished = True
        except Exception as e:
            record_exception(e)
            finished = getattr(e, "on_every_rank", False)
            raise
        finally:
            shutdown(finished)
