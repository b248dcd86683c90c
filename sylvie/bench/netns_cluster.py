"""An emulated cluster on one machine: P network namespaces joined by a bridge, each node's link rate-limited both
ways with ``tc qdisc ... tbf``. Node k is namespace ``<tag>n<k>`` at 10.<a>.<b>.<k+1>/24. Needs root; ``with
NetnsCluster(...)`` always tears everything down, also on an error or Ctrl-C.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time

from sylvie.errors import SylvieError
from sylvie.launch.process_tree import alive

NODE_IFACE = "sylvie0"
RATE_PATTERN = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit)$")


def _raise_keyboard_interrupt(*_) -> None:
    raise KeyboardInterrupt("terminated")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _sh(cmd: list[str]) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SylvieError(f"{' '.join(cmd)} failed: {p.stderr.strip()}")


def rate_bytes_per_second(rate: str) -> float:
    value, unit = re.match(r"^(\d+(?:\.\d+)?)(\w+)$", rate).groups()
    return float(value) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit] / 8


class NetnsCluster:
    def __init__(self, nodes: int, rate: str = "1gbit", tag: str | None = None, subnet: int = 213):
        if nodes < 1:
            raise SylvieError(f"an emulated cluster needs at least 1 node, got {nodes}")
        if not RATE_PATTERN.match(rate):
            raise SylvieError(f"rate '{rate}': give a tc rate such as 1gbit, 200mbit or 500kbit")
        if nodes > 250:
            raise SylvieError(f"at most 250 nodes per emulated cluster, got {nodes}")
        self.nodes, self.rate = nodes, rate
        self.tag = tag or f"sy{os.getpid() % 100000}"
        self.subnet = f"10.{subnet}.{os.getpid() % 250}"
        self.bridge = f"{self.tag}br"
        self.created = False
        self._previous_sigterm = None

    def namespace(self, k: int) -> str:
        return f"{self.tag}n{k}"

    def address(self, k: int) -> str:
        return f"{self.subnet}.{k + 1}"

    def _tbf(self, netns: str | None, dev: str) -> None:
        # burst: 10 ms at the rate (at least 32 KiB, for the timer granularity); packets queue up to 100 ms
        burst = max(32 * 1024, int(rate_bytes_per_second(self.rate) / 100))
        cmd = ["tc"] + (["-n", netns] if netns else []) + ["qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                                                          "burst", str(burst), "latency", "100ms"]
        _sh(cmd)

    def __enter__(self) -> NetnsCluster:
        if os.geteuid() != 0:
            raise SylvieError("the emulated cluster creates network namespaces, a bridge and tc limits: run as root "
                              "(e.g. sudo), or run the benchmark on a real cluster")
        self.created = True
        if threading.current_thread() is threading.main_thread():
            # kill (SIGTERM) unwinds like Ctrl-C, so the namespaces are removed either way
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            _sh(["ip", "link", "add", self.bridge, "type", "bridge"])
            _sh(["ip", "link", "set", self.bridge, "up"])
            for k in range(self.nodes):
                ns, host_end, node_end = self.namespace(k), f"{self.tag}v{k}", f"{self.tag}p{k}"
                _sh(["ip", "netns", "add", ns])
                _sh(["ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end])
                _sh(["ip", "link", "set", node_end, "netns", ns])
                _sh(["ip", "-n", ns, "link", "set", node_end, "name", NODE_IFACE])
                _sh(["ip", "-n", ns, "addr", "add", f"{self.address(k)}/24", "dev", NODE_IFACE])
                _sh(["ip", "-n", ns, "link", "set", NODE_IFACE, "up"])
                _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
                _sh(["ip", "link", "set", host_end, "master", self.bridge])
                _sh(["ip", "link", "set", host_end, "up"])
                self._tbf(ns, NODE_IFACE)  # what node k sends
                self._tbf(None, host_end)  # what node k receives
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def kill_processes(self) -> list[int]:
        """SIGKILL every process still inside one of the namespaces (whatever started it); returns their pids."""
        pids = []
        for k in range(self.nodes):
            out = _ip("netns", "pids", self.namespace(k), check=False).stdout.split()
            pids += [int(p) for p in out if p.isdigit()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.05)
        return pids

    def teardown(self) -> None:
        """Kill every process left in the namespaces, then delete every namespace (with its veth pair and qdiscs)
        and the bridge; safe to call twice."""
        if not self.created:
            return
        self.kill_processes()
        for k in range(self.nodes):
            _ip("netns", "delete", self.namespace(k), check=False)
            _ip("link", "delete", f"{self.tag}v{k}", check=False)
        _ip("link", "delete", self.bridge, check=False)
        self.created = False

    def leftovers(self) -> list[str]:
        """Namespaces and links of this cluster that still exist (empty after teardown)."""
        names = _ip("netns", "list", check=False).stdout.split()
        links = _ip("-o", "link", "show", check=False).stdout
        found = [n for n in names if n.startswith(self.tag + "n")]
        found += [m for m in re.findall(r"^\d+: ([^:@]+)", links, re.M) if m.startswith(self.tag)]
        return found

    def command(self, k: int, argv: list[str]) -> list[str]:
        """``argv`` run inside node k's namespace."""
        return ["ip", "netns", "exec", self.namespace(k), *argv]
