"""The emulated cluster (network namespaces, bridge, tc tbf) runs a 2-node training and leaves nothing."""
import os
import shutil
import subprocess
import time

import pytest
from support.commands import BIN, run

from sylvie.atomic import read_jsonl
from sylvie.launch.process_tree import alive
from sylvie.launch.process_tree import training_ranks as rank_pids


def _net_state() -> tuple[set, set]:
    ns = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    links = {line.split(":")[1].strip().split("@")[0]
             for line in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()}
    return ns, links


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, a bridge and tc)"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "needs iproute2 (ip, tc)"
    return None


@pytest.mark.e2e
@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_two_node_cluster_at_a_low_rate_trains_and_tears_down(cora_partitions, tmp_path):
    before = _net_state()
    out = tmp_path / "run"
    p = run([str(BIN / "sylvie"), "bench", "cluster", "--partition", str(cora_partitions[2]), "--out", str(out),
             "--rate", "20mbit", "--timeout", "300", "--", "--epochs", "6", "--bits", "1", "--pipeline",
             "--checkpoint-every", "0"], timeout=400)
    assert "6 epochs on 2 emulated nodes at 20mbit" in p.stderr
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["staleness"] for r in records] == [0, 1, 1, 1, 1, 1]
    assert all(r["bytes_sent"] > 0 for r in records) and sum(r["hidden_comm_time"] for r in records) > 0
    for k in (0, 1):  # both nodes joined one rendezvous over the namespaces' links
        assert (out / f"node{k}.log").is_file()
    assert _net_state() == before


@pytest.mark.e2e
@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_a_failing_node_stops_the_cluster_and_tears_down(tmp_path):
    before = _net_state()
    p = run([str(BIN / "sylvie"), "bench", "cluster", "--partition", str(tmp_path / "missing"), "--out",
             str(tmp_path / "run"), "--nodes", "2", "--rate", "20mbit", "--timeout", "120"], check=False, timeout=200)
    assert p.returncode != 0 and "node" in p.stderr and "exited" in p.stderr
    assert _net_state() == before


@pytest.mark.e2e
@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_terminating_the_runner_stops_the_nodes_and_tears_down(cora_partitions, tmp_path):
    before = _net_state()
    proc = subprocess.Popen([str(BIN / "sylvie"), "bench", "cluster", "--partition", str(cora_partitions[2]),
                             "--out", str(tmp_path / "run"), "--rate", "20mbit", "--", "--epochs", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (tmp_path / "run" / "node1.log").exists():
        time.sleep(0.5)
    time.sleep(5)  # the nodes are up (or starting)
    assert _net_state() != before  # the cluster exists
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "interrupted" in err
    assert _net_state() == before
    assert not any(p.is_file() for p in (tmp_path / "run").glob("model.pt"))


@pytest.mark.unit
def test_without_root_it_says_so_and_exits_non_zero(tmp_path, monkeypatch, capsys):
    args = ["bench", "cluster", "--partition", str(tmp_path), "--out", str(tmp_path / "o"), "--nodes", "2"]
    if os.geteuid() == 0:
        # as root, the CLI runs here with a non-root effective uid: a process started as another user could not
        # even execute this venv when the clone lies in a private directory (mktemp -d is mode 700)
        from sylvie import cli
        monkeypatch.setattr(os, "geteuid", lambda: 65534)
        returncode, stderr = cli.main(args), capsys.readouterr().err
    else:
        p = run([str(BIN / "sylvie"), *args], check=False, timeout=120)
        returncode, stderr = p.returncode, p.stderr
    assert returncode != 0 and "root" in stderr


def _pids_in(prefix: str) -> list[str]:
    names = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
             if n.startswith(prefix)]
    return [p for n in names for p in subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                                     text=True).stdout.split()]


@pytest.mark.e2e
@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_a_cut_link_fails_the_run_within_the_timeout_and_leaves_nothing(cora_partitions, tmp_path):
    before = _net_state()
    proc = subprocess.Popen([str(BIN / "sylvie"), "bench", "cluster", "--partition", str(cora_partitions[2]),
                             "--out", str(tmp_path / "run"), "--rate", "20mbit", "--", "--epochs", "1000000",
                             "--timeout", "5", "--log-every", "100000", "--checkpoint-every", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    tag = f"sy{proc.pid % 100000}"
    try:
        deadline = time.monotonic() + 120  # training: past start-up, the first epoch's checkpoint written
        while time.monotonic() < deadline and not (tmp_path / "run" / "checkpoints" / "last.pt").exists():
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        pids = rank_pids(tmp_path / "run")
        assert len(pids) == 2
        subprocess.run(["ip", "link", "set", f"{tag}v1", "down"], check=True)  # node 1's cable is pulled
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=150)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and elapsed < 75, (elapsed, err[-2000:])
    last = err.strip().splitlines()[-1]
    assert "node" in last and "rank" in last and ("has not answered" in last or "cannot reach" in last), last
    assert _net_state() == before and _pids_in(tag) == []
    assert not any(alive(p) for p in pids.values())
