"""An exclusive lock on a run directory for the whole training run: ``flock`` on ``<run>/train.lock``, taken without
waiting, so that a second training on the same directory fails at once naming the holder (host, pid, since when). The
kernel releases the lock when its holder dies, so a dead run's lock is simply taken over; the file is never removed,
which would let two runs lock two files of the same name.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from sylvie.errors import SylvieError
from sylvie.output_lock import describe_holder, read_holder, write_holder

LOCK_NAME = "train.lock"


class RunLock:
    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = read_holder(fd)
            holder = describe_holder(record) if record else "holder unknown"
            os.close(fd)
            raise SylvieError(f"{self.path.parent}: another training is writing this run directory ({holder}); "
                              f"wait for it to finish, stop it, or give this run another --out") from None
        except OSError as e:
            os.close(fd)
            raise SylvieError(f"{self.path}: cannot lock the run directory ({e}); this file system may not "
                              f"support flock, give --out on a local or flock-capable file system") from e
        write_holder(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

