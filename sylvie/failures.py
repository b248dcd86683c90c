"""The first failure of a multi-process run, repeated last where the user looks.

The launcher (``sylvie launch``, the emulated cluster) makes a folder and names it in ``SYLVIE_FAILURE_DIR``;
every rank that fails writes one small JSON file there (rank, host, pid, time, message). After torchrun's
own output, the launcher prints the earliest of them as the last line.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

ENV = "SYLVIE_FAILURE_DIR"


def record_failure(message: str, env: dict | None = None) -> None:
    """Note this rank's failure for the launcher (no-op outside a launcher that asked for it)."""
    env = os.environ if env is None else env
    folder = env.get(ENV)
    if not folder:
        return
    rank = env.get("RANK", "?")
    entry = {"time": time.time(), "rank": rank, "host": socket.gethostname(), "pid": os.getpid(), "message": message}
    try:
        path = Path(folder) / f"rank{rank}-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
    except OSError:
        pass  # the message was printed on this rank's stderr already


def first_failure(folder: str | Path) -> dict | None:
    """The earliest failure recorded in ``folder``, or None."""
    entries = []
    for path in Path(folder).glob("rank*.json"):
        try:
            entries.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return min(entries, key=lambda e: e["time"]) if entries else None


def describe(entry: dict) -> str:
    return f"rank {entry['rank']} (host {entry['host']}, pid {entry['pid']}) failed first: {entry['message']}"
