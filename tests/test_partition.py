"""Shards partition the graph exactly: every node once, every edge once, halo tables consistent."""
import json

import numpy as np
import pytest
from conftest import BIN, run

from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.data.synthetic import generate_from
from sylvie.partition.shard_reader import read_manifest, read_shard


@pytest.mark.slow
@pytest.mark.parametrize("method", ["metis", "random"])
def test_shards_cover_graph(cora_dir, tmp_path, method):
    out = tmp_path / "p3"
    p = run([str(BIN / "sylvie"), "partition", str(cora_dir), "--out", str(out), "--parts", "3", "--method", method])
    assert "edge cut" in p.stdout and "replication factor" in p.stdout
    graph, manifest = load_graph(cora_dir), read_manifest(out)
    shards = [read_shard(out, k, manifest) for k in range(3)]
    ids = np.concatenate([s.global_id for s in shards])
    assert sorted(ids.tolist()) == list(range(graph.num_nodes))
    edges = set()
    for s in shards:
        src_global = np.concatenate([s.global_id, s.halo_global_id])[s.edge_src]
        edges |= set(zip(src_global.tolist(), s.global_id[s.edge_dst].tolist()))
        owner_ids = [shards[o].global_id[i] for o, i in zip(s.halo_owner, s.halo_owner_index)]
        assert owner_ids == s.halo_global_id.tolist()
        np.testing.assert_array_equal(s.feat, graph.features[s.global_id])
    assert edges == set(zip(graph.src.tolist(), graph.dst.tolist()))
    assert sum(e["edges"] for e in manifest["parts"]) == graph.num_edges
    assert manifest["dataset_fingerprint"] == json.loads((cora_dir / "meta.json").read_text())["fingerprint"]


@pytest.mark.slow
def test_metis_cuts_fewer_edges_than_random(cora_dir, tmp_path):
    cuts = {}
    for method in ("metis", "random"):
        run([str(BIN / "sylvie"), "partition", str(cora_dir), "--out", str(tmp_path / method), "--parts", "4",
             "--method", method])
        cuts[method] = read_manifest(tmp_path / method)["edge_cut"]
    assert cuts["metis"] < 0.5 * cuts["random"]


@pytest.mark.unit
def test_synthetic_is_deterministic_and_class_informative():
    a = generate_from(section("dataset", {"nodes": 3000, "avg_degree": 8, "features": 16, "classes": 4, "seed": 3}))
    b = generate_from(section("dataset", {"nodes": 3000, "avg_degree": 8, "features": 16, "classes": 4, "seed": 3}))
    c = generate_from(section("dataset", {"nodes": 3000, "avg_degree": 8, "features": 16, "classes": 4, "seed": 4}))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    a.validate("synthetic")
    assert abs(a.num_edges / a.num_nodes - 8) < 1.0
    clean = generate_from(section("dataset", {"nodes": 3000, "avg_degree": 8, "features": 16, "classes": 4, "seed": 3,
                                              "label_noise": 0}))
    assert np.array_equal(clean.src, a.src) and np.array_equal(clean.dst, a.dst)  # labels do not move edges
    assert (clean.labels[clean.src] == clean.labels[clean.dst]).mean() > 0.8  # homophily 0.8 plus chance
    atypical = (a.labels != clean.labels).mean()  # 0.3 redrawn, 3 in 4 of them to another class
    assert 0.19 < atypical < 0.26
    centroid = np.stack([a.features[a.labels == k].mean(0) for k in range(4)])  # features follow the label
    nearest = np.argmin(((a.features[:, None, :] - centroid[None]) ** 2).sum(-1), axis=1)
    moved = a.labels != clean.labels  # atypical nodes: their features point to their label more than their block
    assert (nearest[moved] == a.labels[moved]).mean() > 2 * (nearest[moved] == clean.labels[moved]).mean()
    assert abs(float(a.features.std()) - 1.0) < 0.05  # scaled to unit variance
    assert set(zip(a.src.tolist(), a.dst.tolist())) == set(zip(a.dst.tolist(), a.src.tolist()))
