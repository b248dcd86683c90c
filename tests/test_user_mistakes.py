"""Mistakes a user makes in the config or on the command line: refused at once, in one line naming the field, flag
or file, what is wrong and what to do (in-process: the CLI's main and the config functions the Snakefile calls)."""
import re
import shutil

import pytest
import torch

from sylvie.cli import main
from sylvie.config import resolve_runs
from sylvie.config_file import load_config
from sylvie.errors import SylvieError
from sylvie.formats.checksum import with_checksum
from sylvie.output_dir import PARTITION, check_location, check_replaceable

pytestmark = pytest.mark.unit
MAX_SEED = 2 ** 32 - 1


def _error(capsys, argv) -> str:
    """The one line `sylvie` printed for a refused command (exit status 2)."""
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def _config_error(tmp_path, text: str) -> str:
    """The error resolve_runs (the Snakefile's first step) raises for the config file ``text``."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SylvieError) as e:
        resolve_runs(load_config(path))
    assert "\n" not in str(e.value)
    return str(e.value)


# ---- 1. seeds --------------------------------------------------------------------------------------------------

def test_duplicate_seeds_are_refused_naming_the_run(tmp_path):
    err = _config_error(tmp_path, "runs:\n  a: {}\n  b: {train: {seeds: [0, 1, 0]}}\n")
    assert "'runs.b.train.seeds'" in err and "non-unique" in err and "give each value once" in err
    err = _config_error(tmp_path, "defaults: {train: {seeds: [3, 3]}}\nruns:\n  a: {}\n")
    assert "'defaults.train.seeds'" in err and "non-unique" in err


# ---- 2. non-finite numbers, seeds out of range -----------------------------------------------------------------

@pytest.mark.parametrize("yaml_text,field,value", [
    ("runs:\n  a: {train: {lr: .nan}}\n", "runs.a.train.lr", "nan"),
    ("defaults: {train: {weight_decay: .inf}}\nruns:\n  a: {}\n", "defaults.train.weight_decay", "inf"),
    ("runs:\n  a: {comm: {drift_tolerance: -.inf}}\n", "runs.a.comm.drift_tolerance", "-inf"),
    ("runs:\n  a: {train: {timeout: 1.0e+999}}\n", "runs.a.train.timeout", "inf"),
    ("datasets: {s: {source: synthetic, avg_degree: .nan}}\nruns:\n  a: {dataset: s}\n",
     "datasets.s.avg_degree", "nan"),
], ids=["lr-nan", "weight_decay-inf", "drift_tolerance-minus-inf", "timeout-overflow", "avg_degree-nan"])
def test_non_finite_numbers_in_the_config_are_refused(tmp_path, yaml_text, field, value):
    err = _config_error(tmp_path, yaml_text)
    assert f"invalid value for '{field}': {value} is not a finite number" in err


@pytest.mark.parametrize("argv,field", [
    (["train", "--partition", "p", "--out", "r", "--lr", "nan"], "lr"),
    (["train", "--partition", "p", "--out", "r", "--timeout", "inf"], "timeout"),
    (["train", "--partition", "p", "--out", "r", "--smoothing=-inf"], "smoothing"),
    (["download", "synthetic", "--out", "g", "--homophily", "nan"], "homophily"),
], ids=["lr", "timeout", "smoothing", "homophily"])
def test_non_finite_numbers_on_the_command_line_are_refused(capsys, tmp_path, argv, field):
    argv = [str(tmp_path / a) if i and argv[i - 1] in ("--partition", "--out") else a for i, a in enumerate(argv)]
    err = _error(capsys, argv)
    assert f"invalid value for '{field}'" in err and "is not a finite number" in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "g").exists()


@pytest.mark.parametrize("yaml_text,field", [
    ("runs:\n  a: {train: {seeds: [0, 9223372036854775808]}}\n", "runs.a.train.seeds.1"),
    ("runs:\n  a: {partition: {seed: 9223372036854775807}}\n", "runs.a.partition.seed"),
    (f"runs:\n  a: {{partition: {{seed: {MAX_SEED + 1}}}}}\n", "runs.a.partition.seed"),
    ("datasets: {s: {source: synthetic, seed: 18446744073709551616}}\nruns:\n  a: {dataset: s}\n",
     "datasets.s.seed"),
], ids=["train-seeds-2^63", "partition-seed-2^63-1", "partition-seed-2^32", "dataset-seed-2^64"])
def test_seeds_beyond_the_range_of_the_generators_are_refused(tmp_path, yaml_text, field):
    err = _config_error(tmp_path, yaml_text)
    assert f"invalid value for '{field}'" in err and f"(allowed: 0 to {MAX_SEED})" in err


def test_the_largest_seed_is_accepted(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(f"datasets: {{s: {{source: synthetic, seed: {MAX_SEED}}}}}\n"
                    f"runs:\n  a: {{dataset: s, partition: {{seed: {MAX_SEED}}}, train: {{seeds: [0, {MAX_SEED}]}}}}\n")
    run = resolve_runs(load_config(path))["a"]
    assert run.train.seeds == [0, MAX_SEED] and run.partition.seed == MAX_SEED


@pytest.mark.parametrize("argv", [
    ["train", "--partition", "p", "--out", "r", "--seed", str(2 ** 63)],
    ["partition", "g", "--out", "r", "--seed", str(2 ** 63)],
    ["download", "synthetic", "--out", "r", "--seed", str(2 ** 64)],
], ids=["train", "partition", "download"])
def test_seed_flags_beyond_the_range_are_refused(capsys, tmp_path, argv):
    argv = [str(tmp_path / a) if a in ("p", "g", "r") else a for a in argv]
    err = _error(capsys, argv)
    assert "invalid value for 'seed'" in err and f"(allowed: 0 to {MAX_SEED})" in err
    assert not (tmp_path / "r").exists()


# ---- 3. flags of the other training mode -----------------------------------------------------------------------

@pytest.mark.parametrize("flags,named,mode", [
    (["--mode", "sampled", "--bits", "1"], "--bits", "--mode sampled ignores"),
    (["--mode", "sampled", "--pipeline"], "--pipeline", "--mode sampled ignores"),
    (["--mode", "sampled", "--bits", "32", "--no-pipeline"], "--bits, --no-pipeline", "--mode sampled ignores"),
    (["--mode", "full", "--fanouts", "5", "5"], "--fanouts", "--mode full ignores"),
    (["--fanouts", "5", "5"], "--fanouts", "--mode full (the default) ignores"),
    (["--policy", "vip", "--alpha", "0.5"], "--policy, --alpha", "--mode full (the default) ignores"),
    (["--mode", "full", "--remote-bits", "1"], "--remote-bits", "--mode full ignores"),
    (["--mode", "full", "--gpu-fraction", "0.5"], "--gpu-fraction", "--mode full ignores"),
    (["--mode", "full", "--vip", "v"], "--vip", "--mode full ignores"),
], ids=["sampled-bits", "sampled-pipeline", "sampled-bits-no-pipeline", "full-fanouts", "default-fanouts",
        "default-policy-alpha", "full-remote-bits", "full-gpu-fraction", "full-vip"])
def test_flags_of_the_other_training_mode_are_refused(capsys, tmp_path, flags, named, mode):
    err = _error(capsys, ["train", "--partition", tmp_path / "p", "--out", tmp_path / "r", *flags])
    assert f"sylvie train: error: {named} " in err and mode in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flags", [
    ["--mode", "sampled", "--fanouts", "5", "5", "--policy", "degree", "--remote-bits", "1", "--vip", "v"],
    ["--mode", "full", "--bits", "1", "--pipeline", "--staleness", "2"],
    ["--lr", "0.1", "--arch", "sage"],
], ids=["sampled", "full", "default"])
def test_flags_of_the_chosen_mode_and_defaults_pass(capsys, tmp_path, flags):
    """Only flags given count: the defaults of every section are always there (the refusal is then the missing
    partition, checked after the flags)."""
    err = _error(capsys, ["train", "--partition", tmp_path / "p", "--out", tmp_path / "r", *flags])
    assert "manifest.json" in err and "is a setting" not in err and "are settings" not in err


# ---- 4. --vip at another of our directories --------------------------------------------------------------------

def test_vip_pointing_at_a_partition_or_dataset_says_what_it_is(capsys, cora_dir, cora_partitions, tmp_path):
    p2 = cora_partitions[2]
    sampled = ["train", "--partition", p2, "--out", tmp_path / "run", "--mode", "sampled", "--arch", "sage",
               "--fanouts", "5", "5", "--epochs", "1", "--no-progress"]
    err = _error(capsys, [*sampled, "--vip", p2])
    assert f"--vip {p2} is a partition directory (manifest.json of `sylvie partition`), not a VIP analysis; " \
           f"pass the --out of `sylvie vip" in err and "written for another partition" not in err
    err = _error(capsys, [*sampled, "--vip", cora_dir])
    assert f"--vip {cora_dir} is a canonical graph directory (meta.json of `sylvie download`)" in err
    assert not (tmp_path / "run").exists()


# ---- 5. the suggested --out is accepted ------------------------------------------------------------------------

def _suggested(message: str) -> str:
    m = re.search(r"e\.g\. --out (\S+)$", message)
    assert m, message
    return m.group(1)


@pytest.mark.parametrize("where", ["inside", "same", "parent", "cwd"])
def test_the_suggested_out_is_itself_accepted(tmp_path, monkeypatch, where):
    inp = tmp_path / "data" / "p2"
    inp.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    out = {"inside": inp / "sub" / "new-output", "same": inp, "parent": tmp_path / "data", "cwd": "."}[where]
    with pytest.raises(SylvieError, match="refusing --out") as e:
        check_location(out, inputs=(inp,))
    check_location(_suggested(str(e.value)), inputs=(inp,))


def test_a_stage_accepts_the_out_it_suggested(capsys, cora_partitions, tmp_path):
    p2 = shutil.copytree(cora_partitions[2], tmp_path / "p2")
    vip = ["vip", p2, "--fanouts", "5", "5", "--batch-size", "64", "--no-progress"]
    suggested = _suggested(_error(capsys, [*vip, "--out", p2 / "new-output"]))
    assert main([str(a) for a in [*vip, "--out", suggested]]) == 0
    assert (tmp_path / suggested / "manifest.json").is_file()


# ---- 6. Snakemake's time stamp in a directory output -----------------------------------------------------------

def test_a_snakemake_timestamp_does_not_block_a_manual_rerun(capsys, cora_partitions, tmp_path):
    out = tmp_path / "vip"
    vip = ["vip", cora_partitions[2], "--out", out, "--fanouts", "5", "5", "--batch-size", "64", "--no-progress"]
    assert main([str(a) for a in vip]) == 0
    (out / ".snakemake_timestamp").touch()  # what Snakemake leaves in a directory() output
    assert main([str(a) for a in vip]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "vip-0.npy", "vip-1.npy"]

    parts = shutil.copytree(cora_partitions[2], tmp_path / "p2")
    (parts / ".snakemake_timestamp").touch()
    check_replaceable(parts, PARTITION)
    (parts / "notes.txt").write_text("mine")  # anything else still blocks it, named
    with pytest.raises(SylvieError, match=r"it holds notes\.txt\)"):
        check_replaceable(parts, PARTITION)
    only = tmp_path / "only-stamp"
    only.mkdir()
    (only / ".snakemake_timestamp").touch()
    check_replaceable(only, PARTITION)


# ---- 7. a model whose saved config was edited ------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained_gcn(cora_partitions, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "gcn"
    assert main(["train", "--partition", str(cora_partitions[1]), "--out", str(out), "--epochs", "1",
                 "--checkpoint-every", "0", "--no-progress"]) == 0
    return out / "model.pt"


@pytest.mark.parametrize("edit,mismatch", [
    ({"hidden": 32}, r": \S+ is \[1433, 16\] but the model_cfg needs \[1433, 32\]"),
    ({"layers": 3}, r": weights missing for \S+"),
    ({"arch": "sage", "self_loop": False}, r": weights missing for \S+.*; weights not in the model: \S+"),
], ids=["hidden", "layers", "arch"])
def test_an_edited_model_cfg_is_named_not_a_state_dict_error(capsys, cora_dir, trained_gcn, tmp_path, edit,
                                                             mismatch):
    ckpt = torch.load(trained_gcn, weights_only=False)
    ckpt["model_cfg"].update(edit)
    edited = tmp_path / "model.pt"
    torch.save(with_checksum(ckpt), edited)  # its checksum made again: else refused as edited, before the weights
    err = _error(capsys, ["evaluate", "--dataset", cora_dir, "--model", edited, "--out", tmp_path / "eval.json"])
    assert f"{edited}: its weights do not fit its saved model_cfg" in err and re.search(mismatch, err)
    assert "rerun `sylvie train`" in err and "state_dict" not in err
    assert not (tmp_path / "eval.json").exists()


# ---- config files that are not configs; settings the run's mode ignores ------------------------------------------

@pytest.mark.parametrize("text, named", [
    ("", "the config file is empty"),
    ("# only a comment\n", "the config file is empty"),
    ("- runs\n- defaults\n", "its top level is a list, not a mapping of settings"),
    ("runs\n", "its top level is a text, not a mapping of settings"),
])
def test_a_config_file_that_is_not_a_mapping_is_named(tmp_path, text, named):
    err = _config_error(tmp_path, text)
    assert err.startswith(str(tmp_path / "config.yaml")) and named in err, err


@pytest.mark.parametrize("run, named, mode", [
    ("{train: {mode: sampled}, comm: {bits: 1}}", "runs.a.comm: a setting of full-graph training", "sampled"),
    ("{sampling: {fanouts: [5, 5]}}", "runs.a.sampling: a setting of sampled training", "full"),
    ("{cache: {alpha: 0.1}}", "runs.a.cache: a setting of sampled training", "full"),
    ("{features: {gpu_fraction: 0.5}}", "runs.a.features: a setting of sampled training", "full"),
])
def test_a_run_setting_its_mode_ignores_is_refused_as_the_cli_refuses_the_flag(tmp_path, run, named, mode):
    err = _config_error(tmp_path, f"runs:\n  a: {run}\n")
    assert named in err and f"(train.mode {mode}) ignores" in err, err


def test_defaults_of_either_mode_are_shared_by_runs_of_both(tmp_path):
    """Defaults are for every run: a full-graph run does not use the sampling defaults, nor a sampled one comm's."""
    path = tmp_path / "config.yaml"
    path.write_text("defaults: {comm: {bits: 1}, cache: {alpha: 0.1}}\nruns:\n  f: {}\n  s: {train: {mode: sampled}}\n")
    runs = resolve_runs(load_config(path))
    assert runs["f"].comm.bits == 1 and runs["s"].cache.alpha == 0.1
