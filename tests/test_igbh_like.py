"""The igbh preset (``structure: igbh``, sylvie/data/igbh_like.py): IGBH-small's schema, counts in its proportions,
features on every type, labels and IGB's split on papers, each relation's class homophily near its target, the same
graph for the same seed, ``sylvie download`` writing a typed canonical graph that ``sylvie partition`` cuts into 4,
and bad knobs refused by name."""
import json

import numpy as np
import pytest

from sylvie import memory_budget
from sylvie.cli import main
from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.graph import load_graph
from sylvie.data.igbh_like import IGBH_EDGES, IGBH_NODES, IGBH_TOTAL, node_classes
from sylvie.errors import SylvieError
from sylvie.formats.partition_manifest import read_manifest
from sylvie.graph_types import Relation

pytestmark = pytest.mark.unit

NODES = 30_000
PRESET = {"cites": 0.75, "written_by": 0.8, "affiliated_to": 0.4, "topic": 0.9}


def igbh(**knobs):
    return generate_from(section("dataset", {"preset": "igbh", **knobs}), "igbh")


@pytest.fixture(scope="module")
def small():
    return igbh(nodes=NODES, features=8)


def test_the_schema_is_igbhs_with_the_reverses(small):
    assert small.types.node_types == ("paper", "author", "institute", "fos") == tuple(IGBH_NODES)
    assert small.types.target == "paper"
    forward = (Relation("paper", "cites", "paper"), Relation("paper", "written_by", "author"),
               Relation("author", "affiliated_to", "institute"), Relation("paper", "topic", "fos"))
    assert small.types.relations == forward + tuple(r.reverse() for r in forward)
    assert [r.name for r in small.types.relations[4:]] == ["rev-cites", "rev-written_by", "rev-affiliated_to",
                                                            "rev-topic"]
    for r in range(4):  # each reverse: the same edges the other way
        fwd, rev = small.relation == r, small.relation == r + 4
        assert np.array_equal(np.stack([small.src[fwd], small.dst[fwd]]), np.stack([small.dst[rev], small.src[rev]]))
    small.validate("igbh")
    plain = igbh(nodes=5_000, features=4, reverse_relations=False)
    assert plain.types.relations == forward and int(plain.relation.max()) == 3


def test_counts_are_in_igbh_smalls_proportions(small):
    scale = NODES / IGBH_TOTAL
    assert small.node_counts == tuple(max(1, round(n * scale)) for n in IGBH_NODES.values())
    assert small.num_nodes == pytest.approx(NODES, abs=2)
    for r, real in enumerate(IGBH_EDGES.values()):
        # exact but where a small graph's few fields of study cannot hold IGBH's topics per paper distinct
        assert 0.99 * round(real * scale) <= (small.relation == r).sum() <= round(real * scale)
    offsets = small.type_offsets
    for r in range(len(small.types.relations)):  # every edge between the types its relation names
        s, d = small.types.ends(r)
        mine = small.relation == r
        assert ((small.src[mine] >= offsets[s]) & (small.src[mine] < offsets[s + 1])).all()
        assert ((small.dst[mine] >= offsets[d]) & (small.dst[mine] < offsets[d + 1])).all()
    cites = small.relation == 0
    assert not (small.src[cites] == small.dst[cites]).any()


def test_every_type_has_features_of_igbs_width():
    g = igbh(nodes=3_000)  # the preset's own width
    assert g.feature_widths == (1024,) * 4
    for f, n in zip(g.type_features, g.node_counts, strict=True):
        assert f.shape == (n, 1024) and f.dtype == np.float32 and np.isfinite(f).all()
    assert g.features.shape == (g.num_nodes, 0)  # a typed graph keeps its features per type only


def test_labels_on_papers_only_and_igbs_split(small):
    papers = small.node_counts[0]
    y = small.labels[:papers]
    assert small.num_classes == 19 and y.min() == 0 and y.max() == 18 and len(np.unique(y)) == 19
    assert (small.labels[papers:] == -1).all()
    masks = [small.train_mask, small.val_mask, small.test_mask]
    assert not any(m[papers:].any() for m in masks)
    assert (masks[0][:papers].astype(int) + masks[1][:papers] + masks[2][:papers] == 1).all()  # disjoint, covering
    assert [int(m.sum()) for m in masks] == [int(0.6 * papers), int(0.2 * papers),
                                             papers - int(0.6 * papers) - int(0.2 * papers)]
    # a random split, as IGB's loader: the classes in the same shares on each side
    assert abs(np.bincount(y[masks[0][:papers]], minlength=19) / masks[0].sum()
               - np.bincount(y[masks[2][:papers]], minlength=19) / masks[2].sum()).max() < 0.03


def within_one_class(graph) -> dict[str, float]:
    """Each relation's share of edges whose two ends have one class."""
    home = node_classes(graph)
    assert np.array_equal(home[:graph.node_counts[0]], graph.labels[:graph.node_counts[0]])
    return {rel.name: float((home[graph.src[graph.relation == r]] == home[graph.dst[graph.relation == r]]).mean())
            for r, rel in enumerate(graph.types.relations)}


def test_each_relations_homophily_is_near_its_target(small):
    options = section("dataset", {"preset": "igbh", "nodes": NODES, "features": 8})
    assert options.relation_homophily == PRESET
    measured = within_one_class(small)
    for name, target in PRESET.items():
        # a little under the target: dropping repeated edges drops more within a class (its nodes are fewer)
        assert target - 0.04 < measured[name] < target + 0.01, (name, measured[name])
        assert measured["rev-" + name] == measured[name]
    # relation_homophily {}: homophily for every relation, as a share (0.3, not 0.3 plus what falls in by chance)
    options = section("dataset", {"preset": "igbh", "nodes": NODES, "features": 8, "relation_homophily": {},
                                  "homophily": 0.3})
    measured = within_one_class(generate_from(options))
    assert all(0.26 < measured[name] < 0.32 for name in PRESET), measured


def test_the_same_seed_makes_the_same_graph():
    a, b, c = igbh(nodes=4_000, features=4), igbh(nodes=4_000, features=4), igbh(nodes=4_000, features=4, seed=1)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert all(np.array_equal(x, y) for x, y in zip(a.type_features, b.type_features, strict=True))


def test_download_writes_a_typed_graph_that_partitions_in_four(tmp_path):
    assert main(["download", "igbh-small", "--source", "synthetic", "--preset", "igbh", "--nodes", "8000",
                 "--features", "16", "--out", str(tmp_path / "g")]) == 0
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["types"]["target"] == "paper" and len(meta["types"]["relations"]) == 8
    assert meta["feature_widths"] == [16] * 4 and meta["num_classes"] == 19
    assert meta["generator"] == "igbh-like" and meta["params"]["relation_homophily"] == PRESET
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == [
        "edges.arrow", "features.0.arrow", "features.1.arrow", "features.2.arrow", "features.3.arrow", "meta.json",
        "nodes.arrow"]
    graph = load_graph(tmp_path / "g")
    assert graph.node_counts == tuple(meta["type_counts"]) and graph.feature_widths == (16,) * 4
    assert main(["partition", str(tmp_path / "g"), "--out", str(tmp_path / "p4"), "--parts", "4"]) == 0
    manifest = read_manifest(tmp_path / "p4")
    assert len(manifest["parts"]) == 4 and manifest["type_counts"] == meta["type_counts"]
    assert sum(p["inner_nodes"] for p in manifest["parts"]) == graph.num_nodes
    assert sum(p["edges"] for p in manifest["parts"]) == graph.num_edges
    for t, n in enumerate(meta["type_counts"]):  # every part holds some of every type
        assert sum(p["type_counts"][t] for p in manifest["parts"]) == n
        assert all(p["type_counts"][t] > 0 for p in manifest["parts"])


@pytest.mark.parametrize("knobs, message", [
    ({"nodes": 40}, "nodes=40 makes 13 papers, fewer than classes=19.*raise nodes or lower classes"),
    ({"relation_homophily": {"writes": 0.5}}, "relation_homophily names 'writes', not a relation of this graph; "
                                              "its relations are cites, written_by, affiliated_to, topic"),
    ({"train_fraction": 0.9, "val_fraction": 0.2}, "train_fraction \\+ val_fraction <= 1"),
])
def test_bad_knobs_are_refused_by_name(knobs, message):
    with pytest.raises(SylvieError, match=message):
        igbh(**{"nodes": 2_000, "features": 4, **knobs})


def test_a_share_outside_zero_to_one_is_refused_by_the_schema():
    with pytest.raises(SylvieError, match="relation_homophily"):
        section("dataset", {"preset": "igbh", "relation_homophily": {"cites": 1.5}})


def test_a_graph_that_cannot_fit_is_refused_before_it_is_drawn(monkeypatch):
    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 10**9)
    with pytest.raises(SylvieError, match="3,131,266 nodes x 1,024 features .* lower nodes or features"):
        igbh()  # the preset's own size: 12.8 GB of features
