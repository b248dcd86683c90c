"""The sampling thread: minibatches are sampled and their rows fetched in the background while the current one
computes.

One worker thread runs every job in order, so the row fetches (collectives, on a process group of their own) keep
the same order on every rank. ``pipeline.map(produce, n)`` yields items in order, ``depth`` ahead; the consumer's
wait is counted, bounded by ``timeout``, and an error in the thread is raised in the consumer.
"""
from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from sylvie.errors import SylvieError


class SamplingPipeline:
    def __init__(self, depth: int, timeout: float | None):
        self.depth, self.timeout = depth, timeout
        self.waited = 0.0
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        # a daemon: a worker stuck in a collective with a failed peer never keeps the process from exiting
        self._thread = threading.Thread(target=self._serve, name="sylvie-sampler", daemon=True)
        self._thread.start()

    def begin_epoch(self) -> None:
        """Start counting the consumer's waits afresh."""
        self.waited = 0.0

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # raised in the consumer
                future.set_exception(e)

    def _submit(self, fn: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((future, fn, args))
        return future

    def _result(self, future: concurrent.futures.Future, what: str, timeout: float | None):
        t0 = time.perf_counter()
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise SylvieError(f"the sampling thread delivered no {what} in {timeout:.0f} s") from None
        finally:
            self.waited += time.perf_counter() - t0

    def run(self, job: Callable[[], object], what: str = "result", local: bool = False):
        """Run ``job`` in the sampling thread and wait for it; ``local``: it waits for no peer (its own time is
        the work's, so no timeout applies)."""
        return self._result(self._submit(job), what, None if local else self.timeout)

    def map(self, produce: Callable[[int], object], n: int, what: str = "minibatch") -> Iterator:
        pending: deque = deque()
        submitted = 0
        try:
            for i in range(n):
                while submitted < min(n, i + 1 + self.depth):
                    pending.append(self._submit(produce, submitted))
                    submitted += 1
                yield self._result(pending.popleft(), f"{what} {i + 1} of {n}", self.timeout)
        finally:
            for f in pending:  # an early stop (an error): drop what is not running yet
                f.cancel()

    def close(self) -> None:
        """The thread ends after the job it runs (if any); it is not waited for."""
        self._jobs.put(None)
