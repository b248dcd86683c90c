"""Processes that do not outlive the process that started them (Linux: prctl PR_SET_PDEATHSIG)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when its parent exits (no-op where unsupported).

    Call it in the child (e.g. as Popen's ``preexec_fn``, or first thing in a rank). If the parent is
    already gone, exit now."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except OSError:
        return
    if parent == 1 or os.getppid() != parent:
        os.kill(os.getpid(), sig)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state first), or None if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (or stopped) process, not a zombie waiting to be reaped."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def start_time(pid: int) -> str | None:
    """When ``pid`` started (field 22 of /proc/PID/stat), None if it is gone or a zombie: tells a process
    from a later one that got the same pid."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 and fields[0] not in ("Z", "X") else None


FORKED_RANK = "sylvie-rank"  # launch.forked_ranks.rank_name's prefix


def _process_name(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""


def training_ranks(run_dir: str | os.PathLike) -> dict[int, int]:
    """rank -> pid of the ``sylvie train`` processes writing ``run_dir``: started by torchrun (their environment says
    their rank) or forked by ``launch.forked_ranks`` (their process name does: ``sylvie-rank<k>``)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            env = dict(e.split(b"=", 1) for e in (proc / "environ").read_bytes().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if b"train" not in cmd or os.fsencode(run_dir) not in cmd:
            continue
        name = _process_name(proc)
        if name.startswith(FORKED_RANK):
            found[int(name[len(FORKED_RANK):])] = int(proc.name)
        elif b"LOCAL_RANK" in env:
            found[int(env[b"RANK"])] = int(proc.name)
    return found
