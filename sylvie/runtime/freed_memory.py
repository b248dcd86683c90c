"""Hand freed memory back to the system, in the processes that hold a part of a large graph: at once (glibc's
thresholds, ``return_freed_memory``), or what the allocator holds free at the end of a rank's set-up
(``release_free_memory``).

glibc serves an allocation from its heap unless it is larger than a threshold, which starts at 128 KB and rises
to the size of every larger block freed, up to 32 MB. A rank's tensors are mostly rows of its part (a hidden state,
a dropout mask, a degree vector): after a few epochs blocks of 1-32 MB come from the heap, and what is freed there
stays in the process. Measured on a products-shaped graph at 1/4 scale (4 parts, GraphSAGE): 0.1 GB a rank more
at the peak of an epoch. A fixed threshold of 1 MB sends every such block to its own mapping, returned when freed.

The price is a page fault for every page of every such block, each time one is allocated: 4 KB pages, or 2 MB ones
where PyTorch's transparent huge pages are on (``THP_MEM_ALLOC_ENABLE=1``, which the launcher sets where it finds
no tcmalloc to preload: ``launch/allocator.py``; tcmalloc's ``mallopt`` does nothing). Full-graph training and
evaluation set it. Sampled training does not (``train/run.py``): its
tensors are a minibatch's, allocated anew every step, a small share of the part. On 50K nodes in 4 parts, 4 ranks on
2 cores (GraphSAGE 3 x 64, fanouts 10/10/10, batch 256), a sampled epoch took 5.8 s with the 1 MB threshold (40% of
the ranks' CPU time in the kernel, on page faults) and 3.1 s with glibc's own.
"""
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
    (gperftools' C API) where it is preloaded, else glibc's ``malloc_trim(0)``. Returns which of the two ran, None
    where neither is there.

    A rank calls it once, when its set-up is done (``train/run.py``): reading the shard, building the graph and its
    halo plan free blocks that tcmalloc keeps, and the epochs' tensors, of other sizes, did not reuse them all.
    Measured on the products preset (4 METIS parts, 4 ranks, GraphSAGE 3 x 64, tcmalloc), rank 0's peak: at 1/10
    749 -> 711 MB fp32 synchronous and 788 -> 742 MB 1-bit pipelined, at full size 2,942 -> 2,828 MB fp32 (every
    rank's, with the out-edges' lighter transpose: benchmarks/README.md, "After two memory changes"). It costs one
    pass over the allocator's free lists, once."""
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
