"""Shards partition the graph exactly: every node once, every edge once, halo tables consistent."""
import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp
from support.commands import BIN, run

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.graph import Graph, load_graph, save_graph
from sylvie.data.synthetic import _guide, _last_at_most
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.metis import symmetric_csr
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.partition.stage import partition_dataset


@pytest.mark.slow
@pytest.mark.parametrize("method", ["metis", "random"])
def test_shards_cover_graph(cora_dir, tmp_path, method):
    out = tmp_path / "p3"
    p = run([str(BIN / "sylvie"), "partition", str(cora_dir), "--out", str(out), "--parts", "3", "--method", method])
    assert "edge cut" in p.stderr and "replication factor" in p.stderr
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


@pytest.mark.unit
def test_synthetic_graph_is_the_recorded_one():
    """The generator's graph for given parameters and seed is pinned: tests and recorded benchmarks depend on it
    (more than a million edge pairs, so that the sampling goes by several chunks)."""
    g = generate_from(section("dataset", {"nodes": 60_000, "avg_degree": 40, "features": 8, "classes": 10, "seed": 5}))
    assert g.num_edges == 2_385_592
    assert g.fingerprint() == "5d85034a3c3809e1ac45cc5a591d164bea2b6beffc6d683e1249e63696f38c73"


@pytest.mark.unit
def test_guided_search_is_searchsorted():
    rng = np.random.default_rng(1)
    cum = np.concatenate([[0.0], np.cumsum(rng.pareto(2.5, 5000) + 1.0)])
    u = np.concatenate([rng.random(100_000) * cum[-1], cum, np.nextafter(cum[1:], 0), [0.0, cum[-1]]])
    guide, scale = _guide(cum)
    np.testing.assert_array_equal(_last_at_most(cum, guide, scale, u), np.searchsorted(cum, u, side="right") - 1)


def _untidy_graph(n=400, m=6000, seed=0) -> Graph:
    """Edges with self-loops, duplicates and one direction only, each node's near neighbours (something to cut)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = (src + rng.integers(-6, 7, m)) % n
    src, dst = np.concatenate([src, src[:300]]), np.concatenate([dst, dst[:300]])
    return Graph("untidy", src, dst, rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 3, n),
                 rng.random(n) < 0.3, rng.random(n) < 0.1, rng.random(n) < 0.5, 3)


@pytest.mark.unit
def test_metis_adjacency_is_the_undirected_loop_free_graph():
    g = _untidy_graph()
    a = sp.coo_matrix((np.ones(g.num_edges), (g.src, g.dst)), shape=(g.num_nodes,) * 2).tocsr()
    a = (a + a.T).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    a.sort_indices()
    xadj, adjncy = symmetric_csr(g)
    assert xadj.dtype == adjncy.dtype == np.int64  # pymetis's idx_t: passed without a copy
    np.testing.assert_array_equal(xadj, a.indptr)
    np.testing.assert_array_equal(adjncy, a.indices)


@pytest.mark.unit
def test_a_graph_stored_undirected_is_its_own_csr_and_topology():
    """The sorted undirected form (what the generators and symmetrised loaders store) skips the sorts: the same
    METIS adjacency and the same topology as the sorts give its edges in another order; anything else is not taken
    for it (loops, duplicates, a missing direction, another order)."""
    from sylvie.data.edge_form import stored_undirected
    from sylvie.data.graph import edges_of_keys, undirected_keys
    from sylvie.partition.shard_writer import _topology_columns

    g = _untidy_graph()
    n = g.num_nodes
    src, dst = edges_of_keys(undirected_keys(g.src, g.dst, n), n)
    tidy = dataclasses.replace(g, src=src, dst=dst)
    shuffled = np.random.default_rng(0).permutation(src.shape[0])
    assert stored_undirected(src, dst, n) and not stored_undirected(g.src, g.dst, n)
    assert not stored_undirected(src[shuffled], dst[shuffled], n)
    assert not stored_undirected(np.delete(src, 5), np.delete(dst, 5), n)  # one direction of an edge missing
    assert not stored_undirected(np.insert(src, 5, src[5]), np.insert(dst, 5, dst[5]), n)  # a duplicate
    assert not stored_undirected(np.insert(src, 0, 0), np.insert(dst, 0, 0), n)  # a self-loop
    for fast, slow in zip(symmetric_csr(tidy), symmetric_csr(g), strict=True):
        np.testing.assert_array_equal(fast, slow)
    assign = np.random.default_rng(1).integers(0, 5, n)
    counts = np.bincount(assign, minlength=5)
    local_of = np.empty(n, dtype=np.int64)
    order = np.argsort(assign, kind="stable")
    local_of[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    in_deg = np.bincount(dst, minlength=n)
    by_sort = _topology_columns(tidy, assign, local_of, counts, in_deg, undirected=False)
    renumbered = _topology_columns(tidy, assign, local_of, counts, in_deg, undirected=True)
    assert by_sort[1] == renumbered[1]
    for name, column in by_sort[0].items():
        np.testing.assert_array_equal(renumbered[0][name], column)


@pytest.mark.unit
def test_the_features_read_after_metis_are_the_same_datasets(tmp_path):
    """The partition stage reads the structure, then the features while METIS runs: a dataset replaced in between is
    an error, not a partition of two datasets; features that are not finite are refused there too."""
    from sylvie.data.graph import check_features, read_features
    from sylvie.errors import SylvieError

    g = _untidy_graph()
    save_graph(g, tmp_path / "g", "test")
    structure = load_graph(tmp_path / "g", features=False)
    assert structure.features.shape == (g.num_nodes, 0)
    np.testing.assert_array_equal(read_features(structure, tmp_path / "g"), g.features)
    save_graph(dataclasses.replace(g, labels=(g.labels + 1) % 3), tmp_path / "g", "test")
    with pytest.raises(SylvieError, match="replaced while it was being read"):
        read_features(structure, tmp_path / "g")
    features = g.features.copy()
    features[3, 1] = np.nan
    with pytest.raises(SylvieError, match=r"nodes.arrow: field 'feat' has non-finite values .* first at node 3"):
        check_features(features, g.num_nodes, "g/nodes.arrow")
    with pytest.raises(SylvieError, match=r"nodes.arrow: field 'feat' has 10 rows, expected 11"):
        check_features(features[:10], 11, "g/nodes.arrow")


@pytest.mark.unit
@pytest.mark.parametrize("form", ["untidy", "stored undirected"])
def test_shards_halo_order_topology_and_cut_of_an_untidy_graph(tmp_path, form, metis_library, monkeypatch):
    """With either METIS: one that reads the graph's destination column as its adjacency (64-bit), one that reads a
    copy of it in its own width (32-bit); the stage lets the edges go while METIS runs and reads them again after."""
    from sylvie.data.graph import edges_of_keys, undirected_keys
    from sylvie.partition.metis_library import ENV

    g = _untidy_graph()
    if form == "stored undirected":
        g = dataclasses.replace(g, **dict(zip(("src", "dst"), edges_of_keys(undirected_keys(g.src, g.dst,
                                                                                           g.num_nodes), g.num_nodes))))
    save_graph(g, tmp_path / "g", "test")
    monkeypatch.setenv(ENV, metis_library.path)
    manifest = partition_dataset(tmp_path / "g", tmp_path / "p", 3, progress=False)
    assert manifest["partitioner"]["idx_bits"] == metis_library.bits
    shards = [read_shard(tmp_path / "p", k, manifest) for k in range(3)]
    assign = np.empty(g.num_nodes, dtype=np.int64)
    for s in shards:
        assign[s.global_id] = s.part
    for s in shards:
        halo_key = s.halo_owner * g.num_nodes + s.halo_global_id
        assert (np.diff(halo_key) > 0).all()  # sorted by (owner, global id), each once
        np.testing.assert_array_equal(s.halo_owner, assign[s.halo_global_id])
        src = np.concatenate([s.global_id, s.halo_global_id])[s.edge_src]
        mine = np.flatnonzero(np.isin(g.dst, s.global_id))  # its edges, in the graph's order
        np.testing.assert_array_equal(src, g.src[mine])
        np.testing.assert_array_equal(s.global_id[s.edge_dst], g.dst[mine])
    assert manifest["edge_cut"] == int((assign[g.src] != assign[g.dst]).sum()) > 0
    topo = read_topology(tmp_path / "p", manifest)
    new_id = np.empty(g.num_nodes, dtype=np.int64)
    new_id[topo.original_id] = np.arange(g.num_nodes)
    order = np.lexsort((new_id[g.src], new_id[g.dst]))
    np.testing.assert_array_equal(topo.in_src, new_id[g.src][order])
    np.testing.assert_array_equal(np.diff(topo.in_indptr), np.bincount(new_id[g.dst], minlength=g.num_nodes))



@pytest.mark.unit
def test_more_parts_than_a_byte_counts(tmp_path):
    """Over 256 parts each edge's destination part takes two bytes (part_edges' kernels at another type): every edge
    lands in its destination's shard, from its source's inner or halo row."""
    g = _untidy_graph()
    save_graph(g, tmp_path / "g", "test")
    manifest = partition_dataset(tmp_path / "g", tmp_path / "p", 300, method="random", progress=False)
    edges, cut = [], 0
    for k in range(300):
        s = read_shard(tmp_path / "p", k, manifest)
        rows = np.concatenate([s.global_id, s.halo_global_id])
        edges += list(zip(rows[s.edge_src].tolist(), s.global_id[s.edge_dst].tolist()))
        cut += int((s.edge_src >= len(s.global_id)).sum())
    assert sorted(edges) == sorted(zip(g.src.tolist(), g.dst.tolist()))
    assert manifest["edge_cut"] == cut > 0
