"""Bounded waits: every rank beats a heartbeat into the rendezvous store and watches its peers' beats.

Collectives wait for their slowest peer; gloo's own timeout fires only after ``timeout`` in one collective
and does not say which peer is missing. The watchdog (a daemon thread) does: when a peer's heartbeat has
not moved for ``timeout`` seconds (the peer is frozen, stopped, or cut off from the network), or this rank
cannot reach the store for that long, it prints which rank and why, records the failure for the launcher,
and ends this process, so that torchrun stops the run.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

from sylvie.failures import record_failure


def collective_timeout(timeout_s: float) -> float:
    """The process group's timeout: past the watchdog's, so that the watchdog, which can name the peer, fires
    first."""
    return 1.25 * timeout_s + 5


class PeerWatchdog:
    def __init__(self, rank: int, world: int, timeout_s: float, stage: str = "train"):
        self.rank, self.world, self.timeout, self.stage = rank, world, float(timeout_s), stage
        self.interval = min(5.0, max(0.5, self.timeout / 20))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store = None

    def start(self) -> PeerWatchdog:
        if self.world < 2 or "MASTER_ADDR" not in os.environ:
            return self
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        self._where = f"{addr}:{port}"
        store = dist.TCPStore(addr, port, is_master=False, timeout=timedelta(seconds=max(1.0, self.interval * 2)),
                              wait_for_workers=False)
        self._store = dist.PrefixStore("sylvie-watchdog/", store)
        self._store.set(f"who{self.rank}", f"host {socket.gethostname()}, pid {os.getpid()}")
        self._thread = threading.Thread(target=self._run, name="sylvie-peer-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval * 3)
            self._thread = None

    def _who(self, peer: int) -> str:
        try:
            return self._store.get(f"who{peer}").decode()
        except Exception:
            return "host unknown"

    def _fail(self, message: str) -> None:
        if self._stop.is_set():
            return
        line = f"sylvie {self.stage}: error on rank {self.rank}: {message}"
        print(line, file=sys.stderr, flush=True)
        record_failure(message)
        os._exit(1)  # the main thread may be blocked inside a collective; torchrun then stops the other ranks

    def _run(self) -> None:
        now = time.monotonic()
        seen = {p: (-1, now) for p in range(self.world) if p != self.rank}
        reached = now
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            try:
                self._store.add(f"beat{self.rank}", 1)
                beats = {p: self._store.add(f"beat{p}", 0) for p in seen}
                reached = now
            except Exception as e:  # the store (on the first node) is out of reach
                if now - reached > self.timeout:
                    self._fail(f"cannot reach the rendezvous store at {self._where} for {now - reached:.0f} s "
                               f"({type(e).__name__}); this node's network is down or the first node is gone")
                continue
            for peer, value in beats.items():
                if value != seen[peer][0]:
                    seen[peer] = (value, now)
                elif now - seen[peer][1] > self.timeout:
                    self._fail(f"rank {peer} ({self._who(peer)}) has not answered for {now - seen[peer][1]:.0f} s "
                               f"(frozen, stopped, or cut off from the network); stopping the run. If it is only "
                               f"slow, raise train.timeout (now {self.timeout:.0f} s)")
