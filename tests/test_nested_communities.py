"""The nested-communities generator (``structure: nested``): deterministic, its parameters do what they say, and its
graphs have the locality the block model lacks (clustering, a lower METIS cut), measured beside the block model on
graphs of the same size, degree and homophily."""
import numpy as np
import pytest
import scipy.sparse as sp

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.errors import SylvieError
from sylvie.partition.metis import metis_assign, metis_input

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


@pytest.mark.slow
def test_deterministic_undirected_and_of_the_degree_asked():
    a, b, c = _graph(seed=3), _graph(seed=3), _graph(seed=4)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    a.validate("nested")
    assert set(zip(a.src.tolist(), a.dst.tolist())) == set(zip(a.dst.tolist(), a.src.tolist()))
    assert not (a.src == a.dst).any()
    # duplicates inside small dense communities are drawn again until the degree asked is reached, exactly
    assert a.num_edges == 2 * round(SHAPE["nodes"] * SHAPE["avg_degree"] / 2)
    assert a.info["generator"] == "nested-communities" and a.info["params"]["community_size"] == 64


@pytest.mark.unit
def test_homophily_is_the_edge_homophily():
    """Within 0.05 of the parameter: edges drawn outside their class land near it, some back in their class (up),
    and duplicates, dropped, are most often inside a small community (down)."""
    for h in (0.5, 0.8):
        g = _graph(homophily=h)
        measured = (g.labels[g.src] == g.labels[g.dst]).mean()
        assert abs(measured - h) <= 0.05, (h, measured)


@pytest.mark.slow
def test_communities_give_the_clustering_and_cut_the_block_model_lacks():
    nested, blocks = _graph(), generate_from(section("dataset", {**SHAPE, "structure": "blocks"}))
    flat = _graph(locality=0.0)  # no communities below the class: a block model again
    assert _clustering(nested) > 2 * _clustering(blocks)
    assert _clustering(flat) < 1.5 * _clustering(blocks)
    assert _cut(nested) < 0.8 * _cut(blocks)
    more_local = _graph(locality=0.9)
    assert _clustering(more_local) > _clustering(nested) and _cut(more_local) < _cut(nested)


@pytest.mark.unit
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


@pytest.mark.unit
def test_bad_settings_are_refused_naming_them():
    with pytest.raises(SylvieError, match="split score needs structure: nested"):
        generate_from(section("dataset", {**SHAPE, "split": "score"}))
    with pytest.raises(SylvieError, match="invalid value for 'community_size'"):
        section("dataset", {**SHAPE, "structure": "nested", "community_size": 1})


@pytest.mark.unit
def test_communities_too_small_for_the_degree_fail_naming_the_knobs():
    with pytest.raises(SylvieError, match="cannot hold that degree; raise community_size"):
        _graph(nodes=2000, avg_degree=40, community_size=4, locality=1.0, homophily=1.0)


@pytest.mark.unit
def test_lognormal_degrees_have_both_tails():
    """Pareto propensities from 1 leave no node below about two thirds of the mean degree; log-normal ones give
    nodes of a few edges and hubs, more so with a larger sigma."""
    def spread(**knobs):
        g = _graph(**knobs)
        deg = np.bincount(g.src, minlength=g.num_nodes)
        return np.percentile(deg, 10) / deg.mean(), deg.max() / deg.mean()

    low, high = spread()
    assert low > 0.5
    low_ln, high_ln = spread(degrees="lognormal", degree_sigma=1.2)
    assert low_ln < 0.35 and high_ln > high
    assert spread(degrees="lognormal", degree_sigma=0.5)[0] > low_ln


@pytest.mark.unit
def test_the_products_preset_stands_in_for_the_defaults_and_explicit_knobs_win():
    options = section("dataset", {"preset": "products", "nodes": 30_000, "seed": 1})
    assert (options.nodes, options.seed, options.avg_degree, options.classes, options.features) == (30_000, 1, 50.52,
                                                                                                   47, 100)
    assert (options.structure, options.split, options.degrees) == ("nested", "score", "lognormal")
    assert section("dataset", {}).nodes == 10_000 and section("dataset", {}).structure == "blocks"
    with pytest.raises(SylvieError, match="'preset'"):
        section("dataset", {"preset": "papers"})
    g = generate_from(options)
    assert g.num_nodes == 30_000 and g.num_edges == 2 * round(30_000 * 50.52 / 2)
    assert (g.train_mask.mean(), g.val_mask.mean()) == pytest.approx((0.0803, 0.0161), abs=1e-4)
    # the shape the preset was calibrated to (benchmarks/products_like.py), here at 1/80 of its size
    assert 0.77 <= (g.labels[g.src] == g.labels[g.dst]).mean() <= 0.86
    assert 0.3 <= _clustering(g) <= 0.6


@pytest.mark.unit
def test_download_with_the_preset_on_the_command_line(tmp_path):
    """``sylvie download synthetic --preset products --nodes N``: the preset's knobs but for those given, among
    them one given at its schema default (``--seed 0`` over a preset's seed would be kept as given)."""
    from sylvie.cli import main
    from sylvie.data.graph import load_graph

    out = tmp_path / "g"
    assert main(["download", "synthetic", "--preset", "products", "--nodes", "3000", "--features", "32",
                 "--classes", "8", "--out", str(out)]) == 0
    params = load_graph(out).info["params"]
    assert (params["nodes"], params["features"], params["classes"]) == (3000, 32, 8)
    assert (params["avg_degree"], params["degrees"], params["split"]) == (50.52, "lognormal", "score")


@pytest.mark.unit
def test_atypical_communities_relabel_whole_leaves_and_keep_homophily():
    """label_noise over leaves: every node of a relabelled leaf gets the same label and keeps its class community's
    features and edges; the edges inside the leaf join equal labels, so edge homophily stays well above that of
    relabelling single nodes at the same share."""
    nodes_mode = _graph(label_noise=0.3, homophily=0.95)
    leaves = _graph(label_noise=0.3, homophily=0.95, atypical="communities")
    assert nodes_mode.fingerprint() != leaves.fingerprint()
    share = (leaves.labels != _graph(label_noise=0.0, homophily=0.95).labels).mean()
    assert 0.2 <= share <= 0.35  # 0.3 of the leaves, each drawing its own class back 1 in 32 times
    hom_nodes, hom_leaves = ((g.labels[g.src] == g.labels[g.dst]).mean() for g in (nodes_mode, leaves))
    assert hom_leaves > hom_nodes + 0.1
