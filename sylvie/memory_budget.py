"""What this machine can hold, and the refusal of work that cannot fit, before it starts: a clear error with the
estimate, where an allocator would fail halfway (numpy's or torch's traceback) or the kernel's OOM killer would
stop the process without a word.

``available_bytes`` is the kernel's MemAvailable, or less where a cgroup (a container, a Slurm job) limits this
process tree. The estimates given to ``check_fits`` are lower bounds of what the work holds at its peak, so that
what is refused cannot fit, while what passes may still not."""
from __future__ import annotations

from pathlib import Path

from sylvie.errors import SylvieError


def available_bytes() -> int | None:
    """Bytes this process may still allocate: MemAvailable, capped by the cgroup's limit less its use (None where
    neither can be read)."""
    return _memory("MemAvailable", less_cgroup_use=True)


def _memory(field: str, less_cgroup_use: bool) -> int | None:
    """``field`` of /proc/meminfo, capped by the cgroup's limit (less what the cgroup uses: ``less_cgroup_use``);
    None where neither can be read."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text()) if less_cgroup_use else 0
            found.append(max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def gigabytes(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def check_fits(need: int, what: str, advice: str, available: int | None = None, where: str = "this machine") -> None:
    """Refuse ``what`` when the lower bound ``need`` (bytes) exceeds what is ``available`` (default: this machine's
    ``available_bytes``; or a GPU's free memory, ``where`` naming it): one line with both numbers and ``advice``."""
    available = available_bytes() if available is None else available
    if available is not None and need > available:
        raise SylvieError(f"{what} needs at least {gigabytes(need)} of memory, more than the {gigabytes(available)} "
                          f"{where} has available; {advice}")


# `sylvie partition`'s peak per node of a products-shaped graph (average degree 50): 15.92 GB at 2,449,029 nodes
# (benchmarks/README.md, the scale table); METIS's own ~100 bytes an edge is most of it
PARTITION_BYTES_PER_NODE = 6_500


def total_bytes() -> int | None:
    """This machine's memory: MemTotal, capped by the cgroup's limit (None where neither can be read)."""
    return _memory("MemTotal", less_cgroup_use=False)


def runs_alone(peak_bytes: int, total: int | None = None) -> bool:
    """Whether a stage whose peak is about ``peak_bytes`` must run with no other of its kind beside it: two would not
    fit in this machine's memory (``total``, default ``total_bytes``). The pipeline gives such a stage every core,
    so Snakemake starts nothing beside it."""
    total = total_bytes() if total is None else total
    return total is not None and 2 * peak_bytes > total
