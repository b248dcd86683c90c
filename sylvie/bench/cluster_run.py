"""Run ``sylvie train`` on an emulated cluster: one torchrun node per namespace, multi-node rendezvous.

Node k runs ``torchrun --nnodes P --node-rank k --nproc-per-node 1`` with c10d rendezvous at node 0's
address; gloo and the rendezvous talk over the namespaces' rate-limited interfaces only. If any node
fails (or on Ctrl-C, or after ``timeout_s``) every node is stopped, every process left in a namespace is
killed, and the namespaces are always removed; a failure names the rank that failed first.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sylvie.bench.netns_cluster import NODE_IFACE, NetnsCluster
from sylvie.errors import SylvieError
from sylvie.formats.epoch_record import EpochRecord, read_metrics
from sylvie.formats.rank_failures import ENV as FAILURE_ENV
from sylvie.formats.rank_failures import describe, first_failure
from sylvie.launch.torchrun import multinode_argv
from sylvie.output_dir import RUN, check_replaceable

RDZV_PORT = 29611


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def train_on_cluster(partition_dir: str | Path, out_dir: str | Path, nodes: int, rate: str = "1gbit",
                     train_args: list[str] = (), timeout_s: float = 3600,
                     log_dir: str | Path | None = None) -> list[EpochRecord]:
    """Train on ``partition_dir`` (``nodes`` parts) with ``nodes`` emulated machines joined by ``rate`` links;
    returns the metrics records (rank 0's ``metrics.jsonl`` under ``out_dir``)."""
    check_replaceable(out_dir, RUN, inputs=(partition_dir,))  # before the node logs are written into it
    out_dir = Path(out_dir)
    log_dir = Path(log_dir or out_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // nodes)
    with NetnsCluster(nodes, rate) as cluster, tempfile.TemporaryDirectory(prefix="sylvie-failures-") as failures:
        env = {**os.environ, "GLOO_SOCKET_IFNAME": NODE_IFACE, "TP_SOCKET_IFNAME": NODE_IFACE,
               "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1", FAILURE_ENV: failures}
        procs, logs = [], []
        try:
            for k in range(nodes):
                # node 0 hosts the rendezvous store: torchrun cannot tell from a namespace's hostname
                argv = multinode_argv(nodes, 1, f"{cluster.address(0)}:{RDZV_PORT}", cluster.tag, k == 0,
                                      [sys.executable, "-m", "sylvie", "train", "--partition", str(partition_dir),
                                       "--out", str(out_dir), "--no-progress", *train_args],
                                      node_rank=k, local_addr=cluster.address(k), join_timeout=120)
                log = open(log_dir / f"node{k}.log", "w")
                logs.append(log)
                procs.append(subprocess.Popen(cluster.command(k, argv), stdout=log, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
            deadline = time.monotonic() + timeout_s
            while True:  # until every node has exited 0, one has failed, or time is up
                failed = [k for k, p in enumerate(procs) if p.poll() not in (None, 0)]
                if failed:
                    time.sleep(1)  # other ranks' reports of the same failure
                    entry = first_failure(failures)
                    cause = f"; {describe(entry)}" if entry else ""
                    raise SylvieError(f"node {failed[0]} exited {procs[failed[0]].returncode}{cause}; see "
                                      f"{log_dir / f'node{failed[0]}.log'}")
                if all(p.returncode == 0 for p in procs):
                    break
                if time.monotonic() > deadline:
                    raise SylvieError(f"the cluster run took longer than {timeout_s:.0f} s; stopped it")
                time.sleep(0.2)
        finally:
            _stop(procs)
            for log in logs:
                log.close()
    return read_metrics(out_dir)
