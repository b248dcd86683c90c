"""Faults end a run fast and loudly: divergence, a frozen rank, a dead launcher, a second run on the same
directory, an edited manifest, a full disk; the failing rank's one line is printed last."""
import json
import math
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BIN, CORA_RAW, run, venv_env

from sylvie.atomic import read_jsonl
from sylvie.process_tree import alive
from sylvie.process_tree import training_ranks as rank_pids


def launch(part_dir, out, *train_args, ranks=2, check=False, **kw):
    return run([str(BIN / "sylvie"), "launch", "--ranks", str(ranks), "--", "sylvie", "train", "--partition",
                str(part_dir), "--out", str(out), "--no-progress", *map(str, train_args)], check=check, **kw)


def start_launch(part_dir, out, *train_args, extra=()):
    return subprocess.Popen([str(BIN / "sylvie"), "launch", *extra, "--ranks", "2", "--", "sylvie", "train",
                             "--partition", str(part_dir), "--out", str(out), "--no-progress", *map(str, train_args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=venv_env())


def wait_for_epochs(out, ranks=2, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(rank_pids(out)) == ranks and (Path(out) / "train.lock").exists():
            time.sleep(3)  # past start-up, inside the epochs
            return
        time.sleep(0.2)
    raise AssertionError("the ranks never started")


@pytest.mark.slow
def test_divergence_stops_at_once_with_a_hint(cora_partitions, tmp_path):
    out = tmp_path / "run"
    p = launch(cora_partitions[2], out, "--lr", "1e30", "--epochs", "20")
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert "epoch 2: the training loss is nan" in last and "train.lr" in last  # after torchrun's own report
    assert not (out / "model.pt").exists() and not (out / "metrics.jsonl").exists()


@pytest.mark.unit
def test_metrics_are_strict_json(tmp_path):
    from sylvie.atomic import write_json, write_jsonl

    write_jsonl(tmp_path / "m.jsonl", [{"loss": float("nan"), "val_acc": float("inf"), "x": [1.0, -math.inf]}])
    write_json(tmp_path / "e.json", {"test_acc": float("nan")})
    strict = json.JSONDecoder(parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert strict.decode((tmp_path / "m.jsonl").read_text()) == {"loss": None, "val_acc": None, "x": [1.0, None]}
    assert strict.decode((tmp_path / "e.json").read_text()) == {"test_acc": None}


@pytest.mark.slow
def test_a_frozen_rank_fails_the_run_within_the_timeout(cora_partitions, tmp_path):
    out = tmp_path / "run"
    proc = start_launch(cora_partitions[2], out, "--epochs", "1000000", "--timeout", "10", "--log-every", "100000")
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
    # the peer's timeout (10 s), then torchrun's 30 s grace before it SIGKILLs the stopped rank
    assert elapsed < 60, elapsed
    assert "rank 1" in err.strip().splitlines()[-1] and "has not answered" in err.strip().splitlines()[-1]
    time.sleep(1)
    assert not any(alive(p) for p in pids.values())


@pytest.mark.slow
@pytest.mark.parametrize("how", ["launcher killed", "watched pid gone"])
def test_ranks_die_with_their_launcher(cora_partitions, tmp_path, how):
    out = tmp_path / "run"
    parent = subprocess.Popen(["sleep", "600"])
    proc = start_launch(cora_partitions[2], out, "--epochs", "1000000", "--log-every", "100000",
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
    first = start_launch(cora_partitions[2], out, "--epochs", "1000000", "--log-every", "100000")
    try:
        wait_for_epochs(out)
        t0 = time.monotonic()
        second = launch(cora_partitions[2], out, "--epochs", "5")
        assert time.monotonic() - t0 < 60
        assert second.returncode != 0
        last = second.stderr.strip().splitlines()[-1]
        assert "another training is writing this run directory" in last and f"pid {rank_pids(out)[0]}" in last
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
    from sylvie.partition.shard_format import manifest_checksum

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
    assert p.returncode != 0 and "model.pt: could not be written: the disk is full" in last


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
