"""Faults said as what they are: the peer watchdog tells its own faults from an unreachable store, and temporaries
name their writer by host and pid namespace (two containers sharing a hostname never take each other's live
writer for dead)."""
import os
import shutil
import subprocess
import sys

import pytest

from sylvie.atomic import host_key, remove_leftovers

TALK = """
import torch.distributed as dist
from sylvie.runtime.peer_watchdog import PeerWatchdog
wd = PeerWatchdog(0, 2, 5.0)
calls = []
class Store:
    def add(self, key, value):
        calls.append(key)
        if len(calls) > 3:
            wd._stop.set()
        raise {error}
wd._store = Store()
wd._talk()
print("talk returned after", len(calls), "calls")
"""


def _talk(error: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", TALK.format(error=error)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("error", ["dist.DistNetworkError('connection reset')", "dist.DistStoreError('timeout')",
                                   "ConnectionRefusedError(111, 'refused')", "TimeoutError('timed out')"])
def test_a_store_out_of_reach_is_left_to_the_judge(error):
    p = _talk(error)
    assert p.returncode == 0 and "talk returned after 4 calls" in p.stdout, p.stdout + p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("error", ["ValueError('a bad count')", "KeyError('beat1')", "TypeError('not a number')"])
def test_a_fault_of_the_watchdog_is_named_not_taken_for_the_network(error):
    p = _talk(error)
    name = error.split("(")[0]
    assert p.returncode == 1, p.stdout + p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("sylvie train: error on rank 0: the peer watchdog failed") and name in line, line
    assert "network is down" not in p.stderr and "a fault in Sylvie, not the network" in line


@pytest.mark.unit
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_another_pid_namespace_is_another_writer_host(tmp_path):
    other = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c",
                            "from sylvie.atomic import host_key; print(host_key())"],
                           capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert other and other != host_key()
    # a temporary of a writer in that namespace (its pid means nothing here) is not taken for a dead one's
    final = tmp_path / "out.arrow"
    leftover = tmp_path / f".out.arrow.tmp-{2 ** 22 - 7}_{other}_0123abcd"
    leftover.write_text("a live writer's half-written file")
    assert remove_leftovers(final) == [] and leftover.exists()
    mine = tmp_path / f".out.arrow.tmp-{2 ** 22 - 7}_{host_key()}_0123abcd"  # the same pid, this namespace: dead
    mine.write_text("a dead writer's")
    assert remove_leftovers(final) == [mine] and not mine.exists()
