"""A link-prediction dataset made from any graph of one node type: its edges split at random into training,
validation and test pairs (``edge_split``), and the negatives each validation and test pair is ranked against drawn
once (``eval_negatives``). Both are deterministic from the dataset's ``seed``, so that every run of a dataset ranks
against the same pairs.

An undirected graph (every edge stored both ways, as the canonical graph stores one) has a pair per edge, held out
as one: both of its directions leave message passing. The graph that comes out has the training edges as its edges
(what passes messages) and the pairs in ``graph.link`` (``sylvie.formats.link_pairs``); validation and test edges
never reach a layer.

Negatives are filtered: a pair (u, v)'s are nodes w with (u, w) an edge of no split (nor, undirected, (w, u)), w
neither u nor v, each drawn once per pair, uniformly among such nodes.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, pair_keys, sorted_unique
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TEST, TRAIN, VAL, LinkPairs

# the seed's two streams: the split's draw and the negatives' (each of its own, so that one draws the same whatever
# the other draws)
_SPLIT_STREAM, _NEGATIVES_STREAM = 0, 1
_DRAWS_PER_CHUNK = 1 << 22  # negatives drawn at a time (int64 each, a few temporaries of this size)


def has_edge_split(options) -> bool:
    """Whether a dataset's options (``DatasetConfig``) give an edge split: drawn (``edge_split``) or a user's own."""
    return bool(options.edge_split or options.edge_split_column or options.val_edges or options.test_edges)


def check_shares(shares, where: str) -> tuple[float, float]:
    """``edge_split``'s (val, test) shares, or a SylvieError naming ``where``: each above 0 (both splits are
    evaluated on), their sum below 1 (the rest trains)."""
    val, test = (float(s) for s in shares)
    said = f"{where}: edge_split [{val:g}, {test:g}]"
    for name, share in (("val", val), ("test", test)):
        if share <= 0:
            raise SylvieError(f"{said}: the {name} share is 0, leaving no {name} pairs to evaluate on; give it a "
                              f"share above 0 (e.g. [0.05, 0.1])")
    if val + test >= 1:
        raise SylvieError(f"{said}: the shares sum to {val + test:g}, leaving no edge to train on; give shares "
                          f"summing to less than 1 (e.g. [0.05, 0.1])")
    return val, test


def with_edge_split(graph: Graph, options, name: str) -> Graph:
    """The graph a source built (``registry.load``), with the edge split its dataset's ``options`` ask for: drawn at
    random where they set ``edge_split`` (``split_edges``); a graph whose source gave its split (``graph.link``
    set: a user's files) or for which none is asked, as it came."""
    if graph.link is not None or not options.edge_split:
        return graph
    return split_edges(graph, options.edge_split, options.seed, options.eval_negatives, f"dataset '{name}'")


def in_sorted(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is one of the sorted ``keys`` (a bool array of ``values``' shape)."""
    if not keys.shape[0]:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(keys, values), keys.shape[0] - 1)
    return keys[at] == values


def is_undirected(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> bool:
    """Whether every edge's reverse is an edge too (self-loops aside): the graph is an undirected one, stored both
    ways. Then it has as many distinct directed edges as twice its distinct unordered pairs."""
    directed = src * num_nodes + dst
    directed = directed[src != dst]
    return sorted_unique(directed).shape[0] == 2 * pair_keys(src, dst, num_nodes).shape[0]


def positive_keys(src: np.ndarray, dst: np.ndarray, num_nodes: int, undirected: bool) -> np.ndarray:
    """The sorted keys ``u * num_nodes + v`` of the edges ``src -> dst`` of every split, both directions where the
    graph is undirected: what a negative must not be."""
    keys = [src * num_nodes + dst] + ([dst * num_nodes + src] if undirected else [])
    return sorted_unique(np.concatenate(keys))


def split_edges(graph: Graph, shares, seed: int, negatives: int, where: str) -> Graph:
    """``graph`` as a link-prediction dataset: shares (val, test) of its edges (``check_shares``; an undirected edge
    counted and held out as one) drawn at random with ``seed`` as validation and test pairs, the rest its training
    edges and pairs; ``negatives`` filtered negatives drawn for each validation and test pair
    (``draw_negatives``). ``where``: the dataset, as an error names it."""
    if graph.typed:
        raise SylvieError(f"{where}: edge_split: the graph is typed ({len(graph.types.node_types)} node types, "
                          f"{len(graph.types.relations)} relations); an edge split is drawn on graphs of one node "
                          f"type only: remove edge_split, or use a graph of one node type")
    val, test = check_shares(shares, where)
    n = graph.num_nodes
    src, dst = np.asarray(graph.src, np.int64), np.asarray(graph.dst, np.int64)
    undirected = is_undirected(src, dst, n)
    if undirected:  # each edge's key whichever way it is stored: min * n + max
        edge_keys = np.minimum(src, dst) * n + np.maximum(src, dst)
    else:
        edge_keys = src * n + dst
    pairs = sorted_unique(edge_keys[src != dst])  # self-loops are never predicted: they stay in the graph
    m = pairs.shape[0]
    counts = int(round(val * m)), int(round(test * m))
    edges = f"{m} {'undirected ' if undirected else ''}edges"
    for name, share, count in (("val", val, counts[0]), ("test", test, counts[1])):
        if count == 0:
            raise SylvieError(f"{where}: edge_split [{val:g}, {test:g}]: the graph has {edges}, too few for a {name} "
                              f"share of {share:g} to hold one; give a larger share or a larger graph")
    if m - sum(counts) < 1:
        raise SylvieError(f"{where}: edge_split [{val:g}, {test:g}]: the graph's {edges} leave none to train on; give "
                          f"smaller shares")
    order = np.random.default_rng([seed, _SPLIT_STREAM]).permutation(m)
    parts = (order[sum(counts):], order[:counts[0]], order[counts[0]:sum(counts)])  # train, val, test
    split_keys = [np.sort(pairs[p]) for p in parts]
    held = np.sort(np.concatenate(split_keys[1:]))
    keep = ~in_sorted(edge_keys, held)  # both directions of a held-out undirected edge
    ends = [edges_of_keys(k.copy(), n) for k in split_keys]
    pair_src, pair_dst = (np.concatenate([e[i] for e in ends]) for i in (0, 1))
    split = np.concatenate([np.full(k.shape[0], s, np.int8) for s, k in zip((TRAIN, VAL, TEST), split_keys,
                                                                             strict=True)])
    evaluated = split != TRAIN
    drawn = draw_negatives(pair_src[evaluated], pair_dst[evaluated], positive_keys(src, dst, n, undirected), n,
                           negatives, seed, where)
    link = LinkPairs(src=pair_src, dst=pair_dst, split=split, negatives=drawn, undirected=undirected)
    info = {**graph.info, "edge_split": {"val": val, "test": test, "seed": int(seed), "eval_negatives": int(negatives),
                                         "undirected": undirected}}
    return dataclasses.replace(graph, src=src[keep], dst=dst[keep], link=link, info=info, counted_degrees=None)


def draw_negatives(src: np.ndarray, dst: np.ndarray, positives: np.ndarray, num_nodes: int, k: int, seed: int,
                   where: str, name_pair=None) -> np.ndarray:
    """int64 ``[len(src), k]``: for each pair (src[i], dst[i]) k distinct destinations w, uniformly among the nodes
    with src[i] -> w not in ``positives`` (sorted keys ``u * num_nodes + w``, ``positive_keys``: every split's
    edges, which hold the pair itself) and w != src[i]; drawn with ``seed``. A source with fewer than k such nodes is
    a SylvieError naming ``where`` and the pair (``name_pair(i)``: where pair i came from, if known).

    Drawn by rejection, a chunk of pairs at a time: 2k + 8 uniform draws per pair, of which the first k distinct
    allowed ones are kept (a uniform k-subset); a pair left short (a source joined to most nodes) draws from its
    allowed nodes listed."""
    m, n = src.shape[0], num_nodes
    out = np.empty((m, k), np.int64)
    if not m:
        return out
    ps, pd = positives // n, positives % n
    allowed = n - 1 - np.bincount(ps[ps != pd], minlength=n)  # distinct destinations but the node itself
    short = allowed[src] < k
    if short.any():
        i = int(np.flatnonzero(short)[0])
        at = name_pair(i) if name_pair is not None else where
        raise SylvieError(f"{at}: eval_negatives {k}: node {int(src[i])} of the pair ({int(src[i])}, {int(dst[i])}) "
                          f"has {int(allowed[src[i]])} nodes it is joined to by no edge of any split, too few for {k} "
                          f"distinct negatives ({int(short.sum())} such pairs); set eval_negatives to at most "
                          f"{int(allowed[src].min())}")
    rng = np.random.default_rng([seed, _NEGATIVES_STREAM])
    c = 2 * k + 8
    step = max(1, _DRAWS_PER_CHUNK // c)
    for start in range(0, m, step):
        rows = slice(start, min(start + step, m))
        r = rows.stop - rows.start
        u = src[rows, None]
        draws = rng.integers(0, n, size=(r, c), dtype=np.int64)
        ok = (draws != u) & ~in_sorted(u * n + draws, positives)
        flat = np.where(ok, np.arange(r, dtype=np.int64)[:, None] * n + draws, -1).reshape(-1)
        distinct, first = np.unique(flat, return_index=True)  # each (row, node) once, at its first draw
        first = np.sort(first[distinct >= 0])  # in draw order, row by row
        row = first // c
        have = np.bincount(row, minlength=r)
        rank = np.arange(first.shape[0]) - (np.cumsum(have) - have)[row]
        take = rank < k
        block = out[rows]
        block[row[take], rank[take]] = draws.reshape(-1)[first[take]]
        for i in np.flatnonzero(have < k):  # few allowed nodes: draw among them, listed
            node = int(src[rows.start + i])
            lo, hi = np.searchsorted(positives, [node * n, (node + 1) * n])
            candidates = np.setdiff1d(np.arange(n, dtype=np.int64), np.append(positives[lo:hi] - node * n, node))
            block[i] = rng.choice(candidates, k, replace=False)
    return out
