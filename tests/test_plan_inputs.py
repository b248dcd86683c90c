"""The plan sees a user's files: a run's dataset whose input file or folder is gone is refused when the pipeline is
planned (registry.check_datasets, which the Snakefile runs), naming the key and the path, instead of Snakemake
planning nothing for the dataset downloaded before and reporting the graph of files no longer given."""
import os

import pytest

from sylvie.config import dataset_options, section
from sylvie.data.registry import check_datasets, download, given_files
from sylvie.errors import SylvieError

pytestmark = pytest.mark.unit

NODES = "id,f0,label,split\na,1,0,train\nb,0,1,val\nc,1,0,test\n"
EDGES = "src,dst\na,b\nb,c\n"


def _refused(config: dict, said: str) -> None:
    with pytest.raises(SylvieError) as e:
        check_datasets(config)
    assert str(e.value) == said, str(e.value)


def _missing(key: str, path) -> str:
    return (f"config: datasets.mine: {key}: {path}: no such file or folder; check the path (relative paths are from "
            f"the directory the command runs in)")


def test_a_run_dataset_whose_inputs_are_gone_is_refused_at_plan_time(tmp_path):
    (tmp_path / "edges.csv").write_text(EDGES)
    (tmp_path / "nodes.csv").write_text(NODES)
    mine = {"source": "files", "edges": str(tmp_path / "edges.csv"), "node_table": str(tmp_path / "nodes.csv"),
            "node_key": "id", "feature_columns": ["f0"], "split_column": "split"}
    config = {"datasets": {"mine": mine}, "runs": {"a": {"dataset": "mine"}}}
    check_datasets(config)
    built = tmp_path / "data" / "datasets" / "mine"
    download("mine", built, dataset_options(config, "mine"))
    before = {p.name: p.stat().st_mtime_ns for p in built.iterdir()}

    gone = tmp_path / "moved" / "edges.csv"  # the issue's: edges pointed at a path that is not there
    _refused({**config, "datasets": {"mine": {**mine, "edges": str(gone)}}},
             _missing("edges", gone))
    (tmp_path / "nodes.csv").rename(tmp_path / "nodes.old")  # the file itself removed, the config unchanged
    _refused(config, _missing("node_table", tmp_path / "nodes.csv"))
    (tmp_path / "nodes.old").rename(tmp_path / "nodes.csv")
    _refused({**config, "datasets": {"mine": {**mine, "features_file": str(tmp_path / "x.npy")}}},
             _missing("features_file", tmp_path / "x.npy"))
    emptied = tmp_path / "parts"  # a folder of parts whose files went (a hidden file is not one to read)
    emptied.mkdir()
    (emptied / ".keep").write_text("")
    _refused({**config, "datasets": {"mine": {**mine, "edges": str(emptied)}}},
             f"config: datasets.mine: edges: the folder {emptied} holds no file to read; put the files back, or point "
             f"edges at where they are now")
    (tmp_path / "link.csv").symlink_to(tmp_path / "moved.csv")  # a link whose file went
    _refused({**config, "datasets": {"mine": {**mine, "edges": str(tmp_path / "link.csv")}}},
             f"config: datasets.mine: edges: {tmp_path / 'link.csv'}: a symbolic link to {tmp_path / 'moved.csv'}, "
             f"which does not exist; restore its target, or remove the link")
    (tmp_path / "loop.csv").symlink_to("loop.csv")  # a link to itself: said so, not as a link to nothing
    _refused({**config, "datasets": {"mine": {**mine, "node_table": str(tmp_path / "loop.csv")}}},
             f"config: datasets.mine: node_table: {tmp_path / 'loop.csv'}: a symbolic link that leads back to itself "
             f"(a loop); replace it with the file it should name, or remove it")
    (emptied / "part-0.csv").symlink_to(tmp_path / "moved.csv")  # a folder's entry: the entry named after the key
    _refused({**config, "datasets": {"mine": {**mine, "edges": str(emptied)}}},
             f"config: datasets.mine: edges: {emptied / 'part-0.csv'}: a symbolic link to {tmp_path / 'moved.csv'}, "
             f"which does not exist; restore its target, or remove the link")
    assert {p.name: p.stat().st_mtime_ns for p in built.iterdir()} == before  # the built dataset left alone

    typed = {"source": "files", "node_tables": {"a": str(tmp_path / "nodes.csv"), "b": str(tmp_path / "b.csv")},
             "relations": [{"src": "a", "name": "r", "dst": "b", "edges": str(tmp_path / "r.csv")}], "target": "a"}
    _refused({**config, "datasets": {"mine": typed}},
             _missing("node_tables.b", tmp_path / "b.csv"))
    (tmp_path / "b.csv").write_text(NODES)
    _refused({**config, "datasets": {"mine": typed}},
             _missing("relations[0].edges", tmp_path / "r.csv"))
    _refused({**config, "datasets": {"mine": {"source": "dgl", "graph_file": "g.bin"}}},
             _missing("graph_file", "g.bin"))

    # a dataset no run reads is not built: its files are not asked for
    check_datasets({**config, "datasets": {"mine": mine, "old": {**mine, "edges": str(gone)}}})


def test_inputs_pointed_elsewhere_are_new_inputs_of_the_download_stage(tmp_path):
    """The download rule's input is given_files: another file, or a folder's file more or less, is another set of
    inputs, which Snakemake reruns the stage for (its input and params triggers), however old the file."""
    for name in ("edges.csv", "other.csv", "nodes.csv"):
        (tmp_path / name).write_text(EDGES if name != "nodes.csv" else NODES)
    os.utime(tmp_path / "other.csv", (0, 0))
    entry = {"source": "files", "edges": str(tmp_path / "edges.csv"), "node_table": str(tmp_path / "nodes.csv")}
    assert given_files("mine", section("dataset", entry)) == (entry["edges"], entry["node_table"])
    moved = {**entry, "edges": str(tmp_path / "other.csv")}
    assert given_files("mine", section("dataset", moved)) == (moved["edges"], entry["node_table"])
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "a.csv").write_text(EDGES)
    folder = {**entry, "edges": str(tmp_path / "parts")}
    assert given_files("mine", section("dataset", folder))[0] == str(tmp_path / "parts" / "a.csv")
    (tmp_path / "parts" / "b.csv").write_text(EDGES)
    assert given_files("mine", section("dataset", folder))[:2] == tuple(str(tmp_path / "parts" / n)
                                                                         for n in ("a.csv", "b.csv"))
