"""Options that contradict each other: the config (when the pipeline is planned) and the command line refuse the
same combinations, with the same words, from one check: ``registry.check_dataset`` for a dataset (the config's
check_datasets and `sylvie download`), ``config.check_run`` for a run (resolve_runs and `sylvie train`)."""
import shlex

import pytest

from sylvie.cli import main
from sylvie.config import cli_arguments, resolve_runs
from sylvie.data.registry import check_datasets
from sylvie.errors import SylvieError

pytestmark = pytest.mark.unit

ONE_TYPE = {"source": "files", "edges": "e.csv", "node_table": "n.csv"}
TYPED = {"source": "files", "node_tables": {"a": "a.csv"}, "target": "a",
         "relations": [{"src": "a", "name": "r", "dst": "a", "edges": "ae.csv"}]}


def _cli_error(capsys, argv, stage: str) -> str:
    """The one line `sylvie` printed for a refused command (exit status 2), without its prefix."""
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"sylvie {stage}: error: "), err
    return err.removeprefix(f"sylvie {stage}: error: ")


def _config_error(check, config: dict, prefix: str) -> str:
    with pytest.raises(SylvieError) as e:
        check(config)
    assert str(e.value).startswith(prefix) and "\n" not in str(e.value), str(e.value)
    return str(e.value).removeprefix(prefix)


@pytest.mark.parametrize("options, said", [
    ({**ONE_TYPE, "split_column": "s", "mask_columns": ["tr", "va", "te"]}, "give the split once"),  # the issue's
    ({**TYPED, "edges": "e.csv"}, "or node_table and edges (one node type), not both"),
    ({**TYPED, "node_table": "n.csv"}, "or node_table and edges (one node type), not both"),
    ({**TYPED, "unknown_nodes": "add"}, "are for one node type"),
    ({**TYPED, "features_file": "x.npy"}, "are for one node type"),
    ({**TYPED, "target": None}, "needs node_tables, relations and target; target missing"),
    ({"source": "files", "node_table": "n.csv"}, "source files needs edges"),
    ({"source": "ogb"}, "source ogb has no dataset of that name"),
], ids=["split-and-masks", "typed-and-edges", "typed-and-node-table", "typed-unknown-add", "typed-features-file",
        "typed-no-target", "files-no-edges", "ogb-unknown-name"])
def test_a_dataset_the_config_refuses_is_refused_by_download_in_the_same_words(options, said, capsys, tmp_path):
    config = {"datasets": {"mine": options}, "runs": {"a": {"dataset": "mine"}}}
    from_config = _config_error(check_datasets, config, "config: datasets.mine: ")
    flags = shlex.split(cli_arguments("dataset", {k: v for k, v in options.items() if v is not None}))
    from_cli = _cli_error(capsys, ["download", "mine", "--out", tmp_path / "out", *flags], "download")
    assert from_cli == from_config and said in from_cli, (from_cli, from_config)
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("run, flags, said", [
    ({"train": {"divergence_factor": 0.5}}, ["--divergence-factor", "0.5"], "train.divergence_factor 0.5: must be "
                                                                            "above 1"),
    ({"train": {"mode": "sampled", "boundary_sampling": 0.5}}, ["--mode", "sampled", "--boundary-sampling", "0.5"],
     "train.boundary_sampling is 0.5, but boundary-node sampling is a setting of full-graph training"),
    ({"train": {"boundary_sampling": 0.5}, "comm": {"smoothing": 0.3}}, ["--boundary-sampling", "0.5",
                                                                          "--smoothing", "0.3"],
     "cannot be combined with comm.smoothing 0.3"),
    ({"train": {"mode": "sampled"}, "sampling": {"fanouts": [5, 5, 5]}}, ["--mode", "sampled", "--fanouts", "5", "5",
                                                                          "5"],
     "sampling.fanouts has 3 entries [5, 5, 5] but model.layers is 2"),
], ids=["divergence-factor", "boundary-sampling-sampled", "boundary-sampling-smoothing", "fanouts-layers"])
def test_a_run_the_config_refuses_is_refused_by_train_in_the_same_words(run, flags, said, capsys, tmp_path):
    """The divergence factor was refused by `sylvie train` only, once every earlier stage had run."""
    from_config = _config_error(resolve_runs, {"runs": {"a": run}}, "config: runs.a: ")
    argv = ["train", "--partition", tmp_path / "partition", "--out", tmp_path / "run", "--no-progress", *flags]
    from_cli = _cli_error(capsys, argv, "train")
    assert from_cli == "sylvie train options: " + from_config and said in from_cli, (from_cli, from_config)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("options, said", [
    ({"split_column": "s", "nodes": 3}, "dataset 'cora': source planetoid does not read split_column (read by files), "
                                        "nodes (read by synthetic): ignored; remove them"),
    ({"source": "ogb", "nodes": 500}, "dataset 'cora': source ogb has no dataset"),  # refused, not warned
    ({"source": "files", "edges": "e.csv", "node_table": "n.csv", "graph_file": "g.bin", "mirror": "http://m"},
     "source files does not read graph_file (read by dgl), mirror (read by ogb): ignored"),
    ({"source": "synthetic", "nodes": 50, "label_column": "y"}, "source synthetic does not read label_column (read "
                                                                  "by files, dgl): ignored; remove it"),
    ({"source": "dgl", "graph_file": "g.bin", "raw_dir": "x", "edge_columns": ["a", "b"]},
     "source dgl does not read edge_columns (read by files), raw_dir (read by planetoid): ignored"),
])
def test_a_setting_its_source_does_not_read_is_said_ignored(options, said, caplog):
    """A dataset's knob that its source does not read (the schema's ``sources`` beside it), set away from its
    default: one warning line naming each and who reads it, by the one check the config and the command line share;
    a knob at its default, or one the source reads, says nothing."""
    from sylvie.config import section
    from sylvie.data.registry import check_dataset

    name = "cora"
    with caplog.at_level("WARNING", logger="sylvie"):
        try:
            check_dataset(name, section("dataset", options))
        except SylvieError as e:
            assert said in str(e)
            return
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and said in warned[0], warned
    caplog.clear()
    needed = {"files": ("edges", "node_table"), "dgl": ("graph_file",), "synthetic": ("nodes",)}
    read = {k: options[k] for k in ("source", *needed.get(options.get("source"), ())) if k in options}
    with caplog.at_level("WARNING", logger="sylvie"):
        check_dataset(name, section("dataset", {**read, "seed": 0, "timeout": 60}))
    assert not caplog.records
