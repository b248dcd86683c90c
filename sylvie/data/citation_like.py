"""``structure: citation`` (the ``citation2`` preset): a directed citation graph shaped like ogbl-citation2, for link
prediction, scaled by ``nodes``.

Papers cite older papers only, mostly recent ones, within their latent topic with probability ``homophily``, chosen
by a log-normal attractiveness (heavy-tailed citation counts); features follow the topic. The newest papers with 3 or
more references (``val_fraction`` of the papers) each have their latest reference held out for test and the next
latest for validation, with ``eval_negatives`` fixed negatives; messages pass both ways over the rest.
``benchmarks/citation_like.py`` compares it with ogbl-citation2.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, sorted_unique, undirected_keys
from sylvie.data.synthetic import class_features
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TEST, TRAIN, VAL, LinkPairs
from sylvie.memory_budget import check_fits

REFERENCE_SIGMA = 1.0  # log-std of a paper's expected number of references (a few cite many, many cite a few)
RECENCY = 2.0  # a reference's look-back, as a share of the citing paper's past, is U^RECENCY: mostly recent papers
MIN_REFERENCES = 3  # a paper evaluated keeps at least one training reference beside its two held out
_ROUNDS = 8  # draws of the references lost as duplicates; a young paper short of distinct ones keeps fewer
_CHUNK = 1 << 22  # references drawn at a time


@dataclass(frozen=True)
class Citations:
    """Every citation of a generated graph, with what the canonical graph does not keep: each paper's time (its
    publication rank, 0 first) and latent topic, by node id; ``split`` of each citation (``LinkPairs``' codes)."""

    time: np.ndarray
    topic: np.ndarray
    src: np.ndarray  # citing paper
    dst: np.ndarray  # cited paper (older)
    split: np.ndarray  # int8: TRAIN, VAL, TEST


def _draw_references(rng, sources: np.ndarray, topic: np.ndarray, cum: np.ndarray, order: np.ndarray,
                     topic_keys: np.ndarray, cum_topic: np.ndarray, homophily: float) -> np.ndarray:
    """One cited paper (time order) per entry of ``sources`` (citing papers' times, each >= 1): older, within a
    look-back window, in the source's topic with probability ``homophily`` (where the topic has a paper in the window,
    else in its whole past, else anywhere), chosen by attractiveness (``cum``: its cumulative sum in time order;
    ``cum_topic``: by topic, then time, ``order`` the papers in that order, ``topic_keys`` their topic * n + time)."""
    n = topic.shape[0]
    out = np.empty(sources.shape[0], dtype=np.int64)
    for lo in range(0, sources.shape[0], _CHUNK):
        s = sources[lo:lo + _CHUNK]
        m = s.shape[0]
        look, same, u = rng.random(m), rng.random(m) < homophily, rng.random(m)
        first = np.minimum((s * (1.0 - look ** RECENCY)).astype(np.int64), s - 1)  # window: [first, s)
        j = out[lo:lo + m]
        i = np.flatnonzero(same)
        base = topic[s[i]] * n
        p_lo, p_hi = np.searchsorted(topic_keys, base + first[i]), np.searchsorted(topic_keys, base + s[i])
        empty = p_lo == p_hi
        p_lo[empty] = np.searchsorted(topic_keys, base[empty])  # the topic's whole past
        ok = p_lo < p_hi
        same[i[~ok]] = False  # a topic with no older paper: drawn in any topic
        i, p_lo, p_hi = i[ok], p_lo[ok], p_hi[ok]
        lo_mass, hi_mass = cum_topic[p_lo], cum_topic[p_hi]
        p = np.searchsorted(cum_topic, lo_mass + u[i] * (hi_mass - lo_mass), side="right") - 1
        j[i] = order[np.clip(p, p_lo, p_hi - 1)]
        i = np.flatnonzero(~same)
        lo_mass, hi_mass = cum[first[i]], cum[s[i]]
        p = np.searchsorted(cum, lo_mass + u[i] * (hi_mass - lo_mass), side="right") - 1
        j[i] = np.clip(p, first[i], s[i] - 1)
    return out


def _citation_keys(rng, topic: np.ndarray, references: np.ndarray, attractiveness: np.ndarray,
                   homophily: float) -> np.ndarray:
    """The sorted keys ``citing * n + cited`` (time order) of the distinct citations: ``references[t]`` drawn for
    paper t, those lost as duplicates drawn again (``_ROUNDS`` times at most)."""
    n = topic.shape[0]
    cum = np.concatenate([[0.0], np.cumsum(attractiveness)])
    order = np.argsort(topic, kind="stable")  # by topic, then time
    topic_keys = topic[order] * n + order
    cum_topic = np.concatenate([[0.0], np.cumsum(attractiveness[order])])
    keys = np.empty(0, np.int64)
    want = references
    for _ in range(_ROUNDS):
        sources = np.repeat(np.arange(n, dtype=np.int64), want)
        if not sources.size:
            break
        cited = _draw_references(rng, sources, topic, cum, order, topic_keys, cum_topic, homophily)
        sources *= n
        sources += cited
        keys = sorted_unique(np.concatenate([keys, sources]), kind="stable" if keys.size else "quicksort")
        want = references - np.bincount(keys // n, minlength=n)
    return keys


def _held_out(keys: np.ndarray, n: int, share: float) -> np.ndarray:
    """Each citation's split: for the newest ``share`` of the papers that have at least ``MIN_REFERENCES``
    references, the latest reference (``keys`` are sorted by citing paper, then cited paper's time) tests and the next
    latest validates; the rest train."""
    counts = np.bincount(keys // n, minlength=n)
    eligible = np.flatnonzero(counts >= MIN_REFERENCES)
    sources = eligible[::-1][:int(round(share * n))]  # the newest first
    last = np.cumsum(counts)[sources] - 1
    split = np.full(keys.shape[0], TRAIN, np.int8)
    split[last] = TEST
    split[last - 1] = VAL
    return split


def _repeated(rows: np.ndarray) -> np.ndarray:
    """Whether each entry of the 2-D ``rows`` equals an entry before it in its row (the first of each value is not)."""
    order = np.argsort(rows, axis=1, kind="stable")
    ranked = np.take_along_axis(rows, order, axis=1)
    later = np.zeros(rows.shape, bool)
    later[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
    out = np.empty(rows.shape, bool)
    np.put_along_axis(out, order, later, axis=1)
    return out


def _negatives(rng, src: np.ndarray, keys: np.ndarray, n: int, k: int) -> np.ndarray:
    """``k`` distinct negatives for the citing paper ``src`` of each evaluated pair, uniformly among the papers that are
    neither the paper itself nor one it cites or is cited by (any split; ``keys``: every citation, ``citing * n +
    cited``)."""
    sources = np.unique(src)
    is_source = np.zeros(n, bool)
    is_source[sources] = True
    citing, cited = keys // n, keys % n
    mine = is_source[citing] | is_source[cited]
    a, b = citing[mine], cited[mine]
    near = np.concatenate([a * n + b, b * n + a, sources * n + sources])
    near = near[is_source[near // n]]  # each source's own neighbours and itself
    near.sort()
    room = n - np.bincount(near // n, minlength=n)[sources]
    if (room < k).any():
        s = int(sources[np.argmin(room)])
        raise SylvieError(f"synthetic (structure citation): paper {s} leaves {int(room.min())} papers it neither "
                          f"cites nor is cited by, fewer than eval_negatives={k}; lower eval_negatives to at most "
                          f"{int(room.min())}, or raise nodes")
    out = np.empty((src.shape[0], k), np.int64)
    step = max(1, _CHUNK // k)
    for lo in range(0, src.shape[0], step):  # a block of pairs at a time: temporaries of _CHUNK draws
        rows = np.arange(lo, min(lo + step, src.shape[0]))
        todo = np.ones((rows.shape[0], k), bool)  # of the rows still drawing: the entries to draw again
        while rows.size:
            drawn = out[rows]
            drawn[todo] = rng.integers(0, n, int(todo.sum()))
            out[rows] = drawn
            key = (src[rows] * n)[:, None] + drawn
            todo = (near[np.minimum(np.searchsorted(near, key), near.shape[0] - 1)] == key) | _repeated(drawn)
            again = todo.any(axis=1)
            rows, todo = rows[again], todo[again]
    return out


def citation_bytes(nodes: int, avg_degree: float, features: int, val_fraction: float, eval_negatives: int) -> int:
    """A lower bound of the generator's peak memory: the features (float32), the citations (keys, both ends, the
    message graph both ways: int64) and the negatives (int64)."""
    edges = nodes * avg_degree / 2
    return int(nodes * features * 4 + edges * 8 * 5 + 2 * val_fraction * nodes * eval_negatives * 8)


def citations(*, nodes: int, avg_degree: float, classes: int, homophily: float, degree_sigma: float,
              val_fraction: float, seed: int) -> Citations:
    """The citations of the graph :func:`generate_citation` makes with these knobs (the same random stream)."""
    streams = np.random.SeedSequence(seed).spawn(3)
    rng = np.random.default_rng(streams[0])
    n = nodes
    topic = rng.integers(0, classes, n)
    attractiveness = rng.lognormal(-degree_sigma ** 2 / 2, degree_sigma, n)
    weight = rng.lognormal(-REFERENCE_SIGMA ** 2 / 2, REFERENCE_SIGMA, n)
    references = np.minimum(rng.multinomial(int(round(n * avg_degree / 2)), weight / weight.sum()),
                            np.arange(n))  # paper t has t older papers to cite
    keys = _citation_keys(rng, topic, references, attractiveness, homophily)
    split = _held_out(keys, n, val_fraction)
    ids = rng.permutation(n)  # node ids in no time order: time t is node ids[t]
    time = np.empty(n, np.int64)
    time[ids] = np.arange(n)
    by_id = np.empty(n, np.int64)
    by_id[ids] = topic
    return Citations(time=time, topic=by_id, src=ids[keys // n], dst=ids[keys % n], split=split)


def check_citation_parameters(*, nodes: int, avg_degree: float, features: int, classes: int, homophily: float,
                              degree_sigma: float, val_fraction: float, eval_negatives: int) -> None:
    if nodes < 2 or not 1 <= classes <= nodes or features < 1 or avg_degree <= 0 or not 0 <= homophily <= 1 \
            or degree_sigma < 0 or not 0 <= val_fraction <= 1 or eval_negatives < 1:
        raise SylvieError(f"synthetic (structure citation): need nodes >= 2, 1 <= classes (topics) <= nodes, features "
                          f">= 1, avg_degree > 0, homophily and val_fraction in [0, 1], degree_sigma >= 0, "
                          f"eval_negatives >= 1 (got nodes={nodes}, classes={classes}, features={features}, "
                          f"avg_degree={avg_degree})")
    if avg_degree > nodes - 1:
        raise SylvieError(f"synthetic (structure citation): avg_degree={avg_degree} is more than {nodes:,} papers "
                          f"allow (a paper cites older papers only: at most (nodes - 1) / 2 references on average); "
                          f"lower avg_degree or raise nodes")
    check_fits(citation_bytes(nodes, avg_degree, features, val_fraction, eval_negatives),
               f"synthetic (structure citation): {nodes:,} papers x {features:,} features, "
               f"{int(nodes * avg_degree / 2):,} citations and {eval_negatives:,} negatives per evaluated one",
               "lower nodes, features, val_fraction or eval_negatives")


def generate_citation(*, nodes: int, avg_degree: float, features: int, classes: int, homophily: float,
                      feature_noise: float, degree_sigma: float, val_fraction: float, eval_negatives: int, seed: int,
                      name: str = "synthetic") -> Graph:
    """The citation graph (module docstring) as a canonical graph: its edges the training citations both ways,
    ``link`` its pairs (training citations, then validation, then test, each as citing -> cited) and each evaluated
    pair's negatives. It has no node labels: one class, every node a training node (what a canonical graph asks of
    node splits)."""
    knobs = dict(nodes=nodes, avg_degree=avg_degree, features=features, classes=classes, homophily=homophily,
                 degree_sigma=degree_sigma, val_fraction=val_fraction, eval_negatives=eval_negatives)
    check_citation_parameters(**knobs)
    c = citations(**{k: v for k, v in knobs.items() if k not in ("features", "eval_negatives")}, seed=seed)
    _, features_rng, negatives_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    centroids = features_rng.standard_normal((classes, features)).astype(np.float32)
    feats = class_features(features_rng, centroids, c.topic, feature_noise)

    train = c.split == TRAIN
    evaluated = [np.flatnonzero(c.split == s) for s in (VAL, TEST)]
    evaluated = [i[np.argsort(c.src[i], kind="stable")] for i in evaluated]  # by citing paper
    order = np.concatenate([np.flatnonzero(train), *evaluated])
    src, dst = c.src[order], c.dst[order]
    n_train = int(train.sum())
    keys = c.src * np.int64(nodes) + c.dst
    negatives = _negatives(negatives_rng, src[n_train:], keys, nodes, eval_negatives) if src.shape[0] > n_train \
        else np.zeros((0, 0), np.int64)
    split = np.concatenate([np.full(n_train, TRAIN, np.int8)] + [np.full(i.shape[0], s, np.int8)
                                                                  for s, i in zip((VAL, TEST), evaluated)])
    message_src, message_dst = edges_of_keys(undirected_keys(src[:n_train], dst[:n_train], nodes), nodes)
    params = {**knobs, "features": features, "feature_noise": feature_noise, "seed": seed}
    return Graph(name=name, src=message_src, dst=message_dst, features=feats,
                 labels=np.zeros(nodes, np.int64), train_mask=np.ones(nodes, bool), val_mask=np.zeros(nodes, bool),
                 test_mask=np.zeros(nodes, bool), num_classes=1,
                 info={"generator": "citation-like", "params": params},
                 link=LinkPairs(src=src, dst=dst, split=split, negatives=negatives, undirected=True))
