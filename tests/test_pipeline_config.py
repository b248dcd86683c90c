"""The pipeline's config checked whole before Snakemake plans (sylvie/pipeline_config.py): a config error is one line
and exit 2 on every entry (the Snakefile under Snakemake, ``make run CONFIG=``'s check), never a traceback of the
Snakefile's frames; ``--config`` overrides are read by the schema's types (Snakemake hands nested values as text)."""
import shutil

import pytest
import yaml
from support.commands import BIN, REPO, run

from sylvie.config_file import typed_overrides
from sylvie.pipeline_config import main

DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


@pytest.mark.unit
@pytest.mark.parametrize(("given", "want"), [
    ({"defaults": {"train": {"epochs": "5", "lr": "0.02", "tensorboard": "true"}}},
     {"defaults": {"train": {"epochs": 5, "lr": 0.02, "tensorboard": True}}}),
    ({"runs": {"gcn": {"model": {"hidden": "32", "heads": "4"}, "partition": {"parts": "2"}}}},
     {"runs": {"gcn": {"model": {"hidden": 32, "heads": 4}, "partition": {"parts": 2}}}}),
    ({"datasets": {"cora": {"edge_split": ["0.05", "0.1"], "name": "5", "timeout": "30"}}},
     {"datasets": {"cora": {"edge_split": [0.05, 0.1], "name": "5", "timeout": 30}}}),  # name: a text stays one
    # as Snakemake's parser hands them: a mapping inside a list, its values text; `--fanouts '{...}'` as one text
    ({"defaults": {"sampling": {"fanouts": [{"cites": "5"}, "10", "{cites: 4}"]}, "train": {"lr_schedule": "null"}}},
     {"defaults": {"sampling": {"fanouts": [{"cites": 5}, 10, {"cites": 4}]}, "train": {"lr_schedule": None}}}),
    # a knob of any value (an optimiser's keyword arguments): read as YAML 1.2 reads it ('false' is not truthy text)
    ({"defaults": {"train": {"optimizer_args": {"amsgrad": "false", "momentum": "0.9", "name": "x"}, "lr": "1e-3"}}},
     {"defaults": {"train": {"optimizer_args": {"amsgrad": False, "momentum": 0.9, "name": "x"}, "lr": 0.001}}}),
    ({"datasets": {"mine": {"node_tables": {"a": {"path": "x", "node_key": "null", "feature_columns": "[f]"}}}}},
     {"datasets": {"mine": {"node_tables": {"a": {"path": "x", "node_key": None, "feature_columns": ["f"]}}}}}),
    ({"defaults": {"train": {"epochs": "abc"}}}, {"defaults": {"train": {"epochs": "abc"}}}),  # left to be refused
])
def test_config_overrides_are_read_by_the_schemas_types(given, want):
    assert typed_overrides(given) == want


def _config(tmp_path, change) -> str:
    config = yaml.safe_load(yaml.safe_dump(DEFAULT))
    change(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


MEMBERS = {  # a config error of each kind the plan meets, and what its one line names
    "a knob out of its bounds": (lambda c: c["defaults"]["train"].update(epochs=-1),
                                 "config: invalid value for 'defaults.train.epochs': -1 is less than the minimum"),
    "a dataset that cannot be built": (lambda c: c["datasets"].update({"ogbn-nope": {}}),
                                       "dataset 'ogbn-nope'"),
    "a run the launch cannot place": (lambda c: c.update(launch={"gpus_per_node": 1}),
                                      "with config launch"),
    "a run naming no dataset": (lambda c: c["runs"]["gcn-p4"].update(dataset="nope"),
                                "runs.gcn-p4.dataset': 'nope' is not a key of datasets"),
}


@pytest.mark.unit
@pytest.mark.parametrize("member", list(MEMBERS))
def test_make_runs_check_refuses_in_one_line(tmp_path, capsys, member):
    change, said = MEMBERS[member]
    assert main([_config(tmp_path, change)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sylvie pipeline: error: ") and said in err[0], err


@pytest.mark.unit
def test_make_runs_check_passes_the_default_config(capsys):
    assert main([str(REPO / "config" / "config.yaml")]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("member", [*MEMBERS, "a nested --config override of the wrong type"])
def test_snakemake_plans_no_further_than_a_config_error(tmp_path, member):
    """Under Snakemake itself: the last line is ours, exit 2, no frame of the Snakefile."""
    (tmp_path / "config").mkdir()
    extra = []
    if member in MEMBERS:
        change, said = MEMBERS[member]
        shutil.copy(_config(tmp_path, change), tmp_path / "config" / "config.yaml")
    else:
        shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
        extra, said = ["--config", "defaults={train: {epochs: abc}}"], "'abc' is not of type 'integer'"
    p = run([str(BIN / "snakemake"), "-n", "--cores", "1", "--snakefile", str(REPO / "Snakefile"), *extra],
            cwd=tmp_path, check=False)
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and last.startswith("sylvie pipeline: error: ") and said in last, p.stderr[-2000:]
    assert 'File "' not in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_a_nested_config_override_reaches_the_runs(tmp_path):
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    p = run([str(BIN / "snakemake"), "-n", "-p", "--cores", "1", "--snakefile", str(REPO / "Snakefile"), "--config",
             "defaults={train: {epochs: 5, lr: 0.02}}"], cwd=tmp_path)
    assert "--epochs 5 " in p.stdout and "--epochs 200" not in p.stdout
