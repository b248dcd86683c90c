"""A typed graph as users export it (tests/support/graphs.py's Cora as papers and words): each table keyed its own
way (``node_key`` and ``feature_columns`` per node table, ``edge_columns`` per relation), citations listed once per
pair in no particular order and declared ``directed: false``; in a config and on the command line. And the lines
where a setting does nothing or a relation looks undirected, and the undirected relation between two types refused."""
import copy
import json
import logging

import numpy as np
import pytest
from support.graphs import write_papers_and_words

from sylvie import cli
from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.data.registry import check_dataset, download
from sylvie.errors import SylvieError
from sylvie.formats.node_keys import read_node_keys


@pytest.fixture(scope="module")
def cora(cora_dir):
    return load_graph(cora_dir)


@pytest.fixture
def exported(cora, tmp_path):
    return write_papers_and_words(cora, tmp_path / "in")


def _built(options, out):
    download("mine", out, section("dataset", options))
    return load_graph(out)


def _sylvie_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("sylvie")]


def _by_key(graph, relation: int) -> set:
    """A relation's edges as pairs of node numbers within their types."""
    s, d = graph.types.ends(relation)
    mine = graph.relation == relation
    return set(zip((graph.src[mine] - graph.type_offsets[s]).tolist(),
                   (graph.dst[mine] - graph.type_offsets[d]).tolist(), strict=True))


@pytest.mark.unit
def test_tables_keyed_their_own_way_and_citations_once_declared_undirected(cora, exported, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    got = _built(exported, tmp_path / "g")
    assert [r.name for r in got.types.relations] == ["cites", "has_word", "rev-has_word"]  # no rev-cites
    assert got.feature_widths == (cora.features.shape[1], None)
    assert _sylvie_warnings(caplog) == []
    # papers are numbered in their table's (shuffled) row order; the keys say which of Cora's nodes each is
    keys = read_node_keys(tmp_path / "g", cora.num_nodes, got.info.get("node_keys_sha256"))
    paper = np.array([int(k[1:]) for k in keys.to_pylist()])
    word = np.array([int(w.strip('"')[1:]) for w in (tmp_path / "in" / "words.csv").read_text().split()[1:]])
    cites = {(int(paper[a]), int(paper[b])) for a, b in _by_key(got, 0)}
    assert cites == set(zip(cora.src.tolist(), cora.dst.tolist(), strict=True))  # both directions, each once
    assert int((got.relation == 0).sum()) == cora.num_edges
    has_word = {(int(paper[a]), int(word[b])) for a, b in _by_key(got, 1)}
    assert has_word == set(zip(*(c.tolist() for c in np.nonzero(cora.features)), strict=True))
    assert _by_key(got, 2) == {(b, a) for a, b in _by_key(got, 1)}
    np.testing.assert_array_equal(got.type_features[0], cora.features[paper])
    np.testing.assert_array_equal(got.labels[:cora.num_nodes], cora.labels[paper])
    for split in ("train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(getattr(got, split)[:cora.num_nodes], getattr(cora, split)[paper])


@pytest.mark.unit
def test_citations_given_once_or_both_ways_make_one_graph(cora, exported, tmp_path):
    both = write_papers_and_words(cora, tmp_path / "both", cites_both_ways=True)
    once, twice = _built(exported, tmp_path / "once"), _built(both, tmp_path / "twice")
    assert once.fingerprint() == twice.fingerprint()
    np.testing.assert_array_equal(once.relation, twice.relation)


@pytest.mark.unit
def test_the_columns_given_per_table_on_the_command_line(exported, tmp_path):
    relations = [json.dumps(r) for r in exported["relations"]]
    assert cli.main(["download", "mine", "--out", str(tmp_path / "g"), "--source", "files", "--target", "paper",
                     "--split-column", "split", "--node-tables", json.dumps(exported["node_tables"]),
                     "--relations", *relations]) == 0
    assert _built(exported, tmp_path / "config").fingerprint() == load_graph(tmp_path / "g").fingerprint()


@pytest.mark.unit
def test_an_undirected_relation_between_two_types_is_refused(exported, tmp_path):
    options = copy.deepcopy(exported)
    options["relations"][1]["directed"] = False
    with pytest.raises(SylvieError) as e:
        check_dataset("mine", section("dataset", options))
    line = str(e.value)
    assert "relations[1] (paper:has_word:word)" in line and "rev-has_word" in line and "drop directed" in line
    with pytest.raises(SylvieError, match=r"relations\[1\]"):
        download("mine", tmp_path / "g", section("dataset", options))
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(("directed", "both_ways", "said"), [(None, False, True), (True, False, False),
                                                             (None, True, False)])
@pytest.mark.slow
def test_a_one_way_relation_taken_as_directed_is_said(cora, tmp_path, caplog, directed, both_ways, said):
    """Citations once per pair, their direction not declared: a line saying that almost none has its reverse and how
    to declare the relation undirected; not where ``directed: true`` says the direction means something, nor where
    the pairs come both ways."""
    options = write_papers_and_words(cora, tmp_path / "in", cites_both_ways=both_ways)
    del options["relations"][0]["directed"]
    if directed is not None:
        options["relations"][0]["directed"] = directed
    caplog.set_level(logging.WARNING)
    got = _built(options, tmp_path / "g")
    assert [r.name for r in got.types.relations] == ["cites", "has_word", "rev-cites", "rev-has_word"]
    lines = _sylvie_warnings(caplog)
    if said:
        assert len(lines) == 1, lines
        assert "cites.csv: relations[0] (paper:cites:paper): 0.0% of its 5,278 edges have their reverse" in lines[0]
        assert "declare it directed: false" in lines[0]
    else:
        assert lines == []


@pytest.mark.unit
def test_feature_columns_that_match_nothing_are_said(exported, tmp_path, caplog):
    options = copy.deepcopy(exported)
    del options["node_tables"]["word"]["feature_columns"]  # the dataset's feature_columns, [feat]: not a column
    options["node_tables"]["paper"]["feature_columns"] = ["feat", "f_*"]
    caplog.set_level(logging.WARNING)
    got = _built(options, tmp_path / "g")
    assert got.feature_widths[1] is None
    lines = _sylvie_warnings(caplog)
    assert len(lines) == 2, lines
    paper, word = sorted(lines)
    assert "papers.parquet: node_tables.paper: feature_columns ['f_*'] match no column" in paper
    assert "its other feature columns are read" in paper
    assert "words.csv: node_tables.word: feature_columns ['feat'] match no column of the table (it has word)" in word
    assert "node type 'word' has no features, and the models learn an embedding for it" in word
    assert "feature_columns: []" in word


@pytest.mark.unit
def test_an_edge_split_of_an_undirected_relation_holds_each_pair_out_both_ways(exported, tmp_path):
    options = {**exported, "edge_split": [0.1, 0.1], "edge_split_relation": "cites"}
    got = _built(options, tmp_path / "g")
    link = got.link
    assert link.undirected
    cites = _by_key(got, 0)
    held = np.flatnonzero(link.split != 0)
    assert held.shape[0] > 0
    for a, b in zip(link.src[held].tolist(), link.dst[held].tolist(), strict=True):
        assert (a, b) not in cites and (b, a) not in cites
    assert all((b, a) in cites for a, b in cites)  # what stays is still both ways


@pytest.mark.parametrize("ends", [("paper", "paper"), ("word", "paper"), ("paper", "word")])
@pytest.mark.unit
def test_a_given_relation_named_as_a_generated_reverse_is_refused(exported, tmp_path, ends):
    """With reverse_relations on, a relation of the user's named rev-<another's name> would silently stand in for
    that relation's reverse, whatever its ends and direction: refused naming it; with reverse_relations false, every
    relation is the user's, as given."""
    options = copy.deepcopy(exported)
    src, dst = ends
    options["relations"].append({"src": src, "name": "rev-cites", "dst": dst, "edges": options["relations"][0]["edges"],
                                 "edge_columns": ["citing", "cited"] if dst == "paper" and src == "paper" else
                                 ["paper", "word"][::1 if src == "paper" else -1]})
    if ends != ("paper", "paper"):
        options["relations"][-1]["edges"] = options["relations"][1]["edges"]
    with pytest.raises(SylvieError) as e:
        check_dataset("mine", section("dataset", options))
    assert f"relations[2] ({src}:rev-cites:{dst}): named as reverse_relations names the reverse of relation 'cites'" \
        in str(e.value) and "reverse_relations: false" in str(e.value)
    got = _built({**options, "reverse_relations": False}, tmp_path / "g")
    assert [r.name for r in got.types.relations] == ["cites", "has_word", "rev-cites"]


@pytest.mark.parametrize("reverse_relations", [True, False])
@pytest.mark.unit
def test_one_type_and_one_undirected_relation_takes_an_edge_split_as_a_graph_of_one_type(exported, tmp_path,
                                                                                           reverse_relations):
    """Papers and their citations alone, declared undirected: one node type and one relation (no reverse added),
    which is the graph of one type it is; its edge split needs no edge_split_relation (which it refuses)."""
    options = {**copy.deepcopy(exported), "edge_split": [0.1, 0.1], "reverse_relations": reverse_relations}
    options["node_tables"] = {"paper": options["node_tables"]["paper"]}
    options["relations"] = options["relations"][:1]
    got = _built(options, tmp_path / "g")
    assert not got.typed and got.link.undirected and (got.link.split != 0).any()
    with pytest.raises(SylvieError, match="edge_split_relation 'cites': the graph has one node type"):
        check_dataset("mine", section("dataset", {**options, "edge_split_relation": "cites"}))
