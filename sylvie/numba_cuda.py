"""numba-cuda, as every CUDA kernel of ours imports it: ``from sylvie.numba_cuda import cuda``.

Two repairs, applied before numba-cuda loads: numpy 2.5 removed ``np.row_stack``, which numba-cuda registers at its
first compile, so where numpy lacks it an equivalent is given back; and the CUDA simulator lacks the warp intrinsics
(``shfl_*_sync``, ``ballot_sync``, votes), so they are added there with CUDA's documented semantics, stricter than a
GPU where a lane is outside the mask.
"""
import threading

import numpy as np

if "row_stack" not in vars(np):
    def row_stack(tup, *, dtype=None, casting="same_kind"):
        """``np.vstack`` under the name numpy 2.5 removed (numba-cuda registers a kernel version of it)."""
        return np.vstack(tup, dtype=dtype, casting=casting)

    np.row_stack = row_stack

from numba import config as _numba_config  # noqa: E402
from numba import cuda  # noqa: E402

__all__ = ["cuda"]

_FULL = 0xFFFFFFFF
_WARP = 32
_POLL_S = 0.25
_ARRIVAL_BOUND_S = 300.0  # a lane that neither arrives nor ends in this long waits on something else: a deadlock


class _WarpExchange:
    """One rendezvous of the lanes of a mask in one warp of one block, reused call after call."""

    def __init__(self, warp: int, lanes: tuple[int, ...]):
        self.warp, self.lanes = warp, lanes
        self.cond = threading.Condition()
        self.slots: dict[int, object] = {}
        self.generation = 0
        self.snapshot: dict[int, object] = {}

    def _lanes_finished(self, block_threads: dict) -> list[int]:
        """The mask's lanes, still missing, whose simulator threads have run to their end.

        A lane whose thread the simulator has not created or started yet is not among them: it is still coming (the
        simulator starts a block's threads one by one, and on a loaded machine the last ones start seconds later).
        """
        finished = []
        for lane in self.lanes:
            thread = block_threads.get(self.warp * _WARP + lane)
            if lane not in self.slots and thread is not None and thread.sylvie_finished:
                finished.append(lane)
        return finished

    def values(self, lane: int, value, block_threads: dict) -> dict[int, object]:
        """Every lane's value at this call (blocks until all the mask's lanes have made it)."""
        with self.cond:
            self.slots[lane] = value
            generation = self.generation
            if len(self.slots) == len(self.lanes):
                self.snapshot, self.slots = self.slots, {}
                self.generation += 1
                self.cond.notify_all()
                return self.snapshot
            waited = 0.0
            while self.generation == generation:
                self.cond.wait(_POLL_S)
                waited += _POLL_S
                if self.generation != generation:
                    break
                finished = self._lanes_finished(block_threads)
                if finished:
                    raise RuntimeError(f"warp intrinsic: lanes {finished} of the mask exited before it (undefined "
                                       f"on a GPU)")
                if waited >= _ARRIVAL_BOUND_S:
                    missing = sorted(set(self.lanes) - set(self.slots))
                    raise RuntimeError(f"warp intrinsic: lanes {missing} of the mask did not reach it in "
                                       f"{_ARRIVAL_BOUND_S:.0f} s (waiting at another warp intrinsic or barrier?)")
            return self.snapshot  # nobody can start the next exchange before this lane has read this one


_exchanges_lock = threading.Lock()


def _exchange(module, mask: int, value):
    """(this lane, every lane's value at this call) for the calling simulator thread."""
    me = threading.current_thread()
    lane, warp = me.thread_id % _WARP, me.thread_id // _WARP
    mask &= _FULL
    if not (mask >> lane) & 1:
        raise RuntimeError(f"warp intrinsic: lane {lane} calls it with mask {mask:#010x}, which leaves it out")
    key = (tuple(me.blockIdx), warp, mask)
    with _exchanges_lock:
        exchanges = module.__dict__.setdefault("_sylvie_warp_exchanges", {})
        exchange = exchanges.get(key)
        if exchange is None:
            exchange = exchanges[key] = _WarpExchange(warp, tuple(j for j in range(_WARP) if (mask >> j) & 1))
    return lane, exchange.values(lane, value, me.sylvie_block_threads)


def _shuffle(module, mask, value, source: int, lane: int, values):
    if source not in values:
        raise RuntimeError(f"warp intrinsic: lane {lane} reads lane {source}, outside the mask {mask & _FULL:#010x}")
    return values[source]


def _shfl_sync(self, mask, value, src_lane):
    lane, values = _exchange(self, mask, value)
    return _shuffle(self, mask, value, int(src_lane) & 31, lane, values)


def _shfl_up_sync(self, mask, value, delta):
    lane, values = _exchange(self, mask, value)
    source = lane - int(delta)
    return value if source < 0 else _shuffle(self, mask, value, source, lane, values)


def _shfl_down_sync(self, mask, value, delta):
    lane, values = _exchange(self, mask, value)
    source = lane + int(delta)
    return value if source > 31 else _shuffle(self, mask, value, source, lane, values)


def _shfl_xor_sync(self, mask, value, lane_mask):
    lane, values = _exchange(self, mask, value)
    return _shuffle(self, mask, value, (lane ^ int(lane_mask)) & 31, lane, values)


def _ballot_sync(self, mask, predicate):
    """int32, as numba-cuda's ``ballot_sync`` returns: bit j set where lane j of the mask has a true predicate."""
    _, values = _exchange(self, mask, bool(predicate))
    word = sum(1 << j for j, p in values.items() if p)
    return np.int32(np.uint32(word).view(np.int32))


def _any_sync(self, mask, predicate):
    _, values = _exchange(self, mask, bool(predicate))
    return any(values.values())


def _all_sync(self, mask, predicate):
    _, values = _exchange(self, mask, bool(predicate))
    return all(values.values())


def _eq_sync(self, mask, predicate):
    _, values = _exchange(self, mask, bool(predicate))
    return len(set(values.values())) == 1


def _tracked_thread(init, run):
    """BlockThread's ``__init__`` and ``run``, made to keep a table of the block's threads and to mark their end.

    The table holds the threads the simulator has created for the block now running (it runs a launch's blocks one
    after another), by linear thread id; ``sylvie_finished`` is set once a thread's kernel body has returned or
    raised. A warp exchange reads both to tell a lane that exited from one not started yet.
    """
    def __init__(self, f, manager, blockIdx, threadIdx, debug):
        init(self, f, manager, blockIdx, threadIdx, debug)
        block = tuple(self.blockIdx)
        table = manager.__dict__.get("_sylvie_block_threads")
        if table is None or table[0] != block:
            table = manager._sylvie_block_threads = (block, {})
        table[1][self.thread_id] = self
        self.sylvie_block_threads = table[1]
        self.sylvie_finished = False

    def tracked_run(self):
        try:
            run(self)
        finally:
            self.sylvie_finished = True

    return __init__, tracked_run


if _numba_config.ENABLE_CUDASIM:
    from numba.cuda.simulator.kernel import BlockThread
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    if not getattr(BlockThread, "_sylvie_tracked", False):
        BlockThread.__init__, BlockThread.run = _tracked_thread(BlockThread.__init__, BlockThread.run)
        BlockThread._sylvie_tracked = True

    for _name, _function in (("shfl_sync", _shfl_sync), ("shfl_up_sync", _shfl_up_sync),
                             ("shfl_down_sync", _shfl_down_sync), ("shfl_xor_sync", _shfl_xor_sync),
                             ("ballot_sync", _ballot_sync), ("any_sync", _any_sync), ("all_sync", _all_sync),
                             ("eq_sync", _eq_sync)):
        if not hasattr(FakeCUDAModule, _name):
            setattr(FakeCUDAModule, _name, _function)
