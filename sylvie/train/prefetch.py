"""The sampling thread: minibatches are sampled and their rows fetched in the background while the current one
computes.

One worker thread serves the whole run and runs every job in the order submitted: the sampling of every
minibatch (and the simulation cache policy's pre-sampling) happens in that one thread, whatever ``prefetch`` is.
That is what makes sampling reproducible: DGL seeds each thread's generator from the seed and the thread's number
in the process, so a given seed draws the same neighbourhoods only in the same thread of a process, and only
when that thread samples without OpenMP workers (measured with DGL 1.1.3): the thread samples alone, while the
main thread keeps its threads for the model. Its collectives (the row fetches) go to a process group of their own,
so they never interleave with the main thread's gradient all-reduce.

``pipeline.map(produce, n)`` yields ``produce(0) .. produce(n - 1)`` in order, keeping ``depth`` items ahead of
the consumer (0: each one produced when asked). The time the consumer waits is counted in ``waited``. Every wait
is bounded by ``timeout``; an error in the thread is raised in the consumer.
"""
from __future__ import annotations

import concurrent.futures
import time
from collections import deque
from collections.abc import Callable, Iterator

from sylvie.errors import SylvieError


class SamplingPipeline:
    def __init__(self, depth: int, timeout: float, initializer: Callable[[], None] | None = None):
        self.depth, self.timeout = depth, timeout
        self.waited = 0.0
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sylvie-sampler",
                                                             initializer=initializer)

    def _result(self, future: concurrent.futures.Future, what: str):
        t0 = time.perf_counter()
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise SylvieError(f"the sampling thread delivered no {what} in {self.timeout:.0f} s") from None
        finally:
            self.waited += time.perf_counter() - t0

    def run(self, job: Callable[[], object], what: str = "result"):
        """Run ``job`` in the sampling thread and wait for it."""
        return self._result(self._worker.submit(job), what)

    def map(self, produce: Callable[[int], object], n: int, what: str = "minibatch") -> Iterator:
        pending: deque = deque()
        submitted = 0
        try:
            for i in range(n):
                while submitted < min(n, i + 1 + self.depth):
                    pending.append(self._worker.submit(produce, submitted))
                    submitted += 1
                yield self._result(pending.popleft(), f"{what} {i + 1} of {n}")
        finally:
            for f in pending:  # an early stop (an error): drop what is not running yet
                f.cancel()

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
