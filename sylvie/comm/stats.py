"""Counters of time spent in collectives, in encoding/decoding and of bytes moved, reset every epoch."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class CommStats:
    seconds: float = 0.0  # waited on: blocking collectives, and waits for background ones (exposed)
    hidden_seconds: float = 0.0  # background collectives' time that ran while this rank computed
    codec_seconds: float = 0.0  # encoding before and decoding after them (Low-bit Module)
    bytes_sent: int = 0  # on the wire
    bytes_received: int = 0
    fp32_bytes_sent: int = 0  # what the same rows would have taken in fp32

    def reset(self) -> None:
        self.seconds, self.hidden_seconds, self.codec_seconds = 0.0, 0.0, 0.0
        self.bytes_sent, self.bytes_received, self.fp32_bytes_sent = 0, 0, 0

    def add(self, seconds: float = 0.0, codec_seconds: float = 0.0, sent: int = 0, received: int = 0,
            fp32_sent: int | None = None, hidden_seconds: float = 0.0) -> None:
        self.seconds += seconds
        self.hidden_seconds += hidden_seconds
        self.codec_seconds += codec_seconds
        self.bytes_sent += sent
        self.bytes_received += received
        self.fp32_bytes_sent += sent if fp32_sent is None else fp32_sent

    @contextmanager
    def timed(self, sent: int = 0, received: int = 0):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(seconds=time.perf_counter() - t0, sent=sent, received=received)
