"""What this machine can hold, and the refusal of work that cannot fit, before it starts: a clear error with the
estimate instead of a traceback halfway or a silent OOM kill. ``available_bytes`` is MemAvailable or a cgroup's
limit; the estimates given to ``check_fits`` are lower bounds, so what is refused cannot fit.
"""
from __future__ import annotations

from pathlib import Path

from sylvie.errors import SylvieError


def available_bytes() -> int | None:
    """Bytes this process may still allocate: MemAvailable, capped by the cgroup's limit less its use (None where
    neither can be read)."""
    return _memory("MemAvailable", less_cgroup_use=True)


def _memory(field: str, less_cgroup_use: bool) -> int | None:
    """``field`` of /proc/meminfo, capped by this process's cgroups' limits (less what each uses:
    ``less_cgroup_use``); None where neither can be read."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    found += [max(0, limit - (used if less_cgroup_use else 0)) for limit, used in cgroup_limits()]
    return min(found) if found else None


UNLIMITED_V1 = 1 << 60  # cgroup v1 writes "no limit" as the largest page multiple below 2^63


def cgroup_limits(proc_cgroup: str | Path = "/proc/self/cgroup", root: str | Path = "/sys/fs/cgroup"
                  ) -> list[tuple[int, int]]:
    """(limit, bytes in use) of every memory cgroup this process is in that has a limit: its own and each above it
    (a Slurm job's limit sits on the job's cgroup, the process in a step's below it), read from
    ``/proc/self/cgroup``: cgroup v2 (``0::/path``: ``memory.max``, ``memory.current``) or v1 (the ``memory``
    controller's line, alone or joined with others, ``memory,cpuacct``: ``memory.limit_in_bytes``,
    ``memory.usage_in_bytes``). A path the process cannot see (a container whose cgroup namespace is its own; one
    above the namespace, ``/../x``) is read from the mount's top. A limit whose usage cannot be read counts as
    unused."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return []
    root = Path(root)
    for line in lines:  # v1: "4:memory:/slurm/uid_0/job_7", or the memory controller joined with others
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            return _limits(_v1_mount(root, controllers), path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                           "total_inactive_file")
    for line in lines:  # v2: "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0"
        if line.startswith("0::"):
            return _limits(root, line[3:], "memory.max", "memory.current", "inactive_file")
    return []


def _v1_mount(root: Path, controllers: str) -> Path:
    """Where cgroup v1 mounts the memory controller: ``memory`` (on its own, or a link to the joined mount), else
    the mount of the controllers it is joined with, named as ``/proc/self/cgroup`` lists them or in another
    order."""
    joined = set(controllers.split(","))
    candidates = [root / "memory", root / controllers]
    try:
        candidates += sorted(p for p in root.iterdir() if set(p.name.split(",")) == joined)
    except OSError:
        pass
    return next((c for c in candidates if c.is_dir()), root / "memory")


def _limits(mount: Path, path: str, limit_file: str, usage_file: str, inactive_key: str) -> list[tuple[int, int]]:
    """The limited cgroups from ``path`` (under ``mount``) up to the top, each with its working set: its usage less
    the file cache the kernel reclaims first (``memory.stat``'s ``inactive_key``), as docker and the kubelet count
    it; a cgroup's usage holds its page cache, which after a stage that read a large file can be most of it."""
    parts = [p for p in path.strip().split("/") if p]
    if parts and (".." in parts or not (mount.joinpath(*parts)).is_dir()):
        parts = []  # not visible from here (a cgroup namespace): the mount's top is this process's cgroup
    out = []
    for depth in range(len(parts), -1, -1):
        folder = mount.joinpath(*parts[:depth])
        try:
            text = (folder / limit_file).read_text().strip()
            if text == "max" or int(text) >= UNLIMITED_V1:
                continue
        except (OSError, ValueError):
            continue
        try:
            used = int((folder / usage_file).read_text())
        except (OSError, ValueError):
            used = 0  # the limit holds whatever the use: counted as unused, what is refused still cannot fit
        out.append((int(text), max(0, used - _stat(folder, inactive_key))))
    return out


def _stat(folder: Path, key: str) -> int:
    """``key`` of the cgroup's ``memory.stat`` (0 where it cannot be read)."""
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def gigabytes(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def check_fits(need: int, what: str, advice: str, available: int | None = None, where: str = "this machine") -> None:
    """Refuse ``what`` when the lower bound ``need`` (bytes) exceeds what is ``available`` (default: this machine's
    ``available_bytes``; or a GPU's free memory, ``where`` naming it): one line with both numbers and ``advice``."""
    available = available_bytes() if available is None else available
    if available is not None and need > available:
        raise SylvieError(f"{what} needs at least {gigabytes(need)} of memory, more than the {gigabytes(available)} "
                          f"{where} has available; {advice}")


# `sylvie partition`'s measured peak per node of a products-shaped graph (average degree 50), METIS's own memory
# most of it: benchmarks/records/2026-11-29_scale_2core-vm.md
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
