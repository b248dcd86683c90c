"""Faults end a run fast and loudly: divergence, a frozen rank, a dead launcher, a second run on the same
directory, an edited manifest, a full disk; the failing rank's one line is printed last."""
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from support.commands import BIN, CORA_RAW, run, venv_env

from sylvie.atomic import read_jsonl
from sylvie.launch.process_tree import alive
from sylvie.launch.process_tree import training_ranks as rank_pids


def launch(part_dir, out, *train_args, ranks=2, check=False, launcher="fork", **kw):
    return run([str(BIN / "sylvie"), "launch", "--ranks", str(ranks), "--launcher", launcher, "--", "sylvie", "train",
                "--partition", str(part_dir), "--out", str(out), "--no-progress", *map(str, train_args)], check=check,
               **kw)


def start_launch(part_dir, out, *train_args, extra=()):
    return subprocess.Popen([str(BIN / "sylvie"), "launch", *extra, "--ranks", "2", "--", "sylvie", "train",
                             "--partition", str(part_dir), "--out", str(out), "--no-progress", *map(str, train_args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=venv_env())


# a run that trains until it is stopped, with a checkpoint after every epoch: wait_for_epochs sees it inside them
FOREVER = ("--epochs", "1000000", "--log-every", "100000", "--checkpoint-every", "1")


def wait_for_epochs(out, ranks=2, timeout=120):
    """Until every rank runs and the first epoch has ended (its checkpoint is written): past start-up, inside the
    epochs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(rank_pids(out)) == ranks and (Path(out) / "checkpoints" / "last.pt").exists():
            return
        time.sleep(0.1)
    raise AssertionError("the ranks never started their epochs")


@pytest.mark.slow
def test_divergence_stops_at_once_with_a_hint(cora_partitions, tmp_path):
    out = tmp_path / "run"
    p = launch(cora_partitions[2], out, "--lr", "1e30", "--epochs", "20")
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert "epoch 2: the training loss is nan" in last and "train.lr" in last  # after torchrun's own report
    assert not (out / "model.pt").exists() and len(read_jsonl(out / "metrics.jsonl")) == 1  # the epoch before
    assert json.loads((out / "failed.json").read_text())["reason"] == "non-finite"


@pytest.mark.unit
def test_metrics_are_strict_json(tmp_path):
    from sylvie.atomic import write_json, write_jsonl

    write_jsonl(tmp_path / "m.jsonl", [{"loss": float("nan"), "val_acc": float("inf"), "x": [1.0, -math.inf]}])
    write_json(tmp_path / "e.json", {"test_acc": float("nan")})
    strict = json.JSONDecoder(parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert strict.decode((tmp_path / "m.jsonl").read_text()) == {"loss": None, "val_acc": None, "x": [1.0, None]}
    assert strict.decode((tmp_path / "e.json").read_text()) == {"test_acc": None}


def _record(folder, rank, t, message, kind):
    """A rank's failure as a rank writes it for the launcher (sylvie.formats.rank_failures' file format)."""
    entry = {"time": t, "rank": str(rank), "host": "h", "pid": 100 + rank, "kind": kind, "message": message}
    (folder / f"rank{rank}-{100 + rank}.json").write_text(json.dumps(entry))


GLOO = ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:935. This "
        "is typically caused by a remote worker crashing.")
CLOSED = f"RuntimeError: {GLOO}"


@pytest.mark.unit
def test_a_rank_s_own_error_or_death_comes_before_the_connection_errors_it_causes(tmp_path):
    from sylvie.formats.rank_failures import first_failure

    # rank 0's disk is full; rank 1 sees rank 0's connections close a little before rank 0 has written why
    own = tmp_path / "own"
    own.mkdir()
    _record(own, 1, 100.0, CLOSED, "comm")
    _record(own, 0, 100.3, "model.pt: could not be written: the disk is full", "error")
    assert first_failure(own)["rank"] == "0"
    from sylvie.formats.rank_failures import record_rank_exit

    # rank 1 is killed (SIGKILL): rank 0's connection error is what follows; torchrun stops rank 0 (SIGTERM)
    died = tmp_path / "died"
    died.mkdir()
    _record(died, 0, 100.2, CLOSED, "comm")
    record_rank_exit(str(died), 1, 101, -9, 100, seq=0)  # torchrun knows when it saw it, to the second
    record_rank_exit(str(died), 0, 100, -15, 100, seq=1)
    first = first_failure(died)
    assert first["rank"] == "1" and first["message"] == "it was killed by signal 9 (SIGKILL; out of memory?)"
    # a connection that broke long before any rank failed by itself came first
    _record(died, 1, 80.0, CLOSED, "comm")
    assert first_failure(died)["time"] == 80.0


@pytest.mark.unit
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_rank_stopped_from_outside_comes_before_the_connection_errors_it_causes(tmp_path, sig):
    """One rank stopped by SIGTERM, SIGINT or SIGHUP that torchrun saw end first (torchrun stops ranks only after
    one ended): its peers' broken connections follow from it, and torchrun's stopping of them too."""
    from sylvie.formats.rank_failures import first_failure, record_rank_exit

    _record(tmp_path, 0, 100.2, CLOSED, "comm")
    record_rank_exit(str(tmp_path), 1, 101, -sig, 100, seq=1, first=True)
    record_rank_exit(str(tmp_path), 0, 100, -signal.SIGTERM, 100, seq=0)  # torchrun stopping rank 0 after it
    first = first_failure(tmp_path)
    assert first["rank"] == "1" and first["message"] == (
        f"it was killed by signal {int(sig)} ({sig.name}) from outside the run: its launcher saw it end before any "
        "other rank")


@pytest.mark.unit
def test_a_failed_collective_is_recorded_as_a_communication_error(tmp_path):
    from sylvie.errors import SylvieError
    from sylvie.formats.rank_failures import ENV, read_failures, record_exception

    env = {ENV: str(tmp_path), "RANK": "3"}
    record_exception(RuntimeError(GLOO), env)
    assert [(e["rank"], e["kind"]) for e in read_failures(tmp_path)] == [("3", "comm")]
    record_exception(SylvieError("a later error of the same process"), env)  # its first failure counts
    assert [e["message"] for e in read_failures(tmp_path)] == [CLOSED]
    record_exception(SylvieError("Broken pipe: the file ends early"), {ENV: str(tmp_path), "RANK": "4"})
    assert {e["rank"]: e["kind"] for e in read_failures(tmp_path)} == {"3": "comm", "4": "error"}


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "said"), [(signal.SIGKILL, "it was killed by signal 9 (SIGKILL; out of memory?)"),
                                           (signal.SIGTERM, "it was killed by signal 15 (SIGTERM) from outside the "
                                                            "run: its launcher saw it end before any other rank")])
def test_a_rank_killed_by_a_signal_is_named_last(cora_partitions, tmp_path, sig, said):
    out = tmp_path / "run"
    proc = start_launch(cora_partitions[2], out, *FOREVER)
    try:
        wait_for_epochs(out)
        pid = rank_pids(out)[1]
        os.kill(pid, sig)  # SIGKILL as the kernel's OOM killer does; rank 0's collective then breaks
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    last = err.strip().splitlines()[-1]
    assert proc.returncode != 0
    assert f"rank 1 (host {socket.gethostname()}, pid {pid}) failed first: {said}" in last, last


@pytest.mark.slow
def test_a_rank_frozen_before_it_joins_is_named_within_the_startup_timeout(cora_partitions, tmp_path):
    out = tmp_path / "run"
    proc = start_launch(cora_partitions[2], out, "--epochs", "3", "--startup-timeout", "1")
    try:
        deadline = time.monotonic() + 60
        while 1 not in (pids := rank_pids(out)) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(pids[1], signal.SIGSTOP)  # still importing: long before it joins the process group
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)  # 03d865d: gloo's 155 s, then torchrun's 30 s grace
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    last = err.strip().splitlines()[-1]
    assert proc.returncode != 0
    # rank 0 gets to the join (its own start-up), waits 1 s (train.startup_timeout's minimum), and the stopped rank
    # ends with the run
    assert elapsed < 28, elapsed
    assert "rank 0" in last and "failed first: rank 1 did not join within 1 s (frozen, stopped or not started)" in last
    assert "train.startup_timeout" in last
    time.sleep(1)
    assert not any(alive(p) for p in pids.values())


@pytest.mark.slow
def test_a_bad_flag_under_the_launcher_is_named_last(cora_partitions, tmp_path):
    p = launch(cora_partitions[2], tmp_path / "run", "--remote-bits", "3")
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode != 0
    assert "failed first: sylvie train: argument --remote-bits: invalid choice: 3 (choose from" in last, last


@pytest.mark.slow
def test_a_frozen_rank_fails_the_run_within_the_timeout(cora_partitions, tmp_path):
    out = tmp_path / "run"
    proc = start_launch(cora_partitions[2], out, *FOREVER, "--timeout", "5")
    try:
        wait_for_epochs(out)
        pids = rank_pids(out)
        os.kill(pids[1], signal.SIGSTOP)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    # the peer's timeout (5 s, train.timeout's minimum); the stopped rank ends with the run (03d865d: after torchrun's
    # 30 s grace)
    assert elapsed < 13, elapsed
    assert "rank 1" in err.strip().splitlines()[-1] and "has not answered" in err.strip().splitlines()[-1]
    time.sleep(1)
    assert not any(alive(p) for p in pids.values())


@pytest.mark.slow
@pytest.mark.parametrize("how", ["launcher killed", "watched pid gone"])
def test_ranks_die_with_their_launcher(cora_partitions, tmp_path, how):
    out = tmp_path / "run"
    parent = subprocess.Popen(["sleep", "600"])
    proc = start_launch(cora_partitions[2], out, *FOREVER,
                        extra=("--watch-pid", str(parent.pid)))
    try:
        wait_for_epochs(out)
        pids = rank_pids(out)
        if how == "launcher killed":
            proc.kill()  # SIGKILL: no handler runs; the kernel tells torchrun, torchrun's death its ranks
        else:
            parent.kill()  # e.g. Snakemake killed: `sylvie launch --watch-pid $PPID` stops the run
        proc.wait(timeout=60)
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and any(alive(p) for p in pids.values()):
            time.sleep(0.2)
        assert not any(alive(p) for p in pids.values())
        if how == "watched pid gone":
            assert proc.returncode != 0 and "is gone" in proc.stderr.read()
    finally:
        parent.kill()
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_a_second_training_on_the_same_directory_fails_at_once(cora_partitions, tmp_path):
    out = tmp_path / "run"
    first = start_launch(cora_partitions[2], out, *FOREVER)
    try:
        wait_for_epochs(out)
        ranks = rank_pids(out)
        for pid in ranks.values():  # paused, not stopped, while the second starts: alive and holding the lock,
            os.kill(pid, signal.SIGSTOP)  # without their epochs taking the 2 cores the second needs
        t0 = time.monotonic()
        second = launch(cora_partitions[2], out, "--epochs", "5")
        assert time.monotonic() - t0 < 60
        for pid in ranks.values():
            os.kill(pid, signal.SIGCONT)
        assert second.returncode != 0
        last = second.stderr.strip().splitlines()[-1]
        assert "another training is writing this run directory" in last and f"pid {ranks[0]}" in last
        assert first.poll() is None  # the first one runs on, untouched
    finally:
        first.kill()
        first.wait()


@pytest.mark.slow
def test_a_lock_left_by_a_dead_run_is_taken_over(cora_partitions, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "train.lock").write_text(json.dumps({"host": "elsewhere", "pid": 999999, "since": "yesterday"}))
    launch(cora_partitions[2], out, "--epochs", "2", check=True)
    assert len(read_jsonl(out / "metrics.jsonl")) == 2


def _edited_partition(src, dst, edit, rechecksum=False):
    from sylvie.formats.partition_manifest import manifest_checksum

    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    edit(m)
    if rechecksum:
        m["checksum"] = manifest_checksum(m)
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.mark.slow
def test_an_edited_manifest_is_refused(cora_partitions, tmp_path):
    bad = _edited_partition(cora_partitions[2], tmp_path / "p", lambda m: m.update(num_train=70))
    p = launch(bad, tmp_path / "run", "--epochs", "2")
    assert p.returncode != 0
    assert "manifest.json: was changed after `sylvie partition` wrote it" in p.stderr.strip().splitlines()[-1]


@pytest.mark.unit
def test_manifest_counts_are_checked_against_the_shards(cora_partitions, tmp_path):
    from sylvie.errors import SylvieError
    from sylvie.partition.shard_reader import read_shard

    def edit(m):
        m["parts"][1]["train_nodes"] += 5
    bad = _edited_partition(cora_partitions[2], tmp_path / "p", edit, rechecksum=True)
    read_shard(bad, 0)
    with pytest.raises(SylvieError, match="the manifest says train_nodes .* but the shard has"):
        read_shard(bad, 1)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root to mount a small tmpfs")
def test_a_full_disk_names_the_path(cora_partitions, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        p = launch(cora_partitions[2], full / "run", "--epochs", "2", "--hidden", "256")
    finally:
        subprocess.run(["umount", str(full)], check=True)
    last = p.stderr.strip().splitlines()[-1]
    # the first file written after the epochs: the checkpoint after the last (model.pt next)
    assert p.returncode != 0 and "last.pt: could not be written: the disk is full" in last, last
    assert str(full / "run" / "checkpoints") in last


@pytest.mark.slow
def test_a_planetoid_folder_missing_one_file_names_it(tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(CORA_RAW, raw)
    (raw / "ind.cora.tx").unlink()
    p = run([str(BIN / "sylvie"), "download", "cora", "--raw-dir", str(raw), "--no-allow-download", "--out",
             str(tmp_path / "ds")], check=False)
    assert p.returncode == 2 and "missing ind.cora.tx" in p.stderr and str(raw) in p.stderr


@pytest.mark.slow
def test_a_yaml_syntax_error_names_the_file_and_line(repo_copy):
    cfg = repo_copy / "config" / "config.yaml"
    lines = cfg.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("runs:")) + 1
    lines.insert(at, "  broken: {train: {epochs: 3}")
    cfg.write_text("\n".join(lines) + "\n")
    p = run([str(BIN / "snakemake"), "-n", "--cores", "1"], cwd=repo_copy, check=False)
    assert p.returncode != 0
    assert "config/config.yaml, line " in p.stdout + p.stderr and "not valid YAML" in p.stdout + p.stderr


@pytest.mark.slow
def test_ranks_join_where_rank_0_makes_the_store(cora_partitions, tmp_path):
    """Where torchrun does not share its agent's store (torch < 2.5, or TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1), the
    store exists only once rank 0 joins: the watchdog starts after joining instead of waiting for a store that no
    rank has made (every rank failed there with 'cannot reach the rendezvous store')."""
    p = launch(cora_partitions[2], tmp_path / "run", "--epochs", "2", launcher="torchrun",
               env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(read_jsonl(tmp_path / "run" / "metrics.jsonl")) == 2


@pytest.mark.slow
def test_ctrl_c_stops_the_run_with_one_clear_line(cora_partitions, tmp_path):
    """Ctrl-C at a terminal: SIGINT to the launcher's whole process group (the launcher and torchrun). What the user
    reads is the line that says the run was stopped, without torchrun's SignalException tracebacks before it."""
    out = tmp_path / "run"
    proc = subprocess.Popen([str(BIN / "sylvie"), "launch", "--ranks", "2", "--", "sylvie", "train", "--partition",
                             str(cora_partitions[2]), "--out", str(out), "--no-progress", *FOREVER],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=venv_env(),
                            start_new_session=True)
    try:
        wait_for_epochs(out)
        pids = rank_pids(out)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "Traceback" not in err and "SignalException" not in err, err
    # nor torchrun's account of stopping each rank, nor each rank's own "interrupted"
    assert "closing signal" not in err and "death signal" not in err and "interrupted" not in err, err
    assert err.strip().splitlines()[-1] == "sylvie launch: stopped the ranks (SIGINT received)", err
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and any(alive(p) for p in pids.values()):
        time.sleep(0.2)
    assert not any(alive(p) for p in pids.values())
