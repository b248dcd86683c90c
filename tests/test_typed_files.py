"""A typed graph from the user's files (``source: files`` with ``node_tables``, ``relations``, ``target``): a node
table per type and an edge list per relation, in mixed formats, with ids of their own per type (strings for some
types, integers for others, shuffled rows), read back to the graph they were written from; and each malformed input
refused in one line naming the file (or the config's key) and what to do, nothing written."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.graphs import write_files

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.registry import check_dataset, download
from sylvie.errors import SylvieError
from sylvie.graph_types import Relation

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def mag():
    # its own graph, not the shared small_mag_one_way: test_a_target_type_without_labels's refusal names row 0 of
    # the shuffled papers' table, a training node in this graph
    return generate_from(section("dataset", {"preset": "mag", "nodes": 4_000, "classes": 9, "features": 6,
                                             "reverse_relations": False}), "mag")


def test_a_typed_graph_from_files_is_the_graph_it_was_written_from(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    meta = download("mine", tmp_path / "g", section("dataset", options))
    assert meta["types"]["target"] == "paper" and len(meta["types"]["relations"]) == 8  # reverses added
    from sylvie.data.graph import load_graph
    got = load_graph(tmp_path / "g")
    assert got.node_counts == mag.node_counts and got.feature_widths == (6, None, None, None)
    # nodes are numbered in each table's (shuffled) row order: the same edges once numbered back
    orders = write_files.orders
    for r, rel in enumerate(mag.types.relations):
        assert got.types.relations[r] == rel
        s, d = mag.types.ends(r)
        mine, theirs = got.relation == r, mag.relation == r
        back = {(int(orders[rel.src][a]), int(orders[rel.dst][b])) for a, b in
                zip(got.src[mine] - got.type_offsets[s], got.dst[mine] - got.type_offsets[d], strict=True)}
        assert back == set(zip((mag.src[theirs] - mag.type_offsets[s]).tolist(),
                               (mag.dst[theirs] - mag.type_offsets[d]).tolist()))
    paper_rows = orders["paper"]
    assert np.array_equal(got.labels[:len(paper_rows)], mag.labels[paper_rows])
    assert np.array_equal(got.type_features[0], mag.type_features[0][paper_rows])
    assert got.types.relations[4] == Relation("paper", "rev-writes", "author")
    assert sorted(np.bincount(got.labels[got.labels >= 0])) == sorted(np.bincount(mag.labels[mag.labels >= 0]))
    assert got.train_mask.sum() == mag.train_mask.sum() and got.test_mask.sum() == mag.test_mask.sum()
    assert np.isclose(np.sort(got.type_features[0].sum(1)), np.sort(mag.type_features[0].sum(1))).all()


def _refused(options, tmp_path, match):
    with pytest.raises(SylvieError, match=match) as e:
        opts = section("dataset", options)
        check_dataset("mine", opts)
        download("mine", tmp_path / "g", opts)
    assert not (tmp_path / "g").exists()
    return str(e.value)


def test_a_relation_naming_an_unknown_type(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    options["relations"][0]["dst"] = "venue"
    _refused(options, tmp_path, r"datasets.mine: relations: relation \(author, writes, venue\) names node type "
                                r"'venue', which is not one of")


def test_no_target_type(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    del options["target"]
    _refused(options, tmp_path, "a typed graph from files needs node_tables, relations and target; target missing")


def test_ids_that_collide_within_a_type(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    path = options["node_tables"]["institution"]
    t = pq.read_table(path)
    ids = t.column("id").to_numpy().copy()
    ids[5] = ids[2]
    pq.write_table(t.set_column(0, "id", pa.array(ids)), path)
    _refused(options, tmp_path, r"institution.parquet, row \d+: column 'id': node id \d+ appears again")


def test_edges_naming_a_node_missing_from_its_types_table(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    path = options["relations"][0]["edges"]  # writes: author -> paper, Parquet
    t = pq.read_table(path)
    src = t.column("src").to_pylist()
    src[3] = "a999999"
    pq.write_table(t.set_column(0, "src", pa.array(src)), path)
    _refused(options, tmp_path, r"writes.parquet, row 3: column 'src' \(relations\[0\].edges: node type 'author'\): "
                                r"node 'a999999' is not in the node table .*add its row to that type's table")


def test_labels_on_a_type_that_is_not_the_target(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    path = options["node_tables"]["field_of_study"]
    t = pq.read_table(path)
    pq.write_table(t.append_column("label", pa.array(np.zeros(t.num_rows, np.int64))), path)
    _refused(options, tmp_path, r"field_of_study.parquet: node_tables.field_of_study: column 'label' gives node type "
                                r"'field_of_study' labels or a split, but the target type is 'paper'")


def test_a_feature_width_that_differs_between_a_types_files(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    papers = pq.read_table(options["node_tables"]["paper"])
    folder = tmp_path / "in" / "papers"
    folder.mkdir()
    half = papers.num_rows // 2
    pq.write_table(papers.slice(0, half), folder / "part-0.parquet")
    rest = papers.slice(half)
    wider = pa.array([row + [0.0] for row in rest.column("feat").to_pylist()], pa.list_(pa.float32()))
    pq.write_table(rest.set_column(rest.schema.get_field_index("feat"), "feat", wider), folder / "part-1.parquet")
    options["node_tables"]["paper"] = str(folder)
    _refused(options, tmp_path, r"part-1.parquet, row 0: column 'feat': a list of 7 features where the first row has "
                                r"6; every node needs as many")


def test_one_type_and_one_relation_is_the_homogeneous_graph_with_its_features(mag, tmp_path):
    options = write_files(mag, tmp_path / "in")
    options["node_tables"] = {"paper": options["node_tables"]["paper"]}
    options["relations"] = [r for r in options["relations"] if r["name"] == "cites"]
    options["reverse_relations"] = False
    download("mine", tmp_path / "g", section("dataset", options))
    from sylvie.data.graph import load_graph
    got = load_graph(tmp_path / "g")
    assert not got.typed and got.features.shape == (mag.node_counts[0], 6)
    assert got.num_edges == (mag.relation == 1).sum()


def test_a_target_type_without_labels(mag, tmp_path):
    """The target type's table without its label column, or with no label in it: one line naming the config key."""
    options = write_files(mag, tmp_path / "in")
    path = options["node_tables"]["paper"]
    t = pq.read_table(path)
    pq.write_table(t.drop(["label"]), path)
    _refused(options, tmp_path / "a", r"paper.parquet: node_tables.paper: .*'label'")
    pq.write_table(t.set_column(t.schema.get_field_index("label"), "label",
                                pa.array([None] * t.num_rows, pa.int64())), path)
    _refused(options, tmp_path / "b", r"paper.parquet, row 0: column 'label': the node is in split 'train' but has no "
                                      r"label")
