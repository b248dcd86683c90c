"""Hand freed memory back to the system in the processes that hold a part of a large graph: at once, through glibc's
thresholds (``return_freed_memory``, full-graph training and evaluation), or what the allocator holds free when a
rank's set-up ends (``release_free_memory``). Sampled training skips the first: its minibatch-sized tensors would
fault their pages in afresh every step (benchmarks/records/2026-11-25_sampled-ranks_2core-vm.md).
"""
# glibc serves an allocation from its heap unless it exceeds a threshold that starts at 128 KB and rises to the size of
# every larger block freed, up to 32 MB: a rank's part-sized tensors (a hidden state, a dropout mask, a degree vector)
# then come from the heap, and what is freed there stays in the process. A fixed 1 MB threshold gives every such block a
# mapping of its own, returned when freed, at the price of a page fault for every page each time one is allocated (4 KB
# pages, or 2 MB ones where PyTorch's transparent huge pages are on: ``THP_MEM_ALLOC_ENABLE=1``, which the launcher sets
# where it preloads no tcmalloc, ``launch/allocator.py``; tcmalloc's ``mallopt`` does nothing). Figures:
# benchmarks/records/2026-11-29_held-memory_2core-vm.md.
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
THRESHOLD = 1 << 20


def return_freed_memory() -> bool:
    """Set glibc's thresholds for this process; False where the C library is not glibc (nothing changes)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD))


def release_free_memory() -> str | None:
    """Hand what the allocator holds free now back to the system: tcmalloc's ``MallocExtension_ReleaseFreeMemory``
    (gperftools' C API) where it is preloaded, else glibc's ``malloc_trim(0)``; returns which of the two ran, None where
    neither is there. A rank calls it once, when its set-up is done, since the blocks set-up frees are not all reused by
    the epochs' tensors (rank peaks: benchmarks/records/2026-12-06_allocators_2core-vm.md)."""
    # Set-up frees blocks while reading the shard and building the graph and its halo plan (``train/run.py`` calls
    # this); it costs one pass over the allocator's free lists, once.
    try:
        process = ctypes.CDLL(None)
    except OSError:
        return None
    release = getattr(process, "MallocExtension_ReleaseFreeMemory", None)
    if release is not None:
        release.restype = None
        release()
        return "tcmalloc"
    trim = getattr(process, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return "glibc"
