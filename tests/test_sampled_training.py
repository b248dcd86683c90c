"""Sampled training under torchrun on Cora (4 parts): the cache changes only where rows come from, a resumed run
continues exactly, and bad input is refused before anything is written."""
import json
import shutil

import pytest
from support.commands import BIN, REPO, ranks, run

from sylvie.atomic import read_jsonl

pytestmark = pytest.mark.slow
SAMPLED = ["--mode", "sampled", "--arch", "sage", "--no-self-loop", "--fanouts", "10", "10", "--batch-size", "16",
           "--log-every", "1", "--seed", "0", "--no-progress"]


@pytest.fixture(scope="module")
def vip_dir(cora_partitions, tmp_path_factory):
    out = tmp_path_factory.mktemp("vip") / "f10-10-b16"
    run([str(BIN / "sylvie"), "vip", str(cora_partitions[4]), "--out", str(out), "--fanouts", "10", "10",
         "--batch-size", "16"])
    return out


def _train(part_dir, out, *args):
    return ranks(4, "--no-python", "sylvie", "train", "--partition", part_dir, "--out", out, *SAMPLED, *args)


def test_the_cache_and_the_feature_stores_tiers_change_only_where_rows_come_from(cora_partitions, vip_dir, tmp_path):
    """Same seed: no cache, a VIP cache of 1 x N / 4 rows, every row everywhere (alpha 4, no prefetch; with every row
    on the GPU tier of the feature store, no GPU here: one host tier either way, gathered by the CPU, and the
    conventional path instead of zero-copy) and the simulation policy give identical losses and accuracies; only
    the rows' sources differ. The four runs train one after another in one launch of the ranks
    (tests/workers/runs_worker.py, as `sylvie train --mode sampled ...` with these settings trains each)."""
    sections = {"model": {"arch": "sage", "self_loop": False},
                "train": {"mode": "sampled", "epochs": 6, "log_every": 1, "progress": False},
                "sampling": {"fanouts": [10, 10], "batch_size": 16}}
    settings = {"none": {"cache": {"alpha": 0}}, "vip1": {"cache": {"alpha": 1}},
                "all": {"cache": {"alpha": 4}, "sampling": {**sections["sampling"], "prefetch": 0},
                        "features": {"gpu_fraction": 1, "zero_copy": "off"}},
                "sim1": {"cache": {"alpha": 1, "policy": "simulation"}}}
    jobs = [{"partition": str(cora_partitions[4]), "out": str(tmp_path / name), "seed": 0, "vip": str(vip_dir),
             **sections, **extra} for name, extra in settings.items()]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    ranks(4, REPO / "tests" / "workers" / "runs_worker.py", tmp_path / "jobs.json")
    records = {name: read_jsonl(tmp_path / name / "metrics.jsonl") for name in settings}
    base = records["none"]
    assert base[0]["minibatches"] == 3  # 35 or 36 training vertices per part, 16 per batch
    for name, recs in records.items():
        assert [r["loss"] for r in recs] == [r["loss"] for r in base], name
        assert [r["val_acc"] for r in recs] == [r["val_acc"] for r in base], name
        assert [r["rows_local"] + r["rows_cached"] + r["rows_remote"] for r in recs] == \
               [r["rows_local"] + r["rows_cached"] + r["rows_remote"] for r in base]
        assert all(r["store_host_bytes"] > 0 and r["store_device_bytes"] == 0 for r in recs), name
    assert all(r["rows_cached"] == 0 and r["rows_remote"] > 0 for r in base)
    assert all(r["rows_remote"] == 0 and r["cache_hit_rate"] == 1.0 for r in records["all"])
    assert sum(r["rows_remote"] for r in records["vip1"]) < 0.2 * sum(r["rows_remote"] for r in base)
    summary = json.loads((tmp_path / "vip1" / "metrics.jsonl").read_text().splitlines()[0])
    for key in ("sample_time", "fetch_time", "fetch_wait_time", "compute_time", "allreduce_time", "remote_bytes",
                "input_rows_per_batch"):
        assert key in summary


def test_a_resumed_sampled_run_continues_exactly(cora_partitions, vip_dir, tmp_path):
    """A run of 6 epochs (its checkpoints after epochs 4 and 6, its last) continued to 10 draws the same minibatches
    (new processes, new sampling threads) and rounds its 1-bit remote rows the same way, so it reaches the same losses
    as a run of 10 epochs straight."""
    args = ["--vip", vip_dir, "--remote-bits", "1", "--alpha", "0.2", "--checkpoint-every", "4"]
    out = tmp_path / "resumed"
    _train(cora_partitions[4], out, "--epochs", "6", *args)
    resumed = _train(cora_partitions[4], out, "--epochs", "10", *args)
    assert "resuming from" in resumed.stderr and "after epoch 6" in resumed.stderr
    _train(cora_partitions[4], tmp_path / "straight", "--epochs", "10", *args)
    a, b = read_jsonl(out / "metrics.jsonl"), read_jsonl(tmp_path / "straight" / "metrics.jsonl")
    assert [r["epoch"] for r in a] == list(range(10))
    assert [r["loss"] for r in a] == [r["loss"] for r in b]
    changed = _train(cora_partitions[4], out, "--epochs", "10", *args[:-2], "--alpha", "0.5", "--checkpoint-every",
                     "4", "--policy", "degree")
    assert "starting afresh" in changed.stderr and "cache.alpha changed (0.2 -> 0.5)" in changed.stderr


def test_bad_input_is_refused_before_anything_is_written(cora_partitions, vip_dir, tmp_path, capsys):
    from sylvie.cli import main

    def _train_alone(args, tmp_path):
        """`sylvie train` outside torchrun (its entry point, in this process): the checks that need no peers come
        first."""
        out = tmp_path / "out"
        try:
            code = main(["train", "--out", str(out), *map(str, args)])
        except SystemExit as e:  # argparse
            code = e.code
        err = capsys.readouterr().err
        assert code != 0 and not out.exists(), err
        return err.strip().splitlines()[-1]

    part = cora_partitions[4]
    last = _train_alone(["--partition", part, *SAMPLED, "--fanouts", "10"], tmp_path)
    assert "sampling.fanouts has 1 entries [10] but model.layers is 2" in last
    last = _train_alone(["--partition", part, *SAMPLED, "--alpha", "0.2"], tmp_path)
    assert "cache.policy vip needs the VIP analysis: pass --vip DIR" in last
    last = _train_alone(["--partition", part, *SAMPLED, "--alpha", "-1"], tmp_path)
    assert "'alpha'" in last and "minimum" in last
    last = _train_alone(["--partition", part, *SAMPLED, "--batch-size", "0"], tmp_path)
    assert "'batch_size'" in last
    last = _train_alone(["--partition", part, *SAMPLED, "--zero-copy", "on"], tmp_path)
    assert "features.zero_copy is on but the rank trains without a GPU" in last
    last = _train_alone(["--partition", part, *SAMPLED, "--gpu-fraction", "2"], tmp_path)
    assert "'gpu_fraction'" in last

    old = tmp_path / "old-partition"  # written before partitions carried the topology
    shutil.copytree(part, old)
    from sylvie.formats.partition_manifest import manifest_checksum
    m = json.loads((old / "manifest.json").read_text())
    del m["topology"]
    m["checksum"] = manifest_checksum(m)
    (old / "manifest.json").write_text(json.dumps(m))
    (old / "topology.arrow").unlink()
    last = _train_alone(["--partition", old, *SAMPLED], tmp_path)
    assert "has no replicated topology" in last and "rerun `sylvie partition`" in last


def test_a_vip_analysis_of_another_setting_is_refused(cora_partitions, vip_dir, tmp_path):
    out = tmp_path / "run"
    p = run([str(BIN / "sylvie"), "launch", "--ranks", "4", "--", "sylvie", "train", "--partition",
             str(cora_partitions[4]), "--out", str(out), *SAMPLED, "--batch-size", "32", "--vip", str(vip_dir),
             "--alpha", "0.2", "--epochs", "2"], check=False)
    assert p.returncode != 0 and not (out / "model.pt").exists()
    assert "not sampling.fanouts [10, 10] and sampling.batch_size 32" in p.stderr.strip().splitlines()[-1]
