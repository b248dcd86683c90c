"""Link prediction's datasets: an edge split drawn at random (``edge_split``, Cora 85/5/10 against 100 filtered
negatives) or given in a user's files (a split column, files per split, a negatives list column), written with the
canonical graph and carried into its partitions; every bad input a one-line error naming the file, row or key, with
nothing written."""
import json
import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.commands import BIN, CORA_RAW, refused_line, run

from sylvie import cli
from sylvie.config import resolve_runs, section
from sylvie.data.graph import Graph, load_graph
from sylvie.data.link_split import draw_negatives, positive_keys, split_edges
from sylvie.data.registry import download, load
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TEST, TRAIN, VAL

CORA = {"source": "planetoid", "raw_dir": str(CORA_RAW), "allow_download": False}


def _keys(src, dst, n):
    return set((np.asarray(src) * n + np.asarray(dst)).tolist())


# ---- a random split of Cora ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cora_link(tmp_path_factory):
    """Cora as given, and Cora with 5% of its edges held out for validation and 10% for test, downloaded."""
    out = tmp_path_factory.mktemp("link") / "cora"
    download("cora", out, section("dataset", {**CORA, "edge_split": [0.05, 0.1]}))
    return load("cora", section("dataset", CORA)), out


@pytest.mark.unit
def test_cora_split_holds_out_both_directions(cora_link):
    whole, out = cora_link
    graph = load_graph(out)
    link, n = graph.link, graph.num_nodes
    pairs = whole.num_edges // 2  # Cora's edges are stored both ways
    assert link.undirected and link.counts() == {"train": pairs - 264 - 528, "val": 264, "test": 528}
    assert graph.num_edges == 2 * link.counts()["train"]
    message = _keys(graph.src, graph.dst, n)
    assert message <= _keys(whole.src, whole.dst, n)
    for s in (VAL, TEST):
        at = link.indices(s)
        u, v = link.src[at], link.dst[at]
        assert not (_keys(u, v, n) | _keys(v, u, n)) & message, "a held-out edge passes messages"
        assert _keys(u, v, n) <= _keys(whole.src, whole.dst, n)
    train = link.indices("train")
    assert (link.src[train] < link.dst[train]).all()
    assert _keys(link.src[train], link.dst[train], n) | _keys(link.dst[train], link.src[train], n) == message
    meta = json.loads((out / "meta.json").read_text())
    assert meta["link"] == link.counts() and meta["link_pairs_sha256"]


@pytest.mark.unit
def test_cora_negatives_are_filtered_and_drawn_by_the_seed(cora_link):
    whole, out = cora_link
    link, n = load_graph(out).link, whole.num_nodes
    assert link.negatives.shape == (264 + 528, 100)
    evaluated = link.split != TRAIN
    u = link.src[evaluated][:, None]
    edges = _keys(whole.src, whole.dst, n)
    neg = link.negatives
    assert not (neg == u).any() and not (neg == link.dst[evaluated][:, None]).any()
    assert not np.isin(u * n + neg, np.array(sorted(edges))).any(), "a negative is an edge of some split"
    assert all(len(set(row)) == 100 for row in neg.tolist())
    assert (link.negatives_of("val") == neg[:264]).all()
    again = split_edges(whole, [0.05, 0.1], 0, 100, "cora").link
    assert (again.negatives == neg).all() and (again.src == link.src).all() and (again.dst == link.dst).all()
    other = split_edges(whole, [0.05, 0.1], 1, 100, "cora").link
    assert not (other.src == link.src).all() and not np.array_equal(other.negatives, neg)


@pytest.mark.unit
def test_cora_split_reaches_the_partition(cora_link, tmp_path, capsys):
    _, out = cora_link
    assert cli.main(["partition", str(out), "--out", str(tmp_path / "p2"), "--parts", "2", "-q"]) == 0
    manifest = json.loads((tmp_path / "p2" / "manifest.json").read_text())
    meta = json.loads((out / "meta.json").read_text())
    assert (tmp_path / "p2" / "link_pairs.arrow").read_bytes() == (out / "link_pairs.arrow").read_bytes()
    assert manifest["link_pairs"] == {"link_pairs_sha256": meta["link_pairs_sha256"]}


@pytest.mark.unit
def test_a_directed_graph_holds_out_one_direction():
    """A directed graph's pair is its edge as given: (u, v) held out leaves (v, u) passing messages."""
    src = np.array([0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 0, 2], np.int64)
    dst = np.array([1, 0, 2, 1, 3, 2, 4, 3, 5, 4, 5, 0], np.int64)  # 2 -> 0 and 0 -> 5 one way only
    n = 6
    graph = Graph(name="g", src=src, dst=dst, features=np.zeros((n, 1), np.float32), labels=np.zeros(n, np.int64),
                  train_mask=np.ones(n, bool), val_mask=np.zeros(n, bool), test_mask=np.zeros(n, bool), num_classes=1)
    out = split_edges(graph, [0.2, 0.2], 3, 2, "g")
    link = out.link
    assert not link.undirected and link.counts() == {"train": 8, "val": 2, "test": 2}
    held = _keys(link.src[link.split != TRAIN], link.dst[link.split != TRAIN], n)
    assert _keys(out.src, out.dst, n) == _keys(src, dst, n) - held


@pytest.mark.unit
def test_negatives_of_a_node_joined_to_most_others():
    """A source joined to all but a few nodes: its negatives are those few, drawn from the listed allowed nodes."""
    n = 40
    src = np.zeros(n - 6, np.int64)
    dst = np.arange(1, n - 5, dtype=np.int64)  # 0 joined to 1..34: 35..39 allowed
    positives = positive_keys(src, dst, n, True)
    neg = draw_negatives(np.array([0, 0]), np.array([1, 2]), positives, n, 5, 0, "g")
    assert all(sorted(row) == [35, 36, 37, 38, 39] for row in neg.tolist())
    with pytest.raises(SylvieError, match=r"g: eval_negatives 6: node 0 of the pair \(0, 1\) has 5 nodes it is joined "
                                          r"to by no edge of any split, too few .*set eval_negatives to at most 5"):
        draw_negatives(np.array([0]), np.array([1]), positives, n, 6, 0, "g")


# ---- a user's files ------------------------------------------------------------------------------------------------

IDS = [f"n{i}" for i in range(10)]
NODES = "id,f0,f1,label,split\n" + "".join(f"n{i},{i % 2},{i % 3},{i % 2},{('train', 'val', 'test')[i % 3]}\n"
                                            for i in range(10))
# a ring and two chords; the split of each
RING = [(i, (i + 1) % 10) for i in range(10)] + [(0, 5), (2, 7)]
SPLIT = ["train"] * 8 + ["val", "test", "valid", "2"]


def _edges_csv(rows, split=None, header="src,dst"):
    lines = [header + (",split" if split else "")]
    for i, (u, v) in enumerate(rows):
        lines.append(f"n{u},n{v}" + (f",{split[i]}" if split else ""))
    return "\n".join(lines) + "\n"


def _entry(tmp_path, edges, **more) -> dict:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "edges.csv").write_text(edges)
    return {"source": "files", "edges": str(tmp_path / "edges.csv"), "node_table": str(tmp_path / "nodes.csv"),
            "node_key": "id", "feature_columns": ["f*"], "split_column": "split", "eval_negatives": 3, **more}


def _flags(entry: dict) -> list[str]:
    out = []
    for k, v in entry.items():
        flag = k.replace("_", "-")
        if isinstance(v, bool):
            out.append(f"--{'' if v else 'no-'}{flag}")
        elif v is not None:
            out += [f"--{flag}", *(map(str, v) if isinstance(v, list) else [str(v)])]
    return out


@pytest.mark.unit
def test_a_split_column(tmp_path):
    entry = _entry(tmp_path, _edges_csv(RING, SPLIT), edge_split_column="split")
    download("mine", tmp_path / "out", section("dataset", entry))
    graph = load_graph(tmp_path / "out")
    link, n = graph.link, graph.num_nodes
    assert link.counts() == {"train": 8, "val": 2, "test": 2} and link.undirected
    assert link.split.tolist()[8:] == [VAL, TEST, VAL, TEST]  # file order
    assert link.src.tolist()[8:] == [8, 9, 0, 2] and link.dst.tolist()[8:] == [9, 0, 5, 7]
    assert _keys(graph.src, graph.dst, n) == _keys(*zip(*RING[:8]), n) | _keys(*reversed(list(zip(*RING[:8]))), n)
    u = link.src[8:, None]
    allowed = [sorted(set(range(n)) - {int(x)} - {v for a, v in RING + [(b, a) for a, b in RING] if a == x})
               for x in link.src[8:]]
    assert link.negatives.shape == (4, 3) and not (link.negatives == u).any()
    assert all(set(row) <= set(ok) and len(set(row)) == 3 for row, ok in zip(link.negatives.tolist(), allowed,
                                                                              strict=True))


@pytest.mark.unit
def test_files_per_split_with_a_negatives_column(tmp_path):
    entry = _entry(tmp_path, _edges_csv(RING[:8]))
    pq.write_table(pa.table({"src": ["n8", "n0"], "dst": ["n9", "n5"], "neg": [["n3", "n4"], ["n2", "n7"]]}),
                   tmp_path / "val.parquet")
    pq.write_table(pa.table({"src": ["n9"], "dst": ["n0"], "neg": [["n5", "n6"]]}), tmp_path / "test.parquet")
    entry.update(val_edges=str(tmp_path / "val.parquet"), test_edges=str(tmp_path / "test.parquet"),
                 negatives_column="neg")
    download("mine", tmp_path / "out", section("dataset", entry))
    link = load_graph(tmp_path / "out").link
    assert link.counts() == {"train": 8, "val": 2, "test": 1}
    assert link.negatives.tolist() == [[3, 4], [2, 7], [5, 6]]
    assert link.negatives_of("test").tolist() == [[5, 6]]


@pytest.mark.unit
def test_a_negatives_column_beside_a_split_column(tmp_path):
    entry = _entry(tmp_path, _edges_csv(RING[:8]))
    src, dst = zip(*RING)
    neg = [None] * 8 + [[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 3, 5]]
    pq.write_table(pa.table({"src": [IDS[u] for u in src], "dst": [IDS[v] for v in dst], "split": SPLIT,
                             "neg": pa.array([[IDS[i] for i in x] if x else None for x in neg])}),
                   tmp_path / "edges.parquet")
    entry.update(edges=str(tmp_path / "edges.parquet"), edge_split_column="split", negatives_column="neg")
    download("mine", tmp_path / "out", section("dataset", entry))
    assert load_graph(tmp_path / "out").link.negatives.tolist() == neg[8:]


@pytest.mark.unit
def test_a_leak_kept_when_asked(tmp_path, caplog):
    rows = RING[:8] + [(1, 0), (9, 0)]  # the val pair (1, 0) is the training edge (0, 1) the other way
    entry = _entry(tmp_path, _edges_csv(rows, SPLIT[:8] + ["val", "test"]), edge_split_column="split",
                   leaked_edges="keep")
    with caplog.at_level(logging.WARNING):
        download("mine", tmp_path / "out", section("dataset", entry))
    assert "1 validation and test pairs are also training edges" in caplog.text and "edges.csv, line 10" in caplog.text
    assert load_graph(tmp_path / "out").link.counts()["val"] == 1


@pytest.mark.unit
def test_a_directed_graph_leaks_one_way_only(tmp_path):
    rows = RING[:8] + [(1, 0), (9, 0)]
    entry = _entry(tmp_path, _edges_csv(rows, SPLIT[:8] + ["val", "test"]), edge_split_column="split", directed=True)
    download("mine", tmp_path / "out", section("dataset", entry))
    link = load_graph(tmp_path / "out").link
    assert not link.undirected and link.src.tolist()[8:] == [1, 9]


# ---- bad input: `sylvie download` refuses it in one line, writing nothing -----------------------------------------

def _refused(tmp_path, capsys, name: str, entry: dict) -> str:
    out = tmp_path / "out"
    line = refused_line(["download", name, *_flags(entry), "--out", str(out)], capsys)
    assert not out.exists(), "something was written"
    return line


@pytest.mark.unit
def test_an_unknown_split_value(tmp_path, capsys):
    entry = _entry(tmp_path, _edges_csv(RING, SPLIT[:9] + ["testing"] + SPLIT[10:]), edge_split_column="split")
    line = _refused(tmp_path, capsys, "mine", entry)
    assert "edges.csv, line 11: column 'split': split 'testing' is none of train, val (valid, validation), test, " \
           "or 0, 1, 2" in line


@pytest.mark.unit
def test_a_pair_naming_a_node_absent_from_the_node_table(tmp_path, capsys):
    entry = _entry(tmp_path, _edges_csv(RING[:8]))
    (tmp_path / "val.csv").write_text("src,dst\nn8,n9\nn0,zz\n")
    (tmp_path / "test.csv").write_text("src,dst\nn9,n0\n")
    entry.update(val_edges=str(tmp_path / "val.csv"), test_edges=str(tmp_path / "test.csv"))
    line = _refused(tmp_path, capsys, "mine", entry)
    assert "val.csv, line 3: column 'dst': node 'zz' is not in the node table" in line and "unknown_nodes" not in line


@pytest.mark.unit
def test_a_validation_pair_that_is_a_training_edge(tmp_path, capsys):
    rows = RING[:8] + [(1, 0), (9, 0)]
    entry = _entry(tmp_path, _edges_csv(rows, SPLIT[:8] + ["val", "test"]), edge_split_column="split")
    line = _refused(tmp_path, capsys, "mine", entry)
    assert "edges.csv, line 10: the val pair ('n1', 'n0') is also a training edge (in either direction: the graph " \
           "is undirected)" in line and "leaked_edges: keep" in line


@pytest.mark.unit
def test_negative_lists_of_unequal_length(tmp_path, capsys):
    entry = _entry(tmp_path, _edges_csv(RING[:8]))
    pq.write_table(pa.table({"src": ["n8", "n0"], "dst": ["n9", "n5"], "neg": [["n3", "n4"], ["n2"]]}),
                   tmp_path / "val.parquet")
    pq.write_table(pa.table({"src": ["n9"], "dst": ["n0"], "neg": [["n5", "n6"]]}), tmp_path / "test.parquet")
    entry.update(val_edges=str(tmp_path / "val.parquet"), test_edges=str(tmp_path / "test.parquet"),
                 negatives_column="neg")
    line = _refused(tmp_path, capsys, "mine", entry)
    assert "val.parquet, row 1: column 'neg': 1 negatives where" in line and "val.parquet, row 0 has 2" in line


@pytest.mark.unit
def test_no_training_edges(tmp_path, capsys):
    entry = _entry(tmp_path, _edges_csv(RING, ["val", "test"] * 6), edge_split_column="split")
    line = _refused(tmp_path, capsys, "mine", entry)
    assert "edges.csv: column 'split': no edge is in split 'train'" in line


@pytest.mark.unit
def test_edge_split_shares_summing_to_one(tmp_path, capsys):
    line = _refused(tmp_path, capsys, "cora", {**CORA, "edge_split": [0.5, 0.5]})
    assert "dataset 'cora': edge_split [0.5, 0.5]: the shares sum to 1, leaving no edge to train on" in line


@pytest.mark.unit
def test_an_edge_split_given_twice_or_without_its_relation_on_a_typed_graph(tmp_path, capsys):
    entry = _entry(tmp_path, _edges_csv(RING, SPLIT), edge_split_column="split", edge_split=[0.1, 0.1])
    assert "give the edge split once: edge_split or edge_split_column, not both" in _refused(tmp_path, capsys, "mine",
                                                                                            entry)
    mag = {"source": "synthetic", "preset": "mag", "nodes": 500, "edge_split": [0.1, 0.1]}
    line = _refused(tmp_path, capsys, "mag", mag)
    assert "dataset 'mag': edge_split on a typed graph needs edge_split_relation, the relation whose edges are split " \
           "and predicted (one of writes, cites, has_topic, affiliated_with" in line
    line = _refused(tmp_path, capsys, "mag", {**mag, "edge_split_relation": "citez"})
    assert "dataset 'mag': edge_split_relation 'citez' is none of the graph's relations (author:writes:paper, " in line
    line = _refused(tmp_path, capsys, "mine", {**entry, "edge_split_column": None, "edge_split_relation": "cites"})
    assert "dataset 'mine': edge_split_relation 'cites': the graph has one node type and one relation" in line


@pytest.mark.slow
def test_the_installed_command_exits_non_zero(tmp_path):
    entry = _entry(tmp_path, _edges_csv(RING, ["val", "test"] * 6), edge_split_column="split")
    p = run([str(BIN / "sylvie"), "download", "mine", *_flags(entry), "--out", str(tmp_path / "out")], check=False)
    assert p.returncode != 0 and not (tmp_path / "out").exists()
    assert "no edge is in split 'train'" in p.stderr.strip().splitlines()[-1]


@pytest.mark.unit
def test_a_link_run_needs_an_edge_split():
    config = {"datasets": {"cora": dict(CORA)}, "runs": {"lp": {"train": {"task": "link"}}}}
    with pytest.raises(SylvieError, match=r"runs\.lp\.train\.task: link prediction needs an edge split, and dataset "
                                          r"'cora' gives none; set datasets\.cora\.edge_split"):
        resolve_runs(config)
    config["datasets"]["cora"]["edge_split"] = [0.05, 0.1]
    assert resolve_runs(config)["lp"].train.task == "link"


@pytest.mark.unit
def test_no_negatives_is_refused():
    config = {"datasets": {"cora": {**CORA, "edge_split": [0.05, 0.1]}},
              "runs": {"lp": {"train": {"task": "link"}, "link": {"negatives": 0}}}}
    with pytest.raises(SylvieError, match=r"'runs\.lp\.link\.negatives': 0 is less than the minimum of 1"):
        resolve_runs(config)


@pytest.mark.unit
def test_pair_bits_under_sampled_training_is_refused_when_the_config_loads():
    config = {"datasets": {"cora": {**CORA, "edge_split": [0.05, 0.1]}},
              "runs": {"lp": {"train": {"task": "link", "mode": "sampled"}, "sampling": {"fanouts": [5, 5]},
                              "link": {"pair_bits": 1}}}}
    with pytest.raises(SylvieError, match=r"runs\.lp: link\.pair_bits 1 sets how full-graph training fetches .* set "
                                          r"link\.pair_bits to 32, or train\.mode to full"):
        resolve_runs(config)
    config["runs"]["lp"]["link"]["pair_bits"] = 32
    assert resolve_runs(config)["lp"].link.pair_bits == 32


@pytest.mark.unit
def test_edge_split_knobs_that_do_not_go_together(tmp_path):
    from sylvie.data.registry import check_dataset

    entry = _entry(tmp_path, _edges_csv(RING[:8]))
    for more, said in (({"val_edges": "v.csv"}, r"dataset 'mine': val_edges without test_edges"),
                       ({"negatives_column": "neg"}, r"dataset 'mine': negatives_column is a column of the validation "
                                                     r"and test pairs' file")):
        with pytest.raises(SylvieError, match=said):
            check_dataset("mine", section("dataset", {**entry, **more}))
    entry = _entry(tmp_path, _edges_csv(RING, SPLIT), edge_split_column="split", negatives_column="neg")
    with pytest.raises(SylvieError, match=r"edges.csv: edges: negatives_column 'neg': a csv file has no list columns"):
        download("mine", tmp_path / "out", section("dataset", entry))
    assert not (tmp_path / "out").exists()
