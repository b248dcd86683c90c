"""A sampled minibatch in one buffer, sent to the training device in one copy (SALIENT's transfer).

Each array of a minibatch that the device needs (every block's, the seeds' labels, the input rows the CPU provides,
the table positions of the rows the GPU gathers itself) gets a ``Segment`` of one ``Layout``: back to back, each
starting on a 64-byte boundary (a cache line; a multiple of every element size and of a 16-byte vector load). The
sampling thread writes the arrays into a host buffer laid out so, and ``BatchTransfer.send`` moves the whole
buffer at once; the arrays the model takes are views of the device's copy (``Layout.views``).

On a GPU the host buffers are page-locked (pinned), so the copy is a DMA that does not wait for the CPU, issued with
``non_blocking=True`` on a CUDA stream of its own; what the device does with the copy (placing the rows, the
zero-copy gather) runs on that stream too, and the batch carries an event the training stream waits for
(``ready``). Pinned memory is costly to allocate, so the buffers are kept and reused: a ring of ``buffers`` of
them, each grown to the largest minibatch it has held, a buffer written again only once its last copy is done.
Instead of the ~29 pageable copies a minibatch took before (a few per block and one per feature tier), the
profiler's count of host-to-device copies per minibatch is one.

On the CPU the same layout is used, unpinned, and ``send`` hands the host buffer back as it is (no copy): the
model's arrays are views of the ring's buffers, so a batch's arrays stay valid until ``buffers - 1`` more batches
have been prepared; the sampling pipeline keeps at most ``prefetch + 1`` batches alive, and ``buffers`` is
``prefetch + 2``.

The ring is a small buffer pool. Next to it stands PyTorch's own pool of pinned memory (its caching host allocator:
``torch.empty(..., pin_memory=True)`` freed after a ``non_blocking`` copy is reused once the copy's event has
passed), which on a GPU would do the ring's reuse for us, and on the CPU glibc's or tcmalloc's ``malloc``. The two
have not been measured side by side (issue 58: no GPU lent; on the CPU the sampled epoch with the ring is 0.90x the
one before it, which allocated each minibatch's rows afresh, but that run changed more than the pool); until they
are, the ring stays, and the numbers decide.
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
