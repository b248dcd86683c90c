"""The typed canonical graph: the mag preset's shape, its round trip through ``sylvie download``'s files, the
checks that refuse a malformed typed graph (each naming the field and what to do), and R-GCN learning the preset's
venues in one process."""
import dataclasses
import json

import numpy as np
import pytest
import torch

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.graph import load_graph, save_graph
from sylvie.data.mag_like import MAG_EDGES, MAG_NODES, MAG_TOTAL
from sylvie.errors import SylvieError
from sylvie.formats.checksum import with_checksum
from sylvie.graph_types import GraphTypes, Relation
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gnn import GNN

NODES = 30_000


@pytest.fixture(scope="module")
def mag():
    # its own graph: the shape test checks the preset's own knobs (128 features, 349 venues) and ogbn-mag's
    # proportions, which show at this size, not at the shared small_mag's
    return generate_from(section("dataset", {"preset": "mag", "nodes": NODES}), "mag")


@pytest.mark.unit
def test_the_mag_preset_has_ogbn_mags_shape(mag):
    scale = NODES / MAG_TOTAL
    assert mag.types.node_types == tuple(MAG_NODES) and mag.types.target == "paper"
    assert mag.node_counts == tuple(round(n * scale) for n in MAG_NODES.values())
    assert mag.feature_widths == (128, None, None, None) and mag.num_classes == 349
    rel = mag.relation
    for r, real in enumerate(MAG_EDGES.values()):
        # exact but where a small graph's few fields of study cannot hold ogbn-mag's topics per paper distinct
        assert 0.99 * round(real * scale) <= (rel == r).sum() <= round(real * scale)
        rev = r + len(MAG_EDGES)  # each reverse: the same edges the other way
        fwd = np.stack([mag.src[rel == r], mag.dst[rel == r]])
        back = np.stack([mag.dst[rel == rev], mag.src[rel == rev]])
        assert np.array_equal(fwd, back)
    papers = mag.node_counts[0]
    assert (mag.labels[papers:] == -1).all() and not mag.train_mask[papers:].any()
    assert abs(mag.train_mask.sum() / papers - 0.85494) < 1e-3 and abs(mag.val_mask.sum() / papers - 0.08811) < 1e-3
    cites = rel == 1
    assert 0.2 < (mag.labels[mag.src[cites]] == mag.labels[mag.dst[cites]]).mean() < 0.35  # homophily 0.25
    mag.validate("mag")


@pytest.mark.unit
def test_reverse_relations_off(small_mag_one_way):
    g = small_mag_one_way  # the mag preset with reverse_relations off
    assert len(g.types.relations) == 4 and int(g.relation.max()) == 3


@pytest.mark.unit
def test_a_typed_graph_round_trips_and_a_changed_file_is_named(mag, tmp_path):
    meta = save_graph(mag, tmp_path / "g", source="synthetic")
    assert meta["types"]["target"] == "paper" and meta["type_counts"] == list(mag.node_counts)
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["edges.arrow", "features.0.arrow", "meta.json",
                                                                   "nodes.arrow"]
    back = load_graph(tmp_path / "g")
    assert back.types == mag.types and back.node_counts == mag.node_counts
    assert np.array_equal(back.relation, mag.relation) and np.array_equal(back.type_features[0], mag.type_features[0])
    assert back.type_features[1:] == (None, None, None) and back.fingerprint() == meta["fingerprint"]
    # one feature changed after download: the fingerprint names it
    changed = dataclasses.replace(mag, type_features=(mag.type_features[0] + 1,) + mag.type_features[1:])
    save_graph(changed, tmp_path / "other", source="synthetic")
    (tmp_path / "g" / "features.0.arrow").write_bytes((tmp_path / "other" / "features.0.arrow").read_bytes())
    with pytest.raises(SylvieError, match="does not match the fingerprint"):
        load_graph(tmp_path / "g")


@pytest.mark.unit
def test_a_homogeneous_graph_is_written_as_before(tmp_path):
    g = generate_from(section("dataset", {"nodes": 500}), "synthetic")
    meta = save_graph(g, tmp_path / "g", source="synthetic")
    assert "types" not in meta and not list((tmp_path / "g").glob("features.*"))
    assert load_graph(tmp_path / "g").node_counts == (500,) and not g.typed


def small_typed(**change):
    """Two types, one relation a -> b; labels on b."""
    types = GraphTypes(("a", "b"), (Relation("a", "r", "b"),), "b")
    g = dict(name="t", src=np.array([0, 1, 2]), dst=np.array([3, 4, 3]), features=np.empty((5, 0), np.float32),
             labels=np.array([-1, -1, -1, 0, 1]), train_mask=np.array([0, 0, 0, 1, 0], bool),
             val_mask=np.array([0, 0, 0, 0, 1], bool), test_mask=np.zeros(5, bool), num_classes=2, types=types,
             type_counts=(3, 2), relation=np.zeros(3, np.int16),
             type_features=(np.ones((3, 4), np.float32), None))
    g.update(change)
    from sylvie.data.graph import Graph
    return Graph(**g)


@pytest.mark.parametrize("change, message", [
    ({"types": GraphTypes(("a", "b"), (Relation("a", "r", "c"),), "b")}, "names node type 'c'"),
    ({"types": GraphTypes(("a", "b"), (Relation("a", "r", "b"),), "z")}, "target node type 'z'"),
    ({"dst": np.array([3, 1, 3])}, "destination outside their relation's node type, first edge 1"),
    ({"src": np.array([0, 3, 2])}, "source outside their relation's node type"),
    ({"labels": np.array([1, -1, -1, 0, 1])}, "field 'label' is set on node 0, which is not of the target type"),
    ({"train_mask": np.array([0, 1, 0, 1, 0], bool)}, "field 'train' is set on node 1"),
    ({"type_counts": (2, 2)}, "type_counts"),
    ({"type_features": (np.ones((2, 4), np.float32), None)}, "node type 'a'.*2 rows, expected 3"),
    ({"relation": None}, "needs each edge's relation"),
])
@pytest.mark.unit
def test_a_malformed_typed_graph_is_refused_naming_the_field(change, message):
    small_typed().validate("ok")
    with pytest.raises(SylvieError, match=message):
        small_typed(**change).validate("g")


@pytest.mark.unit
def test_nothing_half_written_for_a_malformed_typed_graph(tmp_path):
    with pytest.raises(SylvieError):
        save_graph(small_typed(labels=np.array([1, -1, -1, 0, 1])), tmp_path / "g", source="files")
    assert not (tmp_path / "g").exists() and not list(tmp_path.iterdir())


@pytest.mark.unit
def test_a_meta_json_edited_is_named(mag, tmp_path):
    save_graph(mag, tmp_path / "g", source="synthetic")
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    meta["types"]["relations"][0][0] = "venue"
    (tmp_path / "g" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SylvieError, match="meta.json: was changed after `sylvie download` wrote it"):
        load_graph(tmp_path / "g")
    # its checksum made again (or a file from before meta.json carried one): the types it names are checked too
    (tmp_path / "g" / "meta.json").write_text(json.dumps(with_checksum(meta)))
    with pytest.raises(SylvieError, match="meta.json: relation \\(venue, writes, paper\\) names node type 'venue'"):
        load_graph(tmp_path / "g")


@pytest.mark.slow
def test_rgcn_learns_the_presets_venues_in_one_process():
    """The preset's signal is in its structure as well as in the papers' features: R-GCN (authors, institutions and
    fields learnt as embeddings) beats a model of the features alone (R-GCN with no relation: its self-loop)."""
    # its own graph: the margin R-GCN's relations give over the features alone shows at this size and class count
    mag = generate_from(section("dataset", {"preset": "mag", "nodes": 12_000, "classes": 20}), "mag")
    counts = mag.node_counts
    tb = whole_graph_block(mag.src, mag.dst, counts, types=mag.types, relation=mag.relation)
    papers = counts[0]
    y = torch.from_numpy(mag.labels[:papers])
    train, val = (torch.from_numpy(m[:papers]) for m in (mag.train_mask, mag.val_mask))

    def fit(block):
        torch.manual_seed(0)
        model = GNN("rgcn", mag.feature_widths, hidden=32, num_classes=mag.num_classes, layers=2, dropout=0.2,
                    embedding_rows=counts, embedding_width=32, types=mag.types)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        x = [torch.from_numpy(mag.type_features[0]), None, None, None]
        for _ in range(25):
            model.train()
            loss = torch.nn.functional.cross_entropy(model(block, x)[train], y[train])
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            return (model(block, x).argmax(1)[val] == y[val]).float().mean().item()

    no_edges = whole_graph_block(mag.src[:0], mag.dst[:0], counts, types=mag.types, relation=mag.relation[:0])
    features_only, with_relations = fit(no_edges), fit(tb)
    assert with_relations > features_only + 0.05, (with_relations, features_only)


@pytest.mark.unit
def test_export_refuses_a_typed_graph_writing_nothing(mag, tmp_path):
    from sylvie.data.export import ExportLayout, export_graph
    save_graph(mag, tmp_path / "g", source="synthetic")
    with pytest.raises(SylvieError, match="a typed graph; this version exports graphs of one node type"):
        export_graph(tmp_path / "g", tmp_path / "e", ExportLayout())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["metis", "random"])
def test_a_typed_partition_holds_every_edge_with_its_relation_and_every_types_rows(mag, tmp_path, method):
    """Format 4: each shard's inner rows type-contiguous, each featured type's rows, each edge's relation; METIS
    balances each node type's count."""
    from sylvie.partition.shard_reader import read_shard
    from sylvie.partition.stage import partition_dataset
    save_graph(mag, tmp_path / "g", source="synthetic")
    manifest = partition_dataset(tmp_path / "g", tmp_path / "p", parts=3, method=method, progress=False)
    assert manifest["format_version"] == 5 and manifest["types"] == mag.types.to_json()
    if method == "metis":
        balance = manifest["balance"]["constraints"]
        assert [c for c in balance if c.startswith("nodes:")] == [f"nodes:{t}" for t in mag.types.node_types]
        assert all(c["max_over_mean"] <= 1.03 + c["vertex_slack"] for c in balance.values())
    seen, inner = [], []
    for k in range(3):
        shard = read_shard(tmp_path / "p", k)
        counts = shard.inner_type_counts()
        assert sum(counts) == shard.num_inner and counts == tuple(manifest["parts"][k]["type_counts"])
        ids = np.concatenate([shard.global_id, shard.halo_global_id])
        seen.append(np.stack([ids[shard.edge_src], shard.global_id[shard.edge_dst], shard.edge_relation]))
        first = np.searchsorted(shard.global_id, shard.type_offsets)
        assert np.array_equal(shard.type_feat[0], mag.type_features[0][shard.global_id[first[0]:first[1]]])
        assert shard.type_feat[1:] == (None, None, None)
        assert np.array_equal(shard.halo_types(), np.searchsorted(mag.type_offsets, shard.halo_global_id, "right") - 1)
        inner.append(shard.global_id)
    got = np.concatenate(seen, axis=1)
    want = np.stack([mag.src, mag.dst, mag.relation])
    assert got.shape == want.shape
    order = lambda a: a[:, np.lexsort(a[::-1])]  # noqa: E731
    assert np.array_equal(order(got), order(want))
    assert np.array_equal(np.sort(np.concatenate(inner)), np.arange(mag.num_nodes))
