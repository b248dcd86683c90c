"""Bad input in a graph of the user's own (``source: files``, ``source: dgl``): each a one-line error naming the file,
the column and, where it applies, the first bad row; nothing written."""
import builtins
import gzip
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.commands import BIN, run

from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.data.registry import check_dataset, download
from sylvie.errors import SylvieError

NODES = "id,f0,f1,label,split\na,1,0,0,train\nb,0,1,1,val\nc,1,1,0,test\nd,0,0,1,train\n"
EDGES = "src,dst\na,b\nb,c\nc,d\n"


def _write(tmp_path, nodes=NODES, edges=EDGES, edges_name="edges.csv", nodes_name="nodes.csv") -> dict:
    for name, text in ((edges_name, edges), (nodes_name, nodes)):
        path = tmp_path / name
        if name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
    return {"source": "files", "edges": str(tmp_path / edges_name), "node_table": str(tmp_path / nodes_name),
            "node_key": "id", "feature_columns": ["f*"], "split_column": "split"}


def _refused(tmp_path, entry: dict, pattern: str) -> str:
    out = tmp_path / "out" / "mine"
    with pytest.raises(SylvieError, match=pattern) as e:
        download("mine", out, section("dataset", entry))
    message = str(e.value)
    assert "\n" not in message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), "something was written"
    return message


@pytest.mark.unit
def test_a_good_graph_reads(tmp_path):
    out = tmp_path / "out"
    meta = download("mine", out, section("dataset", _write(tmp_path)))
    assert (meta["num_nodes"], meta["num_edges"], meta["num_classes"]) == (4, 6, 2)
    graph = load_graph(out)
    assert graph.features.tolist() == [[1, 0], [0, 1], [1, 1], [0, 0]]
    assert graph.train_mask.tolist() == [True, False, False, True]


@pytest.mark.unit
def test_node_ids_out_of_range_or_negative(tmp_path):
    entry = {**_write(tmp_path, edges="src,dst\n0,1\n1,4\n"), "node_key": None}
    _refused(tmp_path, entry, r"edges.csv, line 3: column 'dst': node 4 is out of range: the node table has 4 rows")
    entry = {**_write(tmp_path, edges="src,dst\n0,1\n-1,2\n"), "node_key": None}
    _refused(tmp_path, entry, r"edges.csv, line 3: column 'src': node -1 is out of range")


@pytest.mark.unit
def test_edges_naming_nodes_absent_from_the_node_table(tmp_path):
    entry = _write(tmp_path, edges="src,dst\na,b\nb,zz\n")
    _refused(tmp_path, entry,
             r"edges.csv, line 3: column 'dst': node 'zz' is not in the node table.*unknown_nodes: add")


@pytest.mark.unit
def test_unknown_nodes_added_when_asked(tmp_path):
    entry = {**_write(tmp_path, edges="src,dst\na,b\nb,zz\nzz,yy\n"), "unknown_nodes": "add"}
    download("mine", tmp_path / "out", section("dataset", entry))
    graph = load_graph(tmp_path / "out")
    assert graph.num_nodes == 6 and graph.features[4:].tolist() == [[0, 0], [0, 0]]
    assert graph.labels[4:].tolist() == [-1, -1] and not graph.train_mask[4:].any()
    from sylvie.formats.node_keys import read_node_keys
    assert read_node_keys(tmp_path / "out", 6).to_pylist() == ["a", "b", "c", "d", "zz", "yy"]


@pytest.mark.unit
@pytest.mark.parametrize("value", ["nan", "inf", "", "1e40"])
def test_non_finite_features(tmp_path, value):
    nodes = NODES.replace("c,1,1,0", f"c,1,{value},0")
    _refused(tmp_path, _write(tmp_path, nodes=nodes), r"nodes.csv, line 4: column 'f1': a feature is NaN, infinite")


@pytest.mark.unit
def test_non_finite_features_in_a_parquet_list_column(tmp_path):
    entry = _write(tmp_path)
    pq.write_table(pa.table({"id": ["a", "b", "c", "d"], "feat": [[1.0, 0.0], [0.0, float("inf")], [1.0, 1.0],
                                                                 [0.0, 0.0]], "label": [0, 1, 0, 1],
                             "split": ["train", "val", "test", "train"]}), tmp_path / "nodes.parquet")
    entry.update(node_table=str(tmp_path / "nodes.parquet"), feature_columns=["feat"])
    _refused(tmp_path, entry, r"nodes.parquet, row 1: column 'feat': a feature is NaN, infinite")


@pytest.mark.unit
@pytest.mark.parametrize("label", ["-1", "2.5"])
def test_labels_out_of_range(tmp_path, label):
    nodes = NODES.replace("b,0,1,1,val", f"b,0,1,{label},val")
    _refused(tmp_path, _write(tmp_path, nodes=nodes), rf"nodes.csv, line 3: column 'label': label {label} is out of "
                                                      r"range")


@pytest.mark.unit
def test_columns_of_different_lengths(tmp_path):
    np.save(tmp_path / "feat.npy", np.zeros((5, 3), np.float32))
    entry = {**_write(tmp_path), "features_file": str(tmp_path / "feat.npy")}
    _refused(tmp_path, entry, r"feat.npy: features_file has 5 rows but the node table .*nodes.csv has 4")


@pytest.mark.unit
def test_duplicate_node_keys(tmp_path):
    nodes = NODES.replace("d,0,0,1,train", "b,0,0,1,train")
    _refused(tmp_path, _write(tmp_path, nodes=nodes), r"nodes.csv, line 5: column 'id': node id 'b' appears again "
                                                      r"\(first at .*nodes.csv, line 3")


@pytest.mark.unit
def test_an_empty_split(tmp_path):
    nodes = NODES.replace(",val\n", ",train\n")
    _refused(tmp_path, _write(tmp_path, nodes=nodes), r"column 'split': split 'val' is empty")
    entry = {**_write(tmp_path), "split_column": None, "train_fraction": 0.5, "val_fraction": 0.5}
    _refused(tmp_path, entry, r"the random split leaves split 'test' empty \(4 labelled nodes")


@pytest.mark.unit
def test_split_values_and_unlabelled_split_nodes(tmp_path):
    _refused(tmp_path, _write(tmp_path, nodes=NODES.replace(",test\n", ",testing\n")),
             r"nodes.csv, line 4: column 'split': split 'testing' is not train, val")
    _refused(tmp_path, _write(tmp_path, nodes=NODES.replace("b,0,1,1,val", "b,0,1,,val")),
             r"nodes.csv, line 3: column 'label': the node is in split 'val' but has no label")


@pytest.mark.unit
def test_a_csv_header_without_the_named_columns(tmp_path):
    entry = {**_write(tmp_path), "edge_columns": ["from", "to"]}
    _refused(tmp_path, entry, r"edges.csv: edges: no column 'from' \(the file has src, dst\)")
    entry = {**_write(tmp_path), "label_column": "class"}
    _refused(tmp_path, entry, r"nodes.csv: node_table: no column 'class' \(the file has id, f0, f1, label, split\)")


@pytest.mark.unit
def test_an_unknown_file_kind(tmp_path):
    entry = _write(tmp_path, edges_name="edges.xlsx")
    _refused(tmp_path, entry, r"edges.xlsx: edges: unknown file kind '.xlsx'; give Parquet")


@pytest.mark.unit
def test_text_ids_against_integer_ids(tmp_path):
    """A Parquet node table of integer ids and a CSV edge list naming a node 'a': named, not a type error."""
    entry = _write(tmp_path, edges="src,dst\n1,2\n2,a\n")
    pq.write_table(pa.table({"id": [1, 2, 3], "f0": [0.0, 1.0, 0.5], "label": [0, 1, 0],
                             "split": ["train", "val", "test"]}), tmp_path / "nodes.parquet")
    entry.update(node_table=str(tmp_path / "nodes.parquet"), feature_columns=["f0"])
    _refused(tmp_path, entry, r"edges.csv, line 3: column 'dst': 'a' is not an integer, as the node table's ids are")
    (tmp_path / "edges.csv").write_text("src,dst\n1,2\n2,3\n")
    download("mine", tmp_path / "ok", section("dataset", entry))
    assert load_graph(tmp_path / "ok").num_edges == 4


@pytest.mark.unit
def test_a_missing_file_and_missing_knobs(tmp_path):
    entry = {**_write(tmp_path), "edges": str(tmp_path / "nope.csv")}
    _refused(tmp_path, entry, r"nope.csv: edges: no such file or folder")
    with pytest.raises(SylvieError, match=r"dataset 'mine': source files needs edges and node_table"):
        check_dataset("mine", section("dataset", {"source": "files"}))
    with pytest.raises(SylvieError, match=r"give the split once: split_column or mask_columns"):
        check_dataset("mine", section("dataset", {**_write(tmp_path), "mask_columns": ["a", "b", "c"]}))


@pytest.mark.slow
def test_gzip_csv_and_the_command_line_exit(tmp_path):
    """Through `sylvie download`: a gzip CSV reads; a bad one exits non-zero with the one line, writing nothing."""
    entry = _write(tmp_path, edges_name="edges.csv.gz", nodes_name="nodes.csv.gz",
                   edges="src,dst\na,b\nb,q\n")
    flags = ["--source", "files", "--edges", entry["edges"], "--node-table", entry["node_table"], "--node-key", "id",
             "--feature-columns", "f*", "--split-column", "split"]
    p = run([str(BIN / "sylvie"), "download", "mine", *flags, "--out", str(tmp_path / "ds")], check=False)
    assert p.returncode != 0 and not (tmp_path / "ds").exists()
    assert "edges.csv.gz, line 3: column 'dst': node 'q' is not in the node table" in p.stderr.strip().splitlines()[-1]
    p = run([str(BIN / "sylvie"), "download", "mine", *flags, "--unknown-nodes", "add", "--out", str(tmp_path / "ds")])
    assert "5 nodes, 4 edges" in p.stderr


@pytest.mark.unit
def test_dgl_source_without_dgl_names_the_install_command(tmp_path, monkeypatch):
    (tmp_path / "g.bin").write_bytes(b"")
    real_import = builtins.__import__

    def no_dgl(name, *args, **kw):
        if name == "dgl" or name.startswith("dgl."):
            raise ModuleNotFoundError("No module named 'dgl'")
        return real_import(name, *args, **kw)

    monkeypatch.delitem(sys.modules, "dgl", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_dgl)
    _refused(tmp_path, {"source": "dgl", "graph_file": str(tmp_path / "g.bin")},
             r"g.bin: source dgl reads the file with DGL, which is not installed here: pip install dgl==1.1.3")


# ---- what a real table holds: several files, many chunks, late values, text that looks like something else -------

@pytest.mark.unit
def test_a_folder_of_files_read_in_many_chunks(tmp_path, monkeypatch):
    """Node and edge tables split over files (Spark's layout, its _SUCCESS marker skipped), read in chunks of a few
    rows: the rows of every file, in name order; a bad row named by its own file and line."""
    import sylvie.data.table_files as table_files

    monkeypatch.setattr(table_files, "_CHUNK_BYTES", 256)  # 1024 rows a Parquet chunk, 256 bytes a CSV block
    n = 3000
    ids = [f"n{i:05d}" for i in range(n)]
    (tmp_path / "nodes").mkdir()
    for part, rows in enumerate((range(0, 1000), range(1000, n))):
        pq.write_table(pa.table({"id": [ids[i] for i in rows], "f0": [float(i) for i in rows],
                                 "label": [None if i < 1500 else i % 3 for i in rows],  # the first 1500 unlabelled
                                 "split": [None if i < 1500 else ("train", "val", "test")[i % 3] for i in rows]}),
                       tmp_path / "nodes" / f"part-{part}.parquet")
    (tmp_path / "nodes" / "_SUCCESS").write_text("")
    (tmp_path / "edges").mkdir()
    for part in range(2):
        lines = "".join(f"{ids[i]},{ids[(i * 7 + 1) % n]}\n" for i in range(part, n, 2))
        (tmp_path / "edges" / f"part-{part}.csv").write_text("src,dst\n" + lines)
    entry = {"source": "files", "edges": str(tmp_path / "edges"), "node_table": str(tmp_path / "nodes"),
             "node_key": "id", "feature_columns": ["f0"], "split_column": "split", "directed": True}
    download("mine", tmp_path / "ok", section("dataset", entry))
    graph = load_graph(tmp_path / "ok")
    assert graph.num_nodes == n and graph.features[:, 0].tolist() == list(range(n))
    assert graph.labels[:1500].tolist() == [-1] * 1500 and graph.labels[1500:1503].tolist() == [0, 1, 2]
    pairs = sorted(zip(graph.src.tolist(), graph.dst.tolist()))
    assert pairs == sorted((i, (i * 7 + 1) % n) for i in range(n) if i != (i * 7 + 1) % n)
    (tmp_path / "edges" / "part-1.csv").write_text("src,dst\n" + "".join(f"{ids[i]},{ids[i + 1]}\n" for i in
                                                                             range(100)) + "n00001,zz\n")
    _refused(tmp_path, entry, r"edges/part-1.csv, line 102: column 'dst': node 'zz' is not in the node table")


@pytest.mark.unit
def test_csv_text_stays_text(tmp_path):
    """A CSV's ids and class names are read as written: '007' is not 7, 'NA' is a class, not a missing label; labels
    that are all integers are class numbers, wherever the first one appears."""
    nodes = "id,f0,label,split\n007,1,,\n7,0,NA,train\n008,1,EU,val\n009,0,NA,test\n010,1,EU,train\n"
    edges = "src,dst\n007,7\n7,008\n009,010\n"
    entry = {**_write(tmp_path, nodes=nodes, edges=edges), "feature_columns": ["f0"]}
    download("mine", tmp_path / "out", section("dataset", entry))
    graph = load_graph(tmp_path / "out")
    from sylvie.formats.node_keys import read_node_keys
    assert read_node_keys(tmp_path / "out", 5).to_pylist() == ["007", "7", "008", "009", "010"]
    assert graph.info["class_names"] == ["EU", "NA"] and graph.labels.tolist() == [-1, 1, 0, 1, 0]
    nodes = "id,f0,label,split\n" + "".join(f"n{i},1,,\n" for i in range(5000)) + "a,0,3,train\nb,1,0,val\nc,0,1,test\n"
    entry = {**_write(tmp_path, nodes=nodes, edges="src,dst\na,b\n"), "feature_columns": ["f0"]}
    download("mine2", tmp_path / "out2", section("dataset", entry))
    graph = load_graph(tmp_path / "out2")
    assert graph.num_classes == 4 and "class_names" not in graph.info and graph.labels[-3:].tolist() == [3, 0, 1]


@pytest.mark.unit
def test_an_empty_node_table(tmp_path):
    _refused(tmp_path, _write(tmp_path, nodes="id,f0,f1,label,split\n"),
             r"nodes.csv: node_table: the table has no rows")


@pytest.mark.unit
def test_unknown_row_numbers_added_without_gaps_only(tmp_path):
    entry = {**_write(tmp_path, edges="src,dst\n0,1\n3,4\n4,5\n"), "node_key": None, "unknown_nodes": "add"}
    download("mine", tmp_path / "ok", section("dataset", entry))
    assert load_graph(tmp_path / "ok").num_nodes == 6
    entry = {**_write(tmp_path, edges="src,dst\n0,1\n3,1000000\n"), "node_key": None, "unknown_nodes": "add"}
    _refused(tmp_path, entry, r"the edges name 1 nodes beyond the node table's 4 rows but reach number 1000000")


@pytest.mark.unit
def test_directed_edges_keep_their_order_once_each(tmp_path):
    entry = {**_write(tmp_path, edges="src,dst\nc,a\na,b\nc,a\nb,b\nd,a\na,b\n"), "directed": True}
    download("mine", tmp_path / "out", section("dataset", entry))
    graph = load_graph(tmp_path / "out")
    assert list(zip(graph.src.tolist(), graph.dst.tolist())) == [(2, 0), (0, 1), (3, 0)]
    assert graph.info["duplicates_removed"] == 2 and graph.info["self_loops_removed"] == 1


@pytest.mark.unit
def test_category_ids_and_a_glob_that_would_take_the_label(tmp_path):
    """pandas category columns (Arrow dictionaries) name nodes as their text does; a glob over every column leaves
    out the ids, the label and the split."""
    entry = _write(tmp_path)
    table = pa.table({"src": pa.array(["a", "b", "c"]).dictionary_encode(),
                      "dst": pa.array(["b", "c", "d"]).dictionary_encode()})
    pq.write_table(table, tmp_path / "edges.parquet")
    entry.update(edges=str(tmp_path / "edges.parquet"), feature_columns=["*"])
    download("mine", tmp_path / "out", section("dataset", entry))
    graph = load_graph(tmp_path / "out")
    assert graph.num_edges == 6 and graph.features.shape == (4, 2)


@pytest.mark.unit
def test_a_changed_node_keys_file_is_refused(tmp_path):
    from sylvie.formats.node_keys import FILE, read_node_keys

    download("mine", tmp_path / "out", section("dataset", _write(tmp_path)))
    meta = load_graph(tmp_path / "out").info
    assert read_node_keys(tmp_path / "out", 4, meta["node_keys_sha256"]).to_pylist() == ["a", "b", "c", "d"]
    path = tmp_path / "out" / FILE
    data = bytearray(path.read_bytes())
    data[data.index(b"abcd")] = ord("x")
    path.write_bytes(bytes(data))
    with pytest.raises(SylvieError, match=r"node_keys.arrow: changed since `sylvie download` wrote it"):
        read_node_keys(tmp_path / "out", 4, meta["node_keys_sha256"])


# ---- issue 57: a folder read whole, a column in one role, one clear line, a warning for a quiet surprise ----------

def _folder(tmp_path, name: str, parts: dict) -> str:
    (tmp_path / name).mkdir(exist_ok=True)
    for part, text in parts.items():
        (tmp_path / name / part).write_text(text)
    return str(tmp_path / name)


@pytest.mark.unit
def test_a_folder_is_read_whole_or_refused_by_name(tmp_path, monkeypatch):
    """Every entry of a folder (hidden and _-prefixed ones aside) is a file of the table, read, or an error naming
    it; and its files agree on the columns read (a glob resolved on each), so no column or part is left out."""
    import os

    entry = _write(tmp_path)
    entry["node_table"] = _folder(tmp_path, "nodes", {"part-0.csv": "id,f0,label,split\na,1,0,train\nb,0,1,val\n",
                                                      "part-1.csv": "id,f0,f1,label,split\nc,1,1,0,test\n"})
    _refused(tmp_path, entry, r"nodes/part-1.csv: node_table: column 'f1' \(matched by 'f\*'\) is not in part-0.csv; "
                              r"the files of a folder are one table")
    (tmp_path / "nodes" / "part-1.csv").write_text("id,label,split\nc,0,test\nd,1,train\n")
    _refused(tmp_path, entry, r"nodes/part-1.csv: node_table: no column 'f0', which part-0.csv has")
    entry = _write(tmp_path)
    entry["edges"] = _folder(tmp_path, "edges", {"part-0.csv": "src,dst\na,b\n", "part-1.csv": "src,to\nb,c\n"})
    _refused(tmp_path, entry, r"edges/part-1.csv: edges: no column 'dst', which part-0.csv has")
    edges = tmp_path / "edges"
    (edges / "part-1.csv").write_text("src,dst\nb,c\n")
    (edges / ".part-1.csv.crc").write_text("x")  # hidden, and Spark's marker: skipped
    (edges / "_SUCCESS").write_text("")
    (tmp_path / "more.csv").write_text("src,dst\nc,d\n")
    (edges / "part-2.csv").symlink_to(tmp_path / "more.csv")  # a link to a file: read
    download("mine", tmp_path / "ok", section("dataset", entry))
    assert load_graph(tmp_path / "ok").num_edges == 6
    bad = edges / "part-3.csv"
    bad.symlink_to(tmp_path / "gone.csv")
    _refused(tmp_path, entry, r"edges/part-3.csv: edges: a symbolic link to .*gone.csv, which does not exist")
    bad.unlink()
    bad.symlink_to(bad)
    _refused(tmp_path, entry, r"edges/part-3.csv: edges: a symbolic link that leads back to itself")
    bad.unlink()
    os.mkfifo(bad)
    _refused(tmp_path, entry, r"edges/part-3.csv: edges: a FIFO \(named pipe\), not a file of the table")
    bad.unlink()
    bad.write_text("src,dst\nd,a\n")
    readable = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: str(p) != str(bad) and readable(p, mode))  # we run as root
    _refused(tmp_path, entry, r"edges/part-3.csv: edges: not readable \(permission denied\)")


@pytest.mark.unit
def test_a_column_in_two_roles_is_refused_naming_both(tmp_path):
    """A column is the key, the label, a split column, a feature or an edge's end, one of them; and a feature is
    named once. A glob leaves out the columns of other roles."""
    entry = _write(tmp_path)
    both = r"nodes.csv: node_table: column '{}' is named both as {} and {}; "
    cases = [({"edge_columns": ["src", "src"]},
              r"edges.csv: edges: edge_columns names column 'src' both as the source and as the destination"),
             ({"feature_columns": ["f0", "label"]}, both.format("label", "label_column", "in feature_columns") +
              r"a column has one role \(a label among the features leaks the answer\)"),
             ({"feature_columns": ["f0", "f0"]}, r"feature_columns names column 'f0' by 'f0' twice"),
             ({"feature_columns": ["f0", "f*"]}, r"feature_columns names column 'f0' by both 'f0' and 'f\*'"),
             ({"label_column": "id"}, both.format("id", "node_key", "as label_column")),
             ({"split_column": "label"}, both.format("label", "label_column", "as split_column")),
             ({"split_column": "f0", "feature_columns": ["f0", "f1"]},
              both.format("f0", "split_column", "in feature_columns")),
             ({"split_column": None, "mask_columns": ["split", "split", "f1"]},
              both.format("split", r"mask_columns \(train\)", r"as mask_columns \(val\)")),
             ({"split_column": None, "mask_columns": ["f0", "f1", "label"]},
              both.format("label", "label_column", r"as mask_columns \(test\)"))]
    for change, message in cases:
        _refused(tmp_path, {**entry, **change}, message)
    _refused(tmp_path, _write(tmp_path, nodes=NODES.replace("f1", "f0")),
             r"nodes.csv: node_table: the file has 2 columns named 'f0', so which one is meant is unknown")
    entry = _write(tmp_path, nodes=NODES.replace("label", "flag"))  # the glob f* leaves the label out
    download("mine", tmp_path / "ok", section("dataset", {**entry, "label_column": "flag"}))
    assert load_graph(tmp_path / "ok").features.shape == (4, 2)


@pytest.mark.unit
def test_unclear_input_is_one_clear_line(tmp_path, capsys):
    """A file that is not what its name says, a Feather V1 file, a mask or feature value named by its column and
    line (Arrow names a column by number), a (2, 2) .npy edge array: each one line naming the file; the command
    exits 2 and writes nothing."""
    import gzip

    import pyarrow.feather as feather

    from sylvie.cli import main

    entry = _write(tmp_path)
    with pytest.warns(DeprecationWarning):
        feather.write_feather(pa.table({"src": ["a"], "dst": ["b"]}), tmp_path / "v1.feather", version=1)
    pq.write_table(pa.table({"src": ["a"], "dst": ["b"]}), tmp_path / "pq.csv")
    pq.write_table(pa.table({"src": ["a"], "dst": ["b"]}), tmp_path / "cut.parquet")
    (tmp_path / "cut.parquet").write_bytes((tmp_path / "cut.parquet").read_bytes()[:-9])
    np.save(tmp_path / "square.npy", np.array([[0, 1], [1, 2]]))
    files = {"empty.csv": b"", "text.parquet": EDGES.encode(), "plain.csv.gz": EDGES.encode(),
             "zipped.csv": gzip.compress(EDGES.encode()), "empty.npy": b"", "ragged.csv": b"src,dst\na,b\nb,c,d\n",
             "tabs.csv": b"src\tdst\na\tb\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    cases = [("v1.feather", r"v1.feather: edges: a Feather V1 file, an old format .*write it again as Feather V2"),
             ("pq.csv", r"pq.csv: edges: the file is a Parquet file, not CSV text as its name says; rename it to "
                        r"\.parquet"),
             ("cut.parquet", r"cut.parquet: edges: the Parquet file is cut short"),
             ("square.npy", r"square.npy: edges: an array of shape \(2, 2\), which may be two edges as rows .*the two "
                            r"cannot be told apart; give these edges as a CSV or Parquet edge list"),
             ("empty.csv", r"empty.csv: edges: the file is empty \(0 bytes\)"),
             ("text.parquet", r"text.parquet: edges: not a Parquet file \(it does not begin as one does\)"),
             ("plain.csv.gz", r"plain.csv.gz: edges: not gzip-compressed, though its name ends .gz"),
             ("zipped.csv", r"zipped.csv: edges: gzip-compressed, though its name does not end .gz; rename it "
                            r"zipped.csv.gz"),
             ("empty.npy", r"empty.npy: edges: the file is empty"),
             ("ragged.csv", r"ragged.csv, line 3: edges: 3 fields where the header has 2"),
             ("tabs.csv", r"tabs.csv: edges: the header is one column, 'src\\tdst', separated by tabs")]
    for name, message in cases:
        _refused(tmp_path, {**entry, "edges": str(tmp_path / name), "node_key": None if ".npy" in name else "id"},
                 message)
    nodes = "id,f0,label,tr,va,te\na,1,0,1,0,0\nb,0,1,0,1,0\nc,1,0,0,0,1\nd,0,1,2,0,0\n"
    masks = {**_write(tmp_path, nodes=nodes), "split_column": None, "mask_columns": ["tr", "va", "te"]}
    _refused(tmp_path, masks, r"nodes.csv, line 5: node_table: column 'tr': '2' is not true/false or 1/0")
    _write(tmp_path, nodes=NODES.replace("c,1,1,0", "c,1,x,0"))
    _refused(tmp_path, entry, r"nodes.csv, line 4: node_table: column 'f1': 'x' is not a number")
    _write(tmp_path)
    flags = ["--source", "files", "--edges", str(tmp_path / "v1.feather"), "--node-table", entry["node_table"],
             "--node-key", "id", "--feature-columns", "f*", "--split-column", "split"]
    capsys.readouterr()
    assert main(["download", "mine", *flags, "--out", str(tmp_path / "ds")]) == 2
    assert not (tmp_path / "ds").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "v1.feather: edges: a Feather V1 file" in err[0]


@pytest.mark.unit
def test_quiet_surprises_say_so_in_a_warning(tmp_path, caplog):
    """A graph that reads but is likely not what was meant: no edges (a header only), every edge a self-loop, a
    class number no node has, one class only, a class with no node in the train split: one warning line each."""
    said = []

    def warned(entry: dict, name: str) -> str:
        caplog.clear()
        with caplog.at_level("WARNING", logger="sylvie"):
            download(name, tmp_path / name, section("dataset", entry))
        lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        said.extend(lines)
        return " | ".join(lines)

    assert "edges.csv: the edge list has no edges (a header only" in warned(_write(tmp_path, edges="src,dst\n"), "a")
    assert "edges.csv: every edge (2) is a self-loop, and self-loops are dropped: the graph has no edges" in \
        warned({**_write(tmp_path, edges="src,dst\na,a\nb,b\n"), "directed": True}, "b")
    gap = NODES.replace("d,0,0,1,train", "d,0,0,3,train").replace("b,0,1,1,val", "b,0,1,0,val")
    assert "nodes.csv: column 'label': no node has class 1, 2, yet the classes are numbered 0..3" in \
        warned(_write(tmp_path, nodes=gap), "c")
    one = NODES.replace(",1,val", ",0,val").replace("0,0,1,train", "0,0,0,train")
    assert "nodes.csv: column 'label': every labelled node has the one class 0" in warned(_write(tmp_path, nodes=one),
                                                                                          "d")
    untrained = NODES.replace("b,0,1,1,val", "b,0,1,2,val")
    assert "nodes.csv: column 'label': class 2 has nodes but none in the train split" in \
        warned(_write(tmp_path, nodes=untrained), "e")
    assert not warned(_write(tmp_path), "f")
    assert all("\n" not in line for line in said)


# ---- what other tools write: text not in UTF-8, Arrow's view types, split -l parts, pipes, old and encrypted files --

@pytest.mark.unit
def test_text_not_in_utf8_is_named_with_the_command_that_converts_it(tmp_path):
    """UTF-16 or UTF-32 text (Excel's "Unicode text", PowerShell 5), with or without a byte order mark, gzip'd or
    not, and Latin-1 bytes in a value or the header: one line naming the file (and the line, column and byte of a
    value), with the iconv command, not a count of fields or a column by number; NUL bytes are not text."""
    entry = _write(tmp_path)
    latin = "id,f0,f1,label,split\na,1,0,0,train\nb,0,1,1,val\nc\xe9,1,1,0,test\nd,0,0,1,train\n".encode("latin-1")
    files = {"n16.csv": NODES.encode("utf-16"), "n16le.csv": NODES.encode("utf-16-le"),
             "n16be.tsv": NODES.replace(",", "\t").encode("utf-16-be"), "n32.csv": NODES.encode("utf-32"),
             "n16.csv.gz": gzip.compress(NODES.encode("utf-16")), "latin.csv": latin,
             "latin.csv.gz": gzip.compress(latin), "split.csv": NODES.replace("test", "t\xe9st").encode("cp1252"),
             "header.csv": NODES.replace("label", "lab\xe9l").encode("latin-1"),
             "nul.csv": b"id,f0\x00\x01\x02\x03,label\na,1,0\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    iconv = r"save it as UTF-8 \(e.g. iconv -f {} -t UTF-8 IN > OUT\)"
    cases = [("n16.csv", r"n16.csv: node_table: the file is UTF-16 text; " + iconv.format("UTF-16")),
             ("n16le.csv", r"n16le.csv: node_table: the file is UTF-16 text; " + iconv.format("UTF-16LE")),
             ("n16be.tsv", r"n16be.tsv: node_table: the file is UTF-16 text; " + iconv.format("UTF-16BE")),
             ("n32.csv", r"n32.csv: node_table: the file is UTF-32 text; " + iconv.format("UTF-32")),
             ("n16.csv.gz", r"n16.csv.gz: node_table: the file is UTF-16 text; save it as UTF-8 \(e.g. zcat IN \| "
                            r"iconv -f UTF-16 -t UTF-8 \| gzip > OUT\)"),
             ("latin.csv", r"latin.csv, line 4: node_table: column 'id': byte 0xe9 of b'c\\xe9' is not UTF-8 text: "
                           r"the file is in another encoding; save it as UTF-8 \(e.g. from Latin-1: iconv -f LATIN1 "
                           r"-t UTF-8 IN > OUT\)"),
             ("latin.csv.gz", r"latin.csv.gz, line 4: node_table: column 'id': byte 0xe9 .* zcat IN \| iconv"),
             ("split.csv", r"split.csv, line 4: node_table: column 'split': byte 0xe9 of b't\\xe9st' is not UTF-8"),
             ("header.csv", r"header.csv, line 1: node_table: the header is not UTF-8 text \(byte 0xe9\)"),
             ("nul.csv", r"nul.csv: node_table: not text \(it holds NUL bytes")]
    for name, message in cases:
        said = _refused(tmp_path, {**entry, "node_table": str(tmp_path / name)}, message)
        assert "fields where" not in said and "#" not in said
    (tmp_path / "edges.csv").write_bytes("src,dst\na,b\nb,\xe9\n".encode("latin-1"))
    _refused(tmp_path, entry, r"edges.csv, line 3: edges: column 'dst': byte 0xe9 of b'\\xe9' is not UTF-8 text")


@pytest.mark.unit
@pytest.mark.skipif(not hasattr(pa, "string_view"), reason="Arrow's view types came in pyarrow 16")
def test_arrow_view_types_as_polars_writes_them_read_as_their_values(tmp_path):
    """Polars >= 1.0 writes text as string_view (ids, labels, splits), bytes as binary_view and lists as list
    views: read as text and lists, in Arrow IPC and Parquet, the values as written; bytes not UTF-8 are named."""
    import pyarrow.feather as feather

    from sylvie.formats.node_keys import read_node_keys

    ids, feat = pa.array(["a", "b", "c", "d"], pa.string_view()), [[1., 0], [0, 1], [1, 1], [0, 0]]
    labels = pa.array(["x", "y", "x", "y"], pa.string_view())
    nodes = pa.table({"id": ids, "feat": pa.array(feat, pa.large_list_view(pa.float64())), "label": labels,
                      "split": pa.array(["train", "val", "test", "train"], pa.string_view())})
    edges = pa.table({"src": pa.array([b"a", b"b", b"c"], pa.binary_view()), "dst": ids.slice(1)})
    pq.write_table(nodes, tmp_path / "nodes.parquet")
    feather.write_feather(edges, tmp_path / "edges.arrow")
    feather.write_feather(nodes.set_column(1, "feat", pa.array(feat, pa.list_view(pa.float64())))
                          .set_column(2, "label", labels.dictionary_encode()), tmp_path / "nodes.arrow")
    for i, table in enumerate(("nodes.parquet", "nodes.arrow")):
        entry = {**_write(tmp_path), "node_table": str(tmp_path / table), "edges": str(tmp_path / "edges.arrow"),
                 "feature_columns": ["feat"]}
        download("mine", tmp_path / f"ok{i}", section("dataset", entry))
        graph = load_graph(tmp_path / f"ok{i}")
        assert graph.features.tolist() == [[1, 0], [0, 1], [1, 1], [0, 0]]
        assert graph.labels.tolist() == [0, 1, 0, 1] and graph.info["class_names"] == ["x", "y"]
        assert graph.train_mask.tolist() == [True, False, False, True] and graph.num_edges == 6
        assert read_node_keys(tmp_path / f"ok{i}", 4).to_pylist() == ["a", "b", "c", "d"]
    feather.write_feather(edges.set_column(0, "src", pa.array([b"a", b"\xe9", b"c"], pa.binary_view())),
                          tmp_path / "edges.arrow")
    _refused(tmp_path, entry, r"edges.arrow, row 1: edges: column 'src' holds bytes, and b'\\xe9' is not UTF-8 text")


@pytest.mark.unit
def test_a_part_without_the_header_a_pipe_an_old_stream_an_encrypted_file(tmp_path):
    """A folder cut by split -l (the header in its first part only) shows the part's first line; a later part with
    other columns shows them; a FIFO or /dev/fd/N given as the table says to write it to a file (not advice about
    folder entries); an Arrow stream from before Arrow 0.15 is read; an encrypted Parquet file says so."""
    import os

    import pyarrow.ipc as ipc

    entry = _write(tmp_path)
    entry["edges"] = _folder(tmp_path, "edges", {"part-aa.csv": "src,dst\na,b\n", "part-ab.csv": "b,c\nc,d\n"})
    _refused(tmp_path, entry, r"edges/part-ab.csv: edges: no column 'src', which part-aa.csv has, and its first line "
                              r"reads 'b,c', not the header: every part file needs the header line \('src,dst'; "
                              r"split -l leaves it in the first part only\)")
    nodes = _folder(tmp_path, "nodes", {"part-aa.csv": NODES, "part-ab.csv": "id,f0,f1,class,split\ne,1,0,0,val\n"})
    _refused(tmp_path, {**_write(tmp_path), "node_table": nodes},
             r"nodes/part-ab.csv: node_table: no column 'label', which part-aa.csv has \(the file has id, f0, f1, "
             r"class, split\); the files of a folder are one table")
    os.mkfifo(tmp_path / "fifo.csv")
    read_end, write_end = os.pipe()
    try:
        for path in (tmp_path / "fifo.csv", f"/dev/fd/{read_end}"):
            said = _refused(tmp_path, {**_write(tmp_path), "edges": str(path)},
                            rf"{path}: edges: a FIFO \(named pipe\), not a regular file: .* write the table to a "
                            r"regular file first, and give that file")
            assert "folder" not in said
    finally:
        os.close(read_end)
        os.close(write_end)
    table = pa.table({"src": ["a", "b", "c"], "dst": ["b", "c", "d"]})
    with open(tmp_path / "old.arrow", "wb") as f, ipc.new_stream(
            f, table.schema, options=ipc.IpcWriteOptions(use_legacy_format=True)) as writer:
        writer.write_table(table)
    download("mine", tmp_path / "old", section("dataset", {**_write(tmp_path), "edges": str(tmp_path / "old.arrow")}))
    assert load_graph(tmp_path / "old").num_edges == 6
    pq.write_table(table, tmp_path / "plain.parquet")
    data = (tmp_path / "plain.parquet").read_bytes()
    (tmp_path / "sealed.parquet").write_bytes(b"PARE" + data[4:-4] + b"PARE")  # an encrypted footer's magic
    _refused(tmp_path, {**_write(tmp_path), "edges": str(tmp_path / "sealed.parquet")},
             r"sealed.parquet: edges: an encrypted Parquet file .*which is not read: decrypt it first")
    encryption = pytest.importorskip("pyarrow.parquet.encryption")

    class Kms(encryption.KmsClient):  # keys wrapped as themselves: a test's key store
        def wrap_key(self, key, master_key_identifier):
            return key

        def unwrap_key(self, wrapped, master_key_identifier):
            return wrapped

    config = encryption.EncryptionConfiguration(footer_key="f", column_keys={"c": ["src", "dst"]},
                                                plaintext_footer=True, double_wrapping=False)
    keys = encryption.KmsConnectionConfig(custom_kms_conf={"f": "0123456789012345", "c": "1234567890123456"})
    properties = encryption.CryptoFactory(lambda _: Kms()).file_encryption_properties(keys, config)
    with pq.ParquetWriter(tmp_path / "columns.parquet", table.schema, encryption_properties=properties) as writer:
        writer.write_table(table)  # the footer in plain text (PAR1), the columns encrypted
    _refused(tmp_path, {**_write(tmp_path), "edges": str(tmp_path / "columns.parquet")},
             r"columns.parquet: edges: an encrypted Parquet file \(its columns encrypted\), which is not read")


@pytest.mark.unit
def test_each_file_of_a_table_has_its_columns_read_once(tmp_path, monkeypatch):
    """A node table's columns are read once per file (once for the roles, the features and the reading of the
    rows alike), not three or four times."""
    import sylvie.data.table_files as table_files

    read = []
    column_names = table_files.column_names
    monkeypatch.setattr(table_files, "column_names", lambda path, *a: read.append(path) or column_names(path, *a))
    entry = _write(tmp_path)
    entry["node_table"] = _folder(tmp_path, "nodes", {"part-0.csv": NODES, "part-1.csv": "id,f0,f1,label,split\n"})
    download("mine", tmp_path / "ok", section("dataset", entry))
    assert sorted(p.name for p in read) == ["edges.csv", "part-0.csv", "part-1.csv"]
