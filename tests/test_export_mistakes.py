"""`sylvie export` (in-process): a column in two roles and an argument the files cannot carry are refused in one line
naming the flags, before anything is written; a dataset with ids and class names of its own is written back with
them, and the printed entry reads the very same graph back."""
import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml
from support.commands import refused_line

from sylvie.cli import main
from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.data.registry import download
from sylvie.formats.node_keys import read_node_keys

pytestmark = pytest.mark.unit

NODES = ("id,f0,f1,label,split\npaper-a,1,0,Theory,train\npaper-b,0,1,Neural,val\npaper-c,1,1,Theory,test\n"
         "paper-d,0,0,Neural,train\n")
EDGES = "src,dst\npaper-a,paper-b\npaper-b,paper-c\npaper-c,paper-d\n"


@pytest.fixture
def own(tmp_path):
    """A canonical graph made from files with string ids and class names (node_keys.arrow, meta's class_names)."""
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "edges.csv").write_text(EDGES)
    download("mine", tmp_path / "mine", section("dataset", {
        "source": "files", "edges": str(tmp_path / "edges.csv"), "node_table": str(tmp_path / "nodes.csv"),
        "node_key": "id", "feature_columns": ["f*"], "split_column": "split"}))
    return tmp_path / "mine"


def _refused(capsys, own, *flags) -> str:
    out = own.parent / "export"
    line = refused_line(["export", str(own), "--out", str(out), *flags], capsys)
    assert not out.exists(), f"{flags}: something was written"
    return line


def test_a_column_in_two_roles_is_refused_naming_both(own, capsys):
    for flags, said in [
        (["--node-key", "label"], "--node-key and --label-column are both 'label': one column of the node table in "
                                  "two roles"),
        (["--split-column", "node"], "--node-key and --split-column are both 'node'"),
        (["--label-column", "split"], "--label-column and --split-column are both 'split'"),
        (["--edge-columns", "src", "src"], "--edge-columns: the source and the destination are both 'src', one "
                                           "column in two roles"),
        (["--node-key", "feat"], "--node-key 'feat' is also the name of the features' column (parquet writes them "
                                 "as one list column 'feat')"),
        (["--format", "csv", "--label-column", "f1"], "--label-column 'f1' is also the name of feature column 1 "
                                                      "(--feature-prefix 'f', then the dimension)"),
        (["--format", "tsv", "--feature-prefix", "node", "--node-key", "node0"], "--node-key 'node0' is also the "
                                                                                 "name of feature column 0"),
        (["--format", "csv", "--feature-prefix", "", "--split-column", "1"], "--split-column '1' is also the name "
                                                                            "of feature column 1"),
        (["--class-names", "a", "a"], "--class-names: 'a' names both class 0 and class 1, which would merge the two "
                                      "classes"),
        (["--class-names", "a", "b", "c"], "--class-names: 3 names for 2 classes; give one name a class"),
    ]:
        assert said in _refused(capsys, own, *flags), flags
    # what only looks alike is not a collision: a column past the features, a feature prefix in the key's middle
    assert main(["export", str(own), "--out", str(own.parent / "ok"), "--format", "csv", "--node-key", "f2",
                 "--label-column", "xf0", "-q"]) == 0


def test_arguments_the_files_cannot_carry_are_one_line(own, capsys):
    for flags, said in [
        (["--shuffle", "-1"], "--shuffle -1: a seed is a whole number from 0; give e.g. --shuffle 1"),
        (["--gzip"], "--gzip: only CSV and TSV files use it (parquet compresses itself); drop --gzip"),
        (["--format", "arrow", "--feature-prefix", "w"], "--feature-prefix: only CSV and TSV files use it (arrow "
                                                         "writes the features as one list column 'feat')"),
        (["--format", "csv", "--feature-prefix", "f[0]"], "--feature-prefix 'f[0]': the printed config selects the "
                                                          "feature columns by the glob 'f[0]*'"),
        (["--node-key", ""], "--node-key: an empty column name"),
        (["--edge-columns", "src", ""], "--edge-columns DST: an empty column name"),
        (["--name", " "], "--name: empty"),
        (["--class-names", "1", "0"], "--class-names: every name is a number (1, 0, ...), and `source: files` reads "
                                      "labels that are all numbers back as class numbers"),
        (["--format", "csv", "--class-names", "a", ""], "--class-names: class 1's name is empty, and an empty field "
                                                        "of a csv file is read back as no label"),
    ]:
        line = _refused(capsys, own, *flags)
        assert said in line and "Traceback" not in line, (flags, line)
    # parquet keeps an empty name as a name; a name with a digit is a name
    assert main(["export", str(own), "--out", str(own.parent / "ok"), "--class-names", "", "2x", "-q"]) == 0


def test_a_dataset_s_own_ids_and_class_names_are_written_back(own, tmp_path, capsys):
    graph = load_graph(own)
    assert graph.info["class_names"] == ["Neural", "Theory"]
    for fmt, read in (("parquet", pq.read_table), ("csv", pacsv.read_csv)):
        out = tmp_path / f"export-{fmt}"
        capsys.readouterr()
        assert main(["export", str(own), "--out", str(out), "--format", fmt]) == 0
        entry = yaml.safe_load(capsys.readouterr().out)["datasets"]["mine"]
        nodes = read(out / f"nodes.{fmt}")
        assert sorted(nodes.column("node").to_pylist()) == ["paper-a", "paper-b", "paper-c", "paper-d"]
        assert dict(zip(nodes.column("node").to_pylist(), nodes.column("label").to_pylist())) == \
            {"paper-a": "Theory", "paper-b": "Neural", "paper-c": "Theory", "paper-d": "Neural"}
        assert set(read(out / f"edges.{fmt}").column("src").to_pylist()) <= {"paper-a", "paper-b", "paper-c",
                                                                              "paper-d"}
        back = tmp_path / f"back-{fmt}"
        download("back", back, section("dataset", entry))
        again = load_graph(back)
        assert again.info["class_names"] == graph.info["class_names"]
        assert read_node_keys(back, 4).to_pylist() == ["paper-a", "paper-b", "paper-c", "paper-d"]
        assert again.info["fingerprint"] == graph.info["fingerprint"]
    # asked for: the prefix and the names given
    out = tmp_path / "asked"
    assert main(["export", str(own), "--out", str(out), "--id-prefix", "n", "--class-names", "x", "y", "-q"]) == 0
    nodes = pq.read_table(out / "nodes.parquet")
    assert nodes.column("node").to_pylist() == ["n0", "n1", "n2", "n3"]
    np.testing.assert_array_equal(nodes.column("label").to_pylist(), ["y", "x", "y", "x"])
