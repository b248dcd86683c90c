"""Processes that do not outlive the process that started them (Linux: prctl PR_SET_PDEATHSIG)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

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
