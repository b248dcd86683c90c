"""One halo message on the wire: encode (Low-bit Module; fp32 at 32 bits), all-to-all of bytes, decode.

``send`` blocks; ``start`` launches the all-to-all in the background (an async collective) and returns an
``InFlight`` whose ``wait`` gives the rows. Time is split three ways in ``CommStats``: codec, waited on
(exposed) and, for background exchanges, the part of the collective that ran while the rank computed
(hidden; its completion time comes from the collective's future).
"""
from __future__ import annotations

import time

import torch

from sylvie.comm.collective import AllToAll, torch_all_to_all
from sylvie.comm.lowbit import decode, encode, message_key
from sylvie.comm.lowbit.format import Layout
from sylvie.comm.stats import CommStats

FORWARD, BACKWARD = 0, 1
AHEAD = 1  # key part of the rows a synchronous round sends ahead for the next round's sample (Wire.ahead)


class Wire:
    """How one exchange is encoded and sent: bit width (``gradient_bits``: of the backward messages, 0 for
    ``bits``), random stream of its messages, the all-to-all."""

    def __init__(self, bits: int, key_parts: tuple[int, ...], layer: int, stats: CommStats,
                 all_to_all: AllToAll | None = None, gradient_bits: int = 0):
        self.bits, self.key_parts, self.layer, self.stats = bits, key_parts, layer, stats
        self.gradient_bits = gradient_bits or bits
        self.all_to_all = all_to_all or torch_all_to_all()

    def ahead(self) -> Wire:
        """This wire with a random stream of its own, for a second message of the same round and layer: the rows a
        synchronous round sends ahead, in the background, for the next round's boundary sample."""
        return Wire(self.bits, (*self.key_parts, AHEAD), self.layer, self.stats, self.all_to_all, self.gradient_bits)

    def _encode(self, rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], direction: int):
        what = f"layer {self.layer} {'forward features' if direction == FORWARD else 'backward feature gradients'}"
        t0 = time.perf_counter()
        bits = self.bits if direction == FORWARD else self.gradient_bits
        enc = encode(rows.contiguous(), bits, send_counts, what=what,
                     key=message_key(*self.key_parts, self.layer, direction))
        recv_layout = Layout.of(recv_counts, rows.shape[1], bits)
        recv = torch.empty(recv_layout.total_bytes, dtype=torch.uint8, device=rows.device)
        self.stats.add(codec_seconds=time.perf_counter() - t0, sent=enc.layout.total_bytes,
                       received=recv_layout.total_bytes, fp32_sent=rows.shape[0] * rows.shape[1] * 4)
        return enc, recv, recv_layout

    def _decode(self, recv: torch.Tensor, layout: Layout) -> torch.Tensor:
        t0 = time.perf_counter()
        out = decode(recv, layout)  # at 32 bits: a view of the receive buffer, which nothing else holds
        self.stats.add(codec_seconds=time.perf_counter() - t0)
        return out

    def send(self, rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], direction: int) -> torch.Tensor:
        """Send ``send_counts[j]`` rows to peer j, receive ``recv_counts[j]`` from j; returns the received rows."""
        enc, recv, layout = self._encode(rows, send_counts, recv_counts, direction)
        t0 = time.perf_counter()
        self.all_to_all(recv, enc.buffer, list(layout.sizes), list(enc.layout.sizes), False)
        self.stats.add(seconds=time.perf_counter() - t0)
        return self._decode(recv, layout)

    def start(self, rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], direction: int) -> InFlight:
        """Like ``send``, in the background: returns at once."""
        enc, recv, layout = self._encode(rows, send_counts, recv_counts, direction)
        launched = time.perf_counter()
        work = self.all_to_all(recv, enc.buffer, list(layout.sizes), list(enc.layout.sizes), True)
        return InFlight(self, work, enc.buffer, recv, layout, launched)


class InFlight:
    """A background exchange; ``wait()`` returns the received rows (once)."""

    def __init__(self, wire: Wire, work, send_buffer, recv, layout: Layout, launched: float):
        self.wire, self.work, self.recv, self.layout, self.launched = wire, work, recv, layout, launched
        self._send_buffer = send_buffer  # must outlive the collective
        self.completed: list[float] = []
        if hasattr(work, "get_future"):  # completion time of a torch.distributed collective
            work.get_future().then(lambda _: self.completed.append(time.perf_counter()))

    def wait(self) -> torch.Tensor:
        """Block until the rows are here. The wait counts as exposed and the rest of the collective as
        hidden, in the counters of the epoch that waits (the trainer resets them every epoch)."""
        t0 = time.perf_counter()
        self.work.wait()
        t1 = time.perf_counter()
        done = self.completed[0] if self.completed else t1
        self.wire.stats.add(seconds=t1 - t0, hidden_seconds=max(0.0, min(done, t0) - self.launched))
        self._send_buffer = None
        return self.wire._decode(self.recv, self.layout)
