"""A link-prediction dataset made from a graph: the edges of one relation (a graph of one node type: its edges; a
typed graph: the relation ``edge_split_relation`` names) split at random into training, validation and test pairs
(``edge_split``), and the negatives each validation and test pair is ranked against drawn once (``eval_negatives``).
Both are deterministic from the dataset's ``seed``, so that every run of a dataset ranks against the same pairs.

A relation stored both ways within one node type (an undirected graph, as the canonical graph stores one) has a pair
per edge, held out as one: both of its directions leave message passing. On a typed graph a held-out pair's edge
also leaves the relation's reverse (``rev-<name>``, ``GraphTypes.reverse_index``), so that no held-out pair carries a
message either way; the other relations pass messages and are never predicted. The graph that comes out has the
training edges as its edges and the pairs in ``graph.link`` (``sylvie.formats.link_pairs``; a typed graph's with
their relation); validation and test edges never reach a layer.

Negatives are filtered: a pair (u, v)'s are nodes w of the relation's destination type with (u, w) an edge of the
relation in no split (nor, undirected, (w, u)), w neither u nor v, each drawn once per pair, uniformly among such
nodes.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, pair_keys, sorted_unique
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TEST, TRAIN, VAL, LinkPairs
from sylvie.graph_types import GraphTypes

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
    return split_edges(graph, options.edge_split, options.seed, options.eval_negatives, f"dataset '{name}'",
                       options.edge_split_relation)


def target_relation(types: GraphTypes, spec: str, where: str) -> int:
    """The index among ``types.relations`` of the relation ``spec`` names (``edge_split_relation``): its name, or
    ``src:name:dst`` where several relations share the name; a SylvieError naming ``where`` for one that names no
    relation, or several."""
    known = ", ".join(f"{r.src}:{r.name}:{r.dst}" for r in types.relations)
    fields = spec.split(":")
    if len(fields) == 3:
        found = [i for i, r in enumerate(types.relations) if (r.src, r.name, r.dst) == tuple(fields)]
    elif len(fields) == 1:
        found = [i for i, r in enumerate(types.relations) if r.name == spec]
    else:
        raise SylvieError(f"{where}: edge_split_relation {spec!r}: give a relation's name, or src:name:dst (one of "
                          f"{known})")
    if not found:
        raise SylvieError(f"{where}: edge_split_relation {spec!r} is none of the graph's relations ({known}); name "
                          f"one of them")
    if len(found) > 1:
        said = ", ".join(f"{types.relations[i].src}:{spec}:{types.relations[i].dst}" for i in found)
        raise SylvieError(f"{where}: edge_split_relation {spec!r} names {len(found)} relations; give one as "
                          f"src:name:dst ({said})")
    return found[0]


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


def split_edges(graph: Graph, shares, seed: int, negatives: int, where: str, relation: str | None = None) -> Graph:
    """``graph`` as a link-prediction dataset: shares (val, test) of its edges (``check_shares``; an undirected edge
    counted and held out as one) drawn at random with ``seed`` as validation and test pairs, the rest its training
    edges and pairs; ``negatives`` filtered negatives drawn for each validation and test pair
    (``draw_negatives``). A typed graph's edges of ``relation`` (``edge_split_relation``: ``target_relation``) are
    split, its held-out pairs also leaving the relation's reverse; a graph of one node type takes no ``relation``.
    ``where``: the dataset, as an error names it."""
    types = graph.types
    if graph.typed and not relation:
        raise SylvieError(f"{where}: edge_split on a typed graph needs edge_split_relation, the relation whose edges "
                          f"are split and predicted (one of {', '.join(r.name for r in types.relations)})")
    if relation and not graph.typed:
        raise SylvieError(f"{where}: edge_split_relation {relation!r}: the graph has one node type and one relation, "
                          f"whose edges edge_split splits; remove edge_split_relation")
    val, test = check_shares(shares, where)
    n = graph.num_nodes
    src, dst = np.asarray(graph.src, np.int64), np.asarray(graph.dst, np.int64)
    r = target_relation(types, relation, where) if graph.typed else 0
    edge_relation = graph.relation  # a typed graph's: each edge's relation
    mine = np.flatnonzero(edge_relation == r) if graph.typed else slice(None)
    r_src, r_dst = src[mine], dst[mine]
    s_type, d_type = types.ends(r)
    undirected = s_type == d_type and is_undirected(r_src, r_dst, n)

    def key(u, v):  # a pair's key: u * n + v, or an undirected pair's whichever way it is stored
        return np.minimum(u, v) * n + np.maximum(u, v) if undirected else u * n + v

    edge_keys = key(r_src, r_dst)
    pairs = sorted_unique(edge_keys[r_src != r_dst])  # self-loops are never predicted: they stay in the graph
    m = pairs.shape[0]
    counts = int(round(val * m)), int(round(test * m))
    edges = f"{m} {'undirected ' if undirected else ''}edges" + (f" of relation {types.relations[r]}" if graph.typed
                                                                 else "")
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
    keep = np.ones(src.shape[0], dtype=bool)
    keep[mine] = ~in_sorted(edge_keys, held)  # both directions of a held-out undirected edge
    reverse = types.reverse_index()[r]
    if reverse >= 0 and reverse != r:  # the reverse relation's edge v -> u of a held-out pair (u, v)
        back = np.flatnonzero(edge_relation == reverse)
        keep[back] = ~in_sorted(key(dst[back], src[back]), held)
    ends = [edges_of_keys(k.copy(), n) for k in split_keys]
    pair_src, pair_dst = (np.concatenate([e[i] for e in ends]) for i in (0, 1))
    split = np.concatenate([np.full(k.shape[0], s, np.int8) for s, k in zip((TRAIN, VAL, TEST), split_keys,
                                                                             strict=True)])
    evaluated = split != TRAIN
    offsets = graph.type_offsets
    drawn = draw_negatives(pair_src[evaluated], pair_dst[evaluated], positive_keys(r_src, r_dst, n, undirected), n,
                           negatives, seed, where, first=int(offsets[d_type]),
                           count=int(offsets[d_type + 1] - offsets[d_type]))
    link = LinkPairs(src=pair_src, dst=pair_dst, split=split, negatives=drawn, undirected=undirected,
                     relation=np.full(split.shape[0], r, np.int16) if graph.typed else None)
    info = {**graph.info, "edge_split": {"val": val, "test": test, "seed": int(seed), "eval_negatives": int(negatives),
                                         "undirected": undirected,
                                         **({"relation": types.to_json()["relations"][r]} if graph.typed else {})}}
    typed = {"relation": graph.relation[keep]} if graph.typed else {}
    return dataclasses.replace(graph, src=src[keep], dst=dst[keep], link=link, info=info, counted_degrees=None,
                               **typed)


def draw_negatives(src: np.ndarray, dst: np.ndarray, positives: np.ndarray, num_nodes: int, k: int, seed: int,
                   where: str, name_pair=None, first: int = 0, count: int | None = None) -> np.ndarray:
    """int64 ``[len(src), k]``: for each pair (src[i], dst[i]) k distinct destinations w among the nodes
    ``first .. first + count`` (default: every node; a typed graph's: the relation's destination type's), uniformly
    among those with src[i] -> w not in ``positives`` (sorted keys ``u * num_nodes + w``, ``positive_keys``: every
    split's edges, which hold the pair itself, every destination among those nodes) and w != src[i]; drawn with
    ``seed``. A source with fewer than k such nodes is a SylvieError naming ``where`` and the pair (``name_pair(i)``:
    where pair i came from, if known).

    Drawn by rejection, a chunk of pairs at a time: 2k + 8 uniform draws per pair, of which the first k distinct
    allowed ones are kept (a uniform k-subset); a pair left short (a source joined to most nodes) draws from its
    allowed nodes listed."""
    m, n = src.shape[0], num_nodes
    count = n - first if count is None else count
    last = first + count
    out = np.empty((m, k), np.int64)
    if not m:
        return out
    ps, pd = positives // n, positives % n
    inside = (src >= first) & (src < last)  # a source that is itself a candidate
    allowed = count - inside - np.bincount(ps[ps != pd], minlength=n)[src]  # distinct destinations but the node
    short = allowed < k
    if short.any():
        i = int(np.flatnonzero(short)[0])
        at = name_pair(i) if name_pair is not None else where
        raise SylvieError(f"{at}: eval_negatives {k}: node {int(src[i])} of the pair ({int(src[i])}, {int(dst[i])}) "
                          f"has {int(allowed[i])} nodes it is joined to by no edge of any split, too few for {k} "
                          f"distinct negatives ({int(short.sum())} such pairs); set eval_negatives to at most "
                          f"{int(allowed.min())}")
    rng = np.random.default_rng([seed, _NEGATIVES_STREAM])
    c = 2 * k + 8
    step = max(1, _DRAWS_PER_CHUNK // c)
    for start in range(0, m, step):
        rows = slice(start, min(start + step, m))
        r = rows.stop - rows.start
        u = src[rows, None]
        draws = rng.integers(first, last, size=(r, c), dtype=np.int64)
        ok = (draws != u) & ~in_sorted(u * n + draws, positives)
        flat = np.where(ok, np.arange(r, dtype=np.int64)[:, None] * n + draws, -1).reshape(-1)
        distinct, at = np.unique(flat, return_index=True)  # each (row, node) once, at its first draw
        at = np.sort(at[distinct >= 0])  # in draw order, row by row
        row = at // c
        have = np.bincount(row, minlength=r)
        rank = np.arange(at.shape[0]) - (np.cumsum(have) - have)[row]
        take = rank < k
        block = out[rows]
        block[row[take], rank[take]] = draws.reshape(-1)[at[take]]
        for i in np.flatnonzero(have < k):  # few allowed nodes: draw among them, listed
            node = int(src[rows.start + i])
            lo, hi = np.searchsorted(positives, [node * n, (node + 1) * n])
            candidates = np.setdiff1d(np.arange(first, last, dtype=np.int64),
                                      np.append(positives[lo:hi] - node * n, node))
            block[i] = rng.choice(candidates, k, replace=False)
    return out
