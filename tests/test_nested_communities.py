"""The nested-communities generator (``structure: nested``): deterministic, its parameters do what they say, and its
graphs have the locality the block model lacks (clustering, a lower METIS cut), measured beside the block model on
graphs of the same size, degree and homophily."""
import numpy as np
import pytest
import scipy.sparse as sp

from sylvie.config import section
from sylvie.data.synthetic import generate_from
from sylvie.errors import SylvieError
from sylvie.partition.metis import metis_assign, metis_input

pytestmark = pytest.mark.unit

SHAPE = {"nodes": 20_000, "avg_degree": 20, "features": 8, "classes": 32, "homophily": 0.8, "label_noise": 0.0,
         "train_fraction": 0.08, "val_fraction": 0.02}


def _graph(**knobs):
    return generate_from(section("dataset", {**SHAPE, "structure": "nested", **knobs}))


def _clustering(graph, sample=1000):
    """The mean local clustering coefficient of ``sample`` nodes of degree >= 2 (linked pairs among neighbours)."""
    n = graph.num_nodes
    a = sp.csr_matrix((np.ones(graph.num_edges, dtype=np.float32), (graph.src, graph.dst)), shape=(n, n))
    deg = np.diff(a.indptr)
    nodes = np.random.default_rng(0).choice(np.flatnonzero(deg >= 2), sample, replace=False)
    out = []
    for v in nodes:
        nb = a.indices[a.indptr[v]:a.indptr[v + 1]]
        out.append(a[nb][:, nb].nnz / (len(nb) * (len(nb) - 1)))
    return float(np.mean(out))


def _cut(graph, parts=4):
    assign = metis_assign(metis_input(graph), parts)
    return float((assign[graph.src] != assign[graph.dst]).mean())


def test_deterministic_undirected_and_of_the_degree_asked():
    a, b, c = _graph(seed=3), _graph(seed=3), _graph(seed=4)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    a.validate("nested")
    assert set(zip(a.src.tolist(), a.dst.tolist())) == set(zip(a.dst.tolist(), a.src.tolist()))
    assert not (a.src == a.dst).any()
    # duplicates inside small dense communities are dropped: somewhat fewer edges than asked
    assert 0.75 * SHAPE["avg_degree"] < a.num_edges / a.num_nodes <= SHAPE["avg_degree"]
    assert a.info["generator"] == "nested-communities" and a.info["params"]["community_size"] == 64


def test_homophily_is_the_edge_homophily():
    """Within 0.05 of the parameter: edges drawn outside their class land near it, some back in their class (up),
    and duplicates, dropped, are most often inside a small community (down)."""
    for h in (0.5, 0.8):
        g = _graph(homophily=h)
        measured = (g.labels[g.src] == g.labels[g.dst]).mean()
        assert abs(measured - h) <= 0.05, (h, measured)


def test_communities_give_the_clustering_and_cut_the_block_model_lacks():
    nested, blocks = _graph(), generate_from(section("dataset", {**SHAPE, "structure": "blocks"}))
    flat = _graph(locality=0.0)  # no communities below the class: a block model again
    assert _clustering(nested) > 2 * _clustering(blocks)
    assert _clustering(flat) < 1.5 * _clustering(blocks)
    assert _cut(nested) < 0.8 * _cut(blocks)
    more_local = _graph(locality=0.9)
    assert _clustering(more_local) > _clustering(nested) and _cut(more_local) < _cut(nested)


def test_a_score_split_trains_the_top_scores():
    """As ogbn-products' split by sales rank: exactly the fractions asked, training nodes the popular ones."""
    g = _graph(split="score")
    n = g.num_nodes
    assert (g.train_mask.sum(), g.val_mask.sum()) == (int(0.08 * n), int(0.02 * n))
    assert not (g.train_mask & g.val_mask).any() and (g.train_mask | g.val_mask | g.test_mask).all()
    deg = np.bincount(g.dst, minlength=n)
    assert deg[g.train_mask].mean() > 1.3 * deg[g.test_mask].mean()
    random = _graph(split="random")
    assert abs(deg[random.train_mask].mean() / deg[random.test_mask].mean() - 1) < 0.1


def test_bad_settings_are_refused_naming_them():
    with pytest.raises(SylvieError, match="split score needs structure: nested"):
        generate_from(section("dataset", {**SHAPE, "split": "score"}))
    with pytest.raises(SylvieError, match="invalid value for 'community_size'"):
        section("dataset", {**SHAPE, "structure": "nested", "community_size": 1})
