"""The citation graph (``structure: citation``, the ``citation2`` preset) on a small graph: the same graph for the
same seed, papers citing older papers only, each evaluated paper's two latest references held out (test, then
validation), distinct negatives that are none of the paper's neighbours, and no held-out citation among the message
graph's edges."""
import dataclasses

import numpy as np
import pytest

from sylvie.config import section
from sylvie.data.citation_like import citations
from sylvie.data.generated import generate_from
from sylvie.data.graph import load_graph, save_graph
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TEST, TRAIN, VAL

pytestmark = pytest.mark.unit

KNOBS = {"structure": "citation", "nodes": 1500, "avg_degree": 12, "features": 8, "classes": 6, "homophily": 0.8,
         "degree_sigma": 1.5, "val_fraction": 0.1, "eval_negatives": 30, "seed": 3}
STRUCTURE = ("nodes", "avg_degree", "classes", "homophily", "degree_sigma", "val_fraction", "seed")


@pytest.fixture(scope="module")
def small():
    """(options, graph, its citations with each paper's time and topic)."""
    options = section("dataset", KNOBS)
    return options, generate_from(options, "synthetic-citation"), citations(**{k: KNOBS[k] for k in STRUCTURE})


def test_the_same_seed_gives_the_same_graph(small):
    options, graph, _ = small
    again = generate_from(options, "synthetic-citation")
    for a, b in ((graph.src, again.src), (graph.dst, again.dst), (graph.features, again.features),
                 (graph.link.src, again.link.src), (graph.link.dst, again.link.dst),
                 (graph.link.split, again.link.split), (graph.link.negatives, again.link.negatives)):
        assert np.array_equal(a, b)
    other = generate_from(dataclasses.replace(options, seed=4), "synthetic-citation")
    assert not np.array_equal(graph.link.dst[:other.link.num_pairs], other.link.dst[:graph.link.num_pairs])


def test_papers_cite_older_papers_only(small):
    _, graph, c = small
    link = graph.link
    assert (c.time[link.src] > c.time[link.dst]).all()
    assert set(zip(link.src.tolist(), link.dst.tolist())) == set(zip(c.src.tolist(), c.dst.tolist()))
    assert link.num_pairs == len(set(zip(link.src.tolist(), link.dst.tolist())))  # each citation once
    assert abs(link.num_pairs / (KNOBS["nodes"] * KNOBS["avg_degree"] / 2) - 1) < 0.05
    assert (c.topic[c.src] == c.topic[c.dst]).mean() > 0.6  # topics drive citations (homophily 0.8)


def test_the_held_out_pairs_are_the_newest_papers_latest_references(small):
    _, graph, c = small
    link = graph.link
    refs = {}
    for s, d in zip(link.src.tolist(), link.dst.tolist()):
        refs.setdefault(s, []).append(d)
    latest = {s: sorted(r, key=lambda d: c.time[d]) for s, r in refs.items()}
    val, test = link.indices(VAL), link.indices(TEST)
    assert set(link.src[val].tolist()) == set(link.src[test].tolist())
    assert len(val) == len(test) == round(KNOBS["val_fraction"] * KNOBS["nodes"])
    for i in test:
        assert link.dst[i] == latest[link.src[i]][-1] and len(latest[link.src[i]]) >= 3
    for i in val:
        assert link.dst[i] == latest[link.src[i]][-2]
    evaluated = set(link.src[test].tolist())
    eligible = sorted((p for p, r in refs.items() if len(r) >= 3), key=lambda p: c.time[p])
    assert evaluated == set(eligible[-len(test):])  # the newest papers with 3 or more references


def test_negatives_are_none_of_the_papers_neighbours(small):
    _, graph, _ = small
    link = graph.link
    near = {}
    for s, d in zip(link.src.tolist(), link.dst.tolist()):  # every split, both directions
        near.setdefault(s, set()).add(d)
        near.setdefault(d, set()).add(s)
    evaluated = link.split != TRAIN
    assert link.negatives.shape == (int(evaluated.sum()), KNOBS["eval_negatives"])
    for s, negatives in zip(link.src[evaluated].tolist(), link.negatives.tolist()):
        assert s not in negatives and not near[s] & set(negatives) and len(set(negatives)) == len(negatives)
    assert np.array_equal(np.concatenate([link.negatives_of("val"), link.negatives_of("test")]), link.negatives)


def test_messages_pass_both_ways_over_the_training_citations_only(small, tmp_path):
    _, graph, _ = small
    link = graph.link
    train = link.split == TRAIN
    both = set(zip(link.src[train].tolist(), link.dst[train].tolist()))
    both |= {(v, u) for u, v in both}
    edges = set(zip(graph.src.tolist(), graph.dst.tolist()))
    assert edges == both and graph.num_edges == len(both)
    assert not edges & set(zip(link.src[~train].tolist(), link.dst[~train].tolist()))
    save_graph(graph, tmp_path / "g", source="synthetic")
    back = load_graph(tmp_path / "g")
    assert back.link.counts() == link.counts() and np.array_equal(back.link.negatives, link.negatives)


def test_the_preset_and_its_refusals():
    options = section("dataset", {"preset": "citation2", "nodes": 2000, "eval_negatives": 20})
    assert (options.structure, options.features, options.classes) == ("citation", 128, 128)
    graph = generate_from(options, "synthetic-citation2")
    assert graph.features.shape == (2000, 128) and graph.link.negatives.shape[1] == 20
    assert graph.link.counts()["test"] == round(2000 * options.val_fraction)
    with pytest.raises(SylvieError, match="structure citation holds out .* remove edge_split"):
        generate_from(dataclasses.replace(options, edge_split=[0.1, 0.1]), "synthetic-citation2")
    with pytest.raises(SylvieError, match="avg_degree=30 is more than 20 papers allow"):
        generate_from(section("dataset", {"structure": "citation", "nodes": 20, "avg_degree": 30}), "tiny")
    with pytest.raises(SylvieError, match="papers it neither cites nor is cited by, fewer than eval_negatives=100"):
        generate_from(section("dataset", {"structure": "citation", "nodes": 60, "eval_negatives": 100}), "tiny")
