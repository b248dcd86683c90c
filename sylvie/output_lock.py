"""An exclusive lock on a stage's output while the stage writes it, as ``train.lock`` is for a run.

``flock`` on ``.<name>.lock`` beside the output, taken without waiting: a second writer fails at once, naming the
holder. The holder removes the file as it lets go, and a taker checks the name still leads to the file it locked, so
two writers never hold two files of one name. The kernel releases the lock of a dead holder.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from sylvie.errors import SylvieError


def lock_path(out: str | Path) -> Path:
    out = Path(out)
    return out.parent / f".{out.name}.lock"


class OutputLock:
    def __init__(self, out: str | Path, stage: str):
        self.out, self.stage, self.path = Path(out), stage, lock_path(out)
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        while self._fd is None:
            if not self._try_lock():
                return self
        return self

    def _try_lock(self) -> bool:
        """One attempt; False: no lock can be made there (an --out the stage's own checks refuse, naming why)."""
        if not self.path.parent.is_dir():  # nothing there to race for yet; the stage makes the folder (or refuses)
            return False
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a folder it may not write (read-only, no permission): the stage's own check says so
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(fd)
            holder = (f"`sylvie {holder['stage']}` ({describe_holder(holder)})" if holder and "stage" in holder
                      else "writer (holder unknown)")
            os.close(fd)
            raise SylvieError(f"{self.out}: another {holder} is writing this output; wait for it to finish, stop "
                              f"it, or give this one another --out") from None
        except OSError as e:
            os.close(fd)
            raise SylvieError(f"{self.path}: cannot lock --out {self.out} ({e.strerror}); this file system may not "
                              f"support flock: give an --out on a local or flock-capable file system") from None
        try:
            same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its holder removed it as we opened it: lock the file the name leads to now
            os.close(fd)
            return True
        write_holder(fd, stage=self.stage)
        self._fd = fd
        return True

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            try:
                self.path.unlink()  # while still holding it: whoever opened it meanwhile sees it gone and retries
            except FileNotFoundError:
                pass
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def write_holder(fd: int, **what) -> None:
    """Write who holds the lock on ``fd`` into its file (``what``, host, pid, since when), for a refused writer to
    name (``read_holder``); this lock and the run directory's ``train.lock`` alike."""
    record = {**what, "host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)


def read_holder(fd: int) -> dict | None:
    """The holder ``write_holder`` wrote into the lock's file; None where it cannot be read."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode())
    except (ValueError, UnicodeDecodeError):
        return None
    keys = ("host", "pid", "since")
    return record if isinstance(record, dict) and all(k in record for k in keys) else None


def describe_holder(record: dict) -> str:
    return f"host {record['host']}, pid {record['pid']}, since {record['since']}"
