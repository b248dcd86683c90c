"""A rank's feature rows in tiers, one table (PyTorch-Direct's store, in SALIENT++'s order): its own rows hottest first,
then its cached remote rows; the uncached rows of other ranks come from their owners (``RankFeatures``).
``gather_into`` writes rows of the table to the training device, bitwise the same whichever tier serves them, and
counts the bytes each tier serves.
"""
# Tiers, fastest first: device, the first ``gpu_fraction`` of the rows in GPU memory (an ``index_select`` there); host,
# the rest. With a GPU and ``zero_copy`` the host table is page-locked and mapped into the GPU's address space, and GPU
# threads read its rows (``gather_cuda``, 128-byte-aligned warp reads): no CPU gather, no staging buffer. It is a pinned
# copy (the rank already copies the shard's rows into VIP order), not the shard's memory-mapped file registered in
# place: those pages are file-backed and read-only, the VIP order is not the file's, and pinning a file mapping locks
# the whole file. Without ``zero_copy`` (or a GPU) the CPU gathers the host tier (``gather_cpu``, the table on huge
# pages) and, with a GPU, copies it over from a pinned staging buffer. On a GPU the gather runs on a stream of its own
# and is complete when it returns (the sampling thread calls it, beside the training step).
#
# A sampled minibatch splits its rows by tier (``features.batch_rows``, ``served_by``): the CPU gathers its share into
# the minibatch's host buffer, and after the buffer's one copy the GPU gathers the rest on the caller's stream
# (``gather_resident``, ``gather_mapped``), without waiting.
from __future__ import annotations

import numpy as np
import torch

from sylvie.comm.gather_cpu import check_gather, gather_rows, gather_rows_at
from sylvie.errors import SylvieError

ZERO_COPY = ("auto", "on", "off")


def check_store_options(gpu_fraction: float, zero_copy: str, has_gpu: bool) -> None:
    if not 0.0 <= gpu_fraction <= 1.0:
        raise SylvieError(f"features.gpu_fraction must lie within 0..1 (a share of the rows), got {gpu_fraction}")
    if zero_copy not in ZERO_COPY:
        raise SylvieError(f"features.zero_copy must be one of {', '.join(ZERO_COPY)}, got {zero_copy!r}")
    if zero_copy == "on" and not has_gpu:
        raise SylvieError("features.zero_copy is on but the rank trains without a GPU: zero-copy reads are GPU "
                          "threads reading host memory; use auto (on exactly when there is a GPU) or off")


class TieredRows:
    def __init__(self, table: torch.Tensor, gpu_fraction: float = 0.0, zero_copy: str = "auto",
                 device: torch.device | str = "cpu"):
        """``table``: every row of the store, in store order, a C-contiguous CPU tensor (pinned already, or it is
        copied into pinned memory, when the host tier is read zero-copy)."""
        self.device = torch.device(device)
        has_gpu = self.device.type == "cuda"
        check_store_options(gpu_fraction, zero_copy, has_gpu)
        check_gather(table.numpy(), np.zeros(0, np.int64), "feature table")
        self.num_rows, self.dim = table.shape
        self.zero_copy = has_gpu and zero_copy != "off"
        self.num_device = int(round(gpu_fraction * self.num_rows)) if has_gpu else 0
        self.bytes_served = {"device": 0, "host": 0}
        self.row_bytes = self.dim * table.element_size()
        if self.zero_copy and not table.is_pinned():
            table = table.pin_memory()
        self.table = table  # every row, on the host: what the rank answers its peers' fetches from
        self.host = table[self.num_device:]
        if has_gpu:
            from sylvie.numba_cuda import cuda

            self._cuda = cuda
            self.device_rows = table[:self.num_device].to(self.device)
            self.stream = torch.cuda.Stream(self.device)
            if self.zero_copy:  # pinned memory is mapped: under unified addressing its device address is its own
                self.mapped = cuda.from_cuda_array_interface(
                    {"shape": (self.host.numel(),), "typestr": np.dtype(_numpy_dtype(table)).str,
                     "data": (self.host.data_ptr(), False), "version": 3}, owner=self.host, sync=False)

    def gather_into(self, slots: torch.Tensor, out: torch.Tensor, at: torch.Tensor) -> None:
        """``out[at] = `` the rows at table positions ``slots`` (``out`` on the training device; on the CPU in one
        pass, without an intermediate copy)."""
        slots = slots.to(torch.long)
        if slots.numel() and (int(slots.min()) < 0 or int(slots.max()) >= self.num_rows):
            bad = int(slots.min()) if int(slots.min()) < 0 else int(slots.max())
            raise IndexError(f"row {bad} is out of range for a feature store of {self.num_rows} rows")
        if out.device.type == "cpu":  # the CPU gathers (from the whole table, which the host holds)
            self.bytes_served["host"] += slots.numel() * self.row_bytes
            gather_rows_at(self.table.numpy(), slots.numpy(), out.numpy(), at.numpy())
        else:
            self._gather_gpu(slots, out, at)

    def served_by(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Which of table positions ``slots`` (on the host) each way serves, as masks: (the CPU's gather, the GPU's
        device tier, the GPU's zero-copy reads of the host tier). Without a GPU, the CPU serves every row."""
        if self.device.type != "cuda":
            every = torch.ones(slots.shape, dtype=torch.bool)
            return every, ~every, ~every
        resident = slots < self.num_device
        host = ~resident
        return (torch.zeros_like(resident), resident, host) if self.zero_copy else \
            (host, resident, torch.zeros_like(resident))

    def gather_resident(self, slots: torch.Tensor, out: torch.Tensor, at: torch.Tensor) -> None:
        """``out[at] = `` the device tier's rows at table positions ``slots`` (all on the device), on the current
        stream."""
        self.bytes_served["device"] += slots.numel() * self.row_bytes
        if slots.numel():
            out.index_copy_(0, at, self.device_rows.index_select(0, slots))

    def gather_mapped(self, slots: torch.Tensor, out: torch.Tensor, at: torch.Tensor) -> None:
        """``out[at] = `` the host tier's rows at table positions ``slots`` (all on the device), read zero-copy by
        GPU threads, on the current stream."""
        self.bytes_served["host"] += slots.numel() * self.row_bytes
        if not slots.numel():
            return
        from sylvie.features.gather_cuda import launch_gather

        cuda = self._cuda
        rows = torch.empty((slots.numel(), self.dim), dtype=self.table.dtype, device=self.device)
        launch_gather(self.mapped, cuda.as_cuda_array(slots - self.num_device), cuda.as_cuda_array(rows),
                      aligned=True, stream=cuda.external_stream(torch.cuda.current_stream(self.device).cuda_stream))
        out.index_copy_(0, at, rows)

    def _gather_gpu(self, slots: torch.Tensor, out: torch.Tensor, at: torch.Tensor) -> None:
        """``out[at] = `` the rows at table positions ``slots`` for ``out`` on the device, each tier its own way
        (``served_by``, as a minibatch's rows take them), on the store's stream, complete when it returns."""
        slots = slots.cpu()
        stream = self.stream
        stream.wait_stream(torch.cuda.current_stream(self.device))  # out is the caller's, made on its stream
        with torch.cuda.stream(stream):
            at = at.to(self.device, non_blocking=True)
            by_cpu, resident, mapped = (m.nonzero().squeeze(1) for m in self.served_by(slots))
            if by_cpu.numel():  # the conventional path: CPU gather into a pinned staging buffer, then one copy
                self.bytes_served["host"] += by_cpu.numel() * self.row_bytes
                staged = torch.from_numpy(gather_rows(self.table.numpy(), slots[by_cpu].numpy())).pin_memory()
                out.index_copy_(0, at.index_select(0, by_cpu.to(self.device, non_blocking=True)),
                                staged.to(self.device, non_blocking=True))
            for where, gather in ((resident, self.gather_resident), (mapped, self.gather_mapped)):
                gather(slots[where].to(self.device, non_blocking=True), out,
                       at.index_select(0, where.to(self.device, non_blocking=True)))
            stream.synchronize()  # staged (pinned, read by the copy) lives until here


def _numpy_dtype(t: torch.Tensor):
    return torch.empty(0, dtype=t.dtype).numpy().dtype
