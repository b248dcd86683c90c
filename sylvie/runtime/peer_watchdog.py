"""Bounded waits: every rank beats a heartbeat into the rendezvous store and watches its peers' beats, since gloo's own
timeout fires late and names no peer. At start-up ``wait_for_peers`` fails after ``startup_timeout`` naming the ranks
that never counted in; later, a peer silent for ``timeout`` seconds (or a store unreachable that long) is named and
recorded for the launcher, and this process ends, so that torchrun stops the run.
"""
# gloo's timeout fires only after ``timeout`` in one collective, and joining the process group waits as long for a rank
# that never comes; so the watchdog starts before the rank joins the group. A beat and one read of every peer's count
# every ``interval`` (at most 1 s), judged every half interval by a thread that never waits on the network: a silent
# peer is named within ``timeout`` plus 1.5 intervals.
from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from datetime import timedelta

import torch.distributed as dist

from sylvie.errors import SylvieError
from sylvie.formats.rank_failures import record_failure

log = logging.getLogger(__name__)

# What the rendezvous store raises when it cannot be reached: torch's DistStoreError / DistNetworkError (and, in
# some versions and paths, a plain RuntimeError), or the socket's OSError (ConnectionError, TimeoutError). Anything
# else in the watchdog is a fault of its own, reported as such, never as the network.
STORE_ERRORS = (RuntimeError, OSError)

_WATCHES = itertools.count()


def collective_timeout(timeout_s: float) -> float:
    """The process group's timeout: past the watchdog's, so that the watchdog, which can name the peer, fires
    first."""
    return 1.25 * timeout_s + 5


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


class PeerWatchdog:
    """Two daemon threads: one talks to the store (beats, reads the peers' counts), the other judges from what the
    first last saw and never waits on the network, so that a store operation hanging on a cut link cannot keep
    it from failing the run."""

    def __init__(self, rank: int, world: int, timeout_s: float, stage: str = "train", startup_timeout_s: float = 60):
        self.rank, self.world, self.stage = rank, world, stage
        self.timeout, self.startup_timeout = float(timeout_s), float(startup_timeout_s)
        self.interval = min(1.0, max(0.1, self.timeout / 20))
        self._peers = [p for p in range(world) if p != rank]
        self._lock = threading.Lock()
        self._started = self._reached = time.monotonic()  # the last store round trip that succeeded
        self._seen: dict[int, tuple[int, float]] = {}  # peer -> (beats, when first seen), once all have joined
        self._who: dict[int, str] = {}
        self._stop = threading.Event()
        self._settled = threading.Event()  # every rank has counted itself in, or the start-up wait is over
        self._missing: str | None = None  # why the start-up wait failed
        self._threads: list[threading.Thread] = []
        self._store = None
        self.deferred = False  # no store to count in at yet (see start)

    def start(self) -> PeerWatchdog:
        """Count this rank in and beat from now on (before joining the process group, where the store exists by
        then: torchrun's agent hosts it). Where rank 0 makes the store as it joins (torch < 2.5, or torchrun told
        not to share its store), this is ``deferred``: the rank joins first, bounded by the backend's timeout
        alone, and starts watching after (call ``start`` again then). Starting twice does nothing."""
        if self._threads:
            return self
        if self.world < 2 or "MASTER_ADDR" not in os.environ:
            self._settled.set()
            return self
        if not dist.is_initialized() and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
            self.deferred = True
            return self
        self.deferred = False
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        self._where = f"{addr}:{port}"
        try:
            store = dist.TCPStore(addr, port, is_master=False, timeout=timedelta(seconds=10), wait_for_workers=False)
            store.set_timeout(timedelta(seconds=max(1.0, self.interval * 2)))  # every later operation
            # a fresh name space for each of torchrun's restarts of the ranks, and each watch in one process (every
            # rank runs the same stages in the same order)
            space = f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', 0)}.{next(_WATCHES)}"
            self._store = dist.PrefixStore(f"sylvie-watchdog/{space}/", store)
            self._store.set(f"who{self.rank}", f"host {socket.gethostname()}, pid {os.getpid()}")
            self._store.add(f"beat{self.rank}", 1)
            self._store.add("joined", 1)
        except STORE_ERRORS as e:
            raise SylvieError(self._unreachable(None, e)) from e
        self._started = self._reached = time.monotonic()
        self._threads = [threading.Thread(target=f, name=f"sylvie-peer-watchdog-{f.__name__.strip('_')}", daemon=True)
                         for f in (self._talk, self._judge)]
        for t in self._threads:
            t.start()
        return self

    def wait_for_peers(self) -> None:
        """Return once every rank has started its watchdog; raise, naming the ranks missing, after
        ``startup_timeout`` seconds."""
        if self.deferred:
            return
        # the judge settles it within startup_timeout and half an interval; the margin is a backstop
        if not self._settled.wait(self.startup_timeout + 10):
            raise SylvieError(f"the peer watchdog did not settle within {self.startup_timeout:.0f} s of start-up")
        if self._missing:
            raise SylvieError(self._missing)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.interval * 3)
        self._threads = []

    def _settle(self, missing: str | None = None) -> None:
        with self._lock:
            if not self._settled.is_set():
                self._missing = missing
                self._settled.set()

    def _fail(self, message: str) -> None:
        if self._stop.is_set():
            return
        line = f"sylvie {self.stage}: error on rank {self.rank}: {message}"
        log.error(line)
        record_failure(message)
        os._exit(1)  # the main thread may be blocked inside a collective; torchrun then stops the other ranks

    def _unreachable(self, seconds: float | None, e: Exception | None = None) -> str:
        how = f" for {seconds:.0f} s" if seconds is not None else ""
        why = f" ({type(e).__name__})" if e is not None else ""
        return (f"cannot reach the rendezvous store at {self._where}{how}{why}; this node's network is down or the "
                f"first node is gone")

    def _not_joined(self) -> str:
        missing = [p for p in self._peers if self._store.add(f"beat{p}", 0) == 0]
        who = _ranks(missing) if missing else "a rank"
        return (f"{who} did not join within {self.startup_timeout:.0f} s (frozen, stopped or not started); stopping "
                f"the run. If {'they are' if len(missing) > 1 else 'it is'} only slow to start (a busy machine or file "
                f"system), raise train.startup_timeout (now {self.startup_timeout:.0f} s)")

    def _talk(self) -> None:
        """Beat; at start-up wait for every rank to count itself in, then read every peer's count each beat."""
        keys = [f"beat{p}" for p in self._peers]
        poll = 0.02  # fast while waiting for the others at start-up
        while not self._stop.wait(self.interval if self._seen else poll):
            poll = min(self.interval, 0.25, poll * 1.5)
            try:
                self._store.add(f"beat{self.rank}", 1)
                if self._seen:
                    beats = [int(v) for v in self._store.multi_get(keys)]
                elif self._store.add("joined", 0) >= self.world:
                    who = self._store.multi_get([f"who{p}" for p in self._peers])
                    now = time.monotonic()
                    with self._lock:
                        self._who = {p: w.decode() for p, w in zip(self._peers, who)}
                        self._seen = {p: (-1, now) for p in self._peers}
                        self._reached = now
                    self._settle()
                    continue
                elif time.monotonic() - self._started > self.startup_timeout:
                    self._settle(self._not_joined())
                    return
                else:
                    beats = None
            except STORE_ERRORS:
                continue  # the judge decides when the store has been out of reach too long
            except Exception as e:  # noqa: BLE001 (a fault of the watchdog: said as what it is, and the run stops)
                self._fail(f"the peer watchdog failed ({type(e).__name__}: {e}); this is a fault in Sylvie, not the "
                           f"network: please report it")
                return
            now = time.monotonic()
            with self._lock:
                self._reached = now
                for peer, value in zip(self._peers, beats or ()):
                    if value != self._seen[peer][0]:
                        self._seen[peer] = (value, now)

    def _judge(self) -> None:
        """Fail the run when the store has been out of reach, or a peer silent, for too long."""
        while not self._stop.wait(self.interval / 2):
            now = time.monotonic()
            with self._lock:
                reached, seen = self._reached, dict(self._seen)
            if not self._settled.is_set():
                if now - reached > self.startup_timeout:
                    self._settle(self._unreachable(now - reached))
                continue
            if self._missing:
                return
            if now - reached > self.timeout:
                self._fail(self._unreachable(now - reached))
            elif now - reached <= 2 * self.interval + 1:  # what was read is fresh: judge the peers by it
                for peer, (_, since) in seen.items():
                    if now - since > self.timeout:
                        self._fail(f"rank {peer} ({self._who.get(peer, 'host unknown')}) has not answered for "
                                   f"{now - since:.0f} s (frozen, stopped, or cut off from the network); stopping "
                                   f"the run. If it is only slow, raise train.timeout (now {self.timeout:.0f} s)")
