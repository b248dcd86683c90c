"""Counters of time spent in collectives and bytes moved, reset every epoch."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class CommStats:
    seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0

    def reset(self) -> None:
        self.seconds, self.bytes_sent, self.bytes_received = 0.0, 0, 0

    @contextmanager
    def timed(self, sent: int = 0, received: int = 0):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - t0
            self.bytes_sent += sent
            self.bytes_received += received
