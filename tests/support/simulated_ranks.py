"""Several ranks in one process: one thread per rank, joined by an in-memory all-to-all.

``SimulatedRanks(P).run(fn)`` calls ``fn(rank, all_to_all)`` in P threads and returns their results; the
``all_to_all`` given to each rank has the signature of ``sylvie.comm.collective.AllToAll``. A background
(async) exchange is carried out when it is waited on: every rank waits on its exchanges in the same order,
as the halo exchange does.
"""
from __future__ import annotations

import threading

import torch


class _Deferred:
    def __init__(self, run):
        self._run, self._done = run, False

    def wait(self):
        if not self._done:
            self._run()
            self._done = True
        return True


class SimulatedRanks:
    def __init__(self, world: int, timeout_s: float = 60):
        self.world = world
        self._barrier = threading.Barrier(world, timeout=timeout_s)
        self._slots: list = [None] * world

    def _exchange(self, rank, recv, send, recv_sizes, send_sizes):
        offsets = [0]
        for s in send_sizes:
            offsets.append(offsets[-1] + s)
        self._slots[rank] = [send[offsets[j]:offsets[j + 1]].clone() for j in range(self.world)]
        self._barrier.wait()
        chunks = [self._slots[j][rank] for j in range(self.world)]
        assert [c.numel() for c in chunks] == list(recv_sizes), "receive sizes disagree with what peers send"
        if chunks:
            recv.copy_(torch.cat(chunks))
        self._barrier.wait()  # nobody overwrites a slot before everyone has read it

    def all_to_all(self, rank: int):
        def all_to_all(recv, send, recv_sizes, send_sizes, async_op=False):
            if async_op:
                return _Deferred(lambda: self._exchange(rank, recv, send, recv_sizes, send_sizes))
            self._exchange(rank, recv, send, recv_sizes, send_sizes)
            return None

        return all_to_all

    def run(self, fn):
        results, errors = [None] * self.world, []

        def body(rank):
            try:
                results[rank] = fn(rank, self.all_to_all(rank))
            except BaseException as e:  # noqa: BLE001 - reported below, with the rank
                errors.append((rank, e))
                self._barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self.world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            rank, e = min(errors, key=lambda x: not isinstance(x[1], threading.BrokenBarrierError))
            raise AssertionError(f"rank {rank} failed: {type(e).__name__}: {e}") from e
        return results
