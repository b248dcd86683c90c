"""The first failure of a multi-process run, repeated last where the user looks.

The launcher names a folder in ``SYLVIE_FAILURE_DIR``; every failing rank writes a small JSON record there, and the
launcher's torchrun adds what it saw of each rank. The earliest record is not always the cause (a rank's failure
reaches its peers before it writes why), so kinds are ranked and the earliest of the best-ranked kind is first.
"""
# Kinds, best first: ``error`` (the rank's own error) or ``signal`` (a signal other than the ones torchrun stops ranks
# with: SIGKILL from the OOM killer, SIGSEGV, SIGABRT); ``comm`` (a collective or the store failed: first only when no
# rank failed by itself within ``COMM_GRACE_S``); ``exit`` (non-zero without a word); ``stopped`` (SIGTERM, SIGINT,
# SIGHUP, as torchrun stops every rank).
from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from pathlib import Path

ENV = "SYLVIE_FAILURE_DIR"

KINDS = ("error", "signal", "comm", "exit", "stopped")
_RANK_OF_KIND = {"error": 0, "signal": 0, "comm": 1, "exit": 2, "stopped": 3}
# A rank's own failure may be recorded this long after its peers' communication errors that follow from it
# (its peers see its connections close while it is still unwinding; torchrun times a death to the second).
COMM_GRACE_S = 5.0

# How a failed collective or store reads: gloo's transport, NCCL, torch's distributed errors, sockets.
_COMM = re.compile(r"Connection (closed|reset) by peer|Broken pipe|Connection refused|gloo/transport|"
                   r"ProcessGroupNCCL|NCCL (error|communicator)|Socket Timeout|Timed out waiting|"
                   r"wait timeout after", re.IGNORECASE)
_COMM_TYPES = {"DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "ConnectionError",
               "BrokenPipeError", "ConnectionResetError", "ConnectionRefusedError", "ConnectionAbortedError"}

# What a signal most likely means for a rank.
_SIGNAL_HINTS = {
    signal.SIGKILL: "out of memory?",
    signal.SIGSEGV: "a crash in native code; see its output above",
    signal.SIGABRT: "aborted by native code; see its output above",
    signal.SIGBUS: "a memory-mapped file changed, or /dev/shm is full?",
    signal.SIGTERM: "stopped by its launcher or by someone else",
    signal.SIGINT: "interrupted",
    signal.SIGHUP: "its terminal went away",
}
_STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _write(folder: str, name: str, entry: dict, keep_first: bool) -> None:
    try:
        path = Path(folder) / name
        if keep_first and path.exists():
            return  # this process's first failure is the one that counts
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
    except OSError:
        pass  # the message was printed on the rank's stderr already


def record_failure(message: str, env: dict | None = None, kind: str = "error") -> None:
    """Note this rank's failure for the launcher (no-op outside a launcher that asked for it). Only a process's
    first record counts: an error recorded where it happened is not moved later by the same error reported
    again on the way out."""
    env = os.environ if env is None else env
    folder = env.get(ENV)
    if not folder:
        return
    rank = env.get("RANK", "?")
    entry = {"time": time.time(), "rank": rank, "host": socket.gethostname(), "pid": os.getpid(), "kind": kind,
             "message": message}
    _write(folder, f"rank{rank}-{os.getpid()}.json", entry, keep_first=True)


def is_communication_error(e: BaseException) -> bool:
    """Whether ``e`` is a failed collective or store (usually a consequence of a peer's failure)."""
    return any(c.__name__ in _COMM_TYPES for c in type(e).__mro__) or bool(_COMM.search(str(e)))


def exception_message(e: BaseException) -> str:
    """The one line that stands for ``e``: a ``SylvieError``'s message, else its type and first line."""
    from sylvie.errors import SylvieError

    if isinstance(e, SylvieError):
        return str(e)
    return f"{type(e).__name__}: {e}".splitlines()[0][:500]


def record_exception(e: BaseException, env: dict | None = None) -> None:
    """Note this rank's failure by ``e``: a ``SylvieError`` is the rank's own, another exception from a collective
    or the store a communication error."""
    from sylvie.errors import SylvieError

    comm = not isinstance(e, SylvieError) and is_communication_error(e)
    record_failure(exception_message(e), env, kind="comm" if comm else "error")


def signal_message(signum: int, outside: bool = False) -> str:
    """How a rank killed by ``signum`` ended, with what the signal most likely means; ``outside``: a stopping
    signal that came from outside the run (see ``record_rank_exit``)."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if outside:
        return (f"it was killed by signal {signum} ({name}) from outside the run: its launcher saw it end before "
                f"any other rank")
    hint = _SIGNAL_HINTS.get(signum)
    return f"it was killed by signal {signum} ({name}{'; ' + hint if hint else ''})"


def record_rank_exit(folder: str, rank: int, pid: int, exitcode: int, when: float, seq: int = 0,
                     first: bool = False) -> None:
    """Note, as the launcher, how rank ``rank`` (a process of this host) ended: killed by signal ``-exitcode``,
    or exited ``exitcode``. ``when`` is when it was seen to end, to the second: counted at the end of that
    second, so that a rank's own error from the same second comes first. ``first``: torchrun saw this rank end
    first (its root cause). torchrun stops ranks only after one has ended, so the first one it saw stopped by
    SIGTERM, SIGINT or SIGHUP was stopped from outside the run: a cause, not an effect."""
    if exitcode < 0:
        outside = first and -exitcode in _STOPPING
        kind = "stopped" if -exitcode in _STOPPING and not outside else "signal"
        message = signal_message(-exitcode, outside)
    else:
        kind, message = "exit", f"it exited with code {exitcode} without reporting an error; see its output above"
    entry = {"time": float(when) + 1.0, "seq": seq, "rank": str(rank), "host": socket.gethostname(), "pid": pid,
             "kind": kind, "message": message}
    _write(folder, f"rank{rank}-{pid}-exit.json", entry, keep_first=False)


def read_failures(folder: str | Path) -> list[dict]:
    entries = []
    for path in Path(folder).glob("rank*.json"):
        try:
            entry = json.loads(path.read_text())
            entry["time"] = float(entry["time"])
            entries.append(entry)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return entries


def _order(e: dict) -> tuple:
    return e["time"], e.get("seq", 0)


def first_of(entries: list[dict]) -> dict | None:
    """The failure that came first (see the module's notes), or None."""
    # what torchrun saw of a rank adds nothing once the rank said why it failed
    said = {str(e["rank"]) for e in entries if e.get("kind", "error") in ("error", "comm")}
    entries = [e for e in entries if e.get("kind", "error") in ("error", "comm") or str(e["rank"]) not in said]
    if not entries:
        return None
    best = min(entries, key=lambda e: (_RANK_OF_KIND.get(e.get("kind", "error"), 0), *_order(e)))
    if best.get("kind", "error") in ("error", "signal"):
        comm = [e for e in entries if e.get("kind") == "comm" and e["time"] < best["time"] - COMM_GRACE_S]
        if comm:  # a connection broke long before any rank failed by itself: that came first
            return min(comm, key=_order)
    return best


def first_failure(folder: str | Path) -> dict | None:
    """The failure recorded in ``folder`` that came first, or None."""
    return first_of(read_failures(folder))


def describe(entry: dict) -> str:
    return f"rank {entry['rank']} (host {entry['host']}, pid {entry['pid']}) failed first: {entry['message']}"
