"""A sampled minibatch in one buffer, sent to the training device in one copy (SALIENT's transfer).

Every array the device needs gets a 64-byte-aligned ``Segment`` of one ``Layout``; ``BatchTransfer.send`` moves the
filled host buffer at once (pinned, on its own stream, with a ``ready`` event). Pinned memory is costly to allocate,
so a ring of ``prefetch + 2`` buffers is reused; on the CPU ``send`` copies nothing.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

ALIGN = 64  # bytes
_GROWTH = 1 << 21  # a buffer grows in 2 MiB steps, so the first minibatches' small differences do not reallocate


@dataclass(frozen=True)
class Segment:
    """One array of a layout: ``offset`` bytes into the buffer, its dtype and shape."""
    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty(0, dtype=self.dtype).element_size()


class Layout:
    """Where each array of one minibatch lies in its buffer; ``add`` gives a segment's number."""

    def __init__(self):
        self.segments: list[Segment] = []
        self.nbytes = 0

    def add(self, dtype: torch.dtype, shape: tuple[int, ...]) -> int:
        offset = -(-self.nbytes // ALIGN) * ALIGN
        segment = Segment(offset, dtype, tuple(int(s) for s in shape))
        self.segments.append(segment)
        self.nbytes = offset + segment.nbytes
        return len(self.segments) - 1

    def add_like(self, t: torch.Tensor) -> int:
        return self.add(t.dtype, tuple(t.shape))

    def views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """Each segment as a tensor viewing ``buffer`` (uint8, at least ``nbytes``), on the buffer's device."""
        if buffer.dtype != torch.uint8 or buffer.dim() != 1 or buffer.numel() < self.nbytes:
            raise ValueError(f"a layout of {self.nbytes} bytes needs a 1-d uint8 buffer at least that long, got "
                             f"{buffer.dtype} of shape {tuple(buffer.shape)}")
        return [buffer[s.offset:s.offset + s.nbytes].view(s.dtype).view(s.shape) for s in self.segments]


class BatchTransfer:
    """Host buffers for ``device``'s minibatches and their one copy each; ``sends`` counts the copies issued (one a
    minibatch: what the tests and ``make gpu`` check)."""

    def __init__(self, device: torch.device | str, buffers: int):
        if buffers < 1:
            raise ValueError(f"BatchTransfer needs at least one buffer, got {buffers}")
        self.device = torch.device(device)
        self.gpu = self.device.type == "cuda"
        self._host: list[torch.Tensor | None] = [None] * buffers
        self._copied: list = [None] * buffers  # each buffer's last copy (an event), before it is written again
        self._next = 0
        self.sends = 0
        if self.gpu:
            self.stream = torch.cuda.Stream(self.device)
            self.consumer = torch.cuda.current_stream(self.device)  # the training's stream (the caller's)

    @property
    def host_bytes(self) -> int:
        """What the ring holds."""
        return sum(b.numel() for b in self._host if b is not None)

    def host_buffer(self, nbytes: int) -> tuple[int, torch.Tensor]:
        """The next buffer of the ring, at least ``nbytes`` long and free to write: (its number, its first
        ``nbytes`` bytes)."""
        k = self._next
        self._next = (k + 1) % len(self._host)
        if self._copied[k] is not None:
            self._copied[k].synchronize()
            self._copied[k] = None
        buf = self._host[k]
        if buf is None or buf.numel() < nbytes:
            size = max(-(-nbytes // _GROWTH) * _GROWTH, max((b.numel() for b in self._host if b is not None),
                                                            default=0))
            self._host[k] = None  # the old one goes first
            buf = self._host[k] = torch.empty(size, dtype=torch.uint8, pin_memory=self.gpu)
        return k, buf[:nbytes]

    def send(self, k: int, host: torch.Tensor) -> torch.Tensor:
        """Buffer ``k``'s bytes ``host`` on the device: one copy on the transfer's stream (a GPU), or ``host``
        itself (the CPU)."""
        self.sends += 1
        if not self.gpu:
            return host
        with torch.cuda.stream(self.stream):
            device = torch.empty(host.numel(), dtype=torch.uint8, device=self.device)
            device.copy_(host, non_blocking=True)
            self._copied[k] = torch.cuda.Event()
            self._copied[k].record(self.stream)
        self.hand_over(device)
        return device

    def on_device(self):
        """The context in which the device's work on a sent buffer runs: the transfer's stream (a GPU)."""
        return torch.cuda.stream(self.stream) if self.gpu else contextlib.nullcontext()

    def hand_over(self, t: torch.Tensor) -> None:
        """``t``, made on the transfer's stream, is used on the training's: its memory is not reused before."""
        if self.gpu:
            t.record_stream(self.consumer)

    def ready(self):
        """An event after everything issued so far on the transfer's stream (None on the CPU): the training's
        stream waits for it before it uses the batch (``wait``)."""
        if not self.gpu:
            return None
        event = torch.cuda.Event()
        event.record(self.stream)
        return event


def wait(ready) -> None:
    """Make the current stream wait for a batch's ``ready`` event (nothing for a CPU batch)."""
    if ready is not None:
        torch.cuda.current_stream().wait_event(ready)
