"""Host memory for a feature table read at random: anonymous memory the kernel is asked to back with transparent
huge pages (``madvise(MADV_HUGEPAGE)``), where the system allows it.

Why: a random row gather over a table of several GB misses the TLB on almost every row with 4 KB pages; 2 MB pages
remove most page walks (``benchmarks/records/2026-11-28_gather_2core-vm.md``). Without THP the memory is ordinary
and everything works the same.
"""
from __future__ import annotations

import mmap

import numpy as np
import torch


def huge_page_table(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised C-contiguous CPU tensor of ``shape`` whose memory is advised for huge pages; freed when
    the last tensor or array viewing it goes."""
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):  # Linux only
        try:
            memory.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel without THP: ordinary pages
            pass
    return torch.from_numpy(np.frombuffer(memory, dtype=np_dtype).reshape(shape))  # the array keeps the map
