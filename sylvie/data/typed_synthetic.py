"""What the typed synthetic graphs shaped like real ones share (``mag_like``: ogbn-mag; ``igbh_like``: IGBH-small):
node counts and edge counts per relation scaled from the real graph's, a class for every node of every type (the
target type's label, the other types' home class), a log-normal degree propensity per node, and each relation's
distinct edges drawn by propensity, within the source's class with a probability per relation, else anywhere."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sylvie.data.graph import Graph, sorted_unique, typed_edges
from sylvie.data.synthetic import sample_in_blocks
from sylvie.errors import SylvieError
from sylvie.graph_types import GraphTypes, Relation

CLASS_SKEW = 0.7  # class c's share ~ (c + 1)^-0.7, as venues' sizes are skewed


class ClassGraph(NamedTuple):
    types: GraphTypes  # with the reverses where asked for
    homes: dict[str, np.ndarray]  # node type -> each node's class (the target type's: its label)
    src: np.ndarray  # global ids (types in id order), every relation's edges then their reverses'
    dst: np.ndarray
    relation: np.ndarray  # int16, each edge's index in types.relations


def scaled(table: dict, scale: float) -> dict:
    """Each count of ``table`` times ``scale``, rounded, at least 1."""
    return {k: max(1, int(round(n * scale))) for k, n in table.items()}


def relation_homophily_of(relations, homophily: float, by_name: dict | None, where: str) -> dict[Relation, float]:
    """Each relation's homophily: ``by_name[r.name]`` (the ``relation_homophily`` knob) where it names r, else
    ``homophily``. A name that is not one of ``relations`` is refused (a SylvieError naming the knob)."""
    by_name = dict(by_name or {})
    names = [r.name for r in relations]
    unknown = sorted(set(by_name) - set(names))
    if unknown:
        raise SylvieError(f"synthetic ({where}): relation_homophily names {', '.join(map(repr, unknown))}, not a "
                          f"relation of this graph; its relations are {', '.join(names)}")
    bad = {k: v for k, v in by_name.items() if not (isinstance(v, (int, float)) and 0 <= v <= 1)}
    if bad:
        raise SylvieError(f"synthetic ({where}): relation_homophily {bad}: each a share in [0, 1]")
    return {r: float(by_name.get(r.name, homophily)) for r in relations}


def class_graph(rng, counts: dict[str, int], edges: dict[Relation, int], target: str, classes: int,
                homophily: dict[Relation, float], degree_sigma: float, reverse_relations: bool,
                homophily_is_share: bool = False) -> ClassGraph:
    """Node types ``counts`` (in id order), each relation's ``edges[r]`` distinct edges (a relation too dense for its
    types keeps fewer), classes skewed (``CLASS_SKEW``; the target type has every class at least once). An edge's
    source is drawn by propensity; its destination within the source's class with probability ``homophily[r]``,
    else anywhere (by propensity). ``homophily_is_share``: ``homophily[r]`` is instead the expected share of r's
    edges whose two ends share a class, which counts the edges drawn anywhere that land in the class by chance."""
    share = (np.arange(classes) + 1.0) ** -CLASS_SKEW
    share /= share.sum()
    homes = {t: np.concatenate([np.arange(classes), rng.choice(classes, n - classes, p=share)])
             if t == target else rng.choice(classes, n, p=share) for t, n in counts.items()}
    pools = {t: _pool(rng, homes[t], classes, degree_sigma) for t in counts}
    offsets = dict(zip(counts, np.concatenate([[0], np.cumsum(list(counts.values()))]), strict=False))

    src, dst = [], []
    for relation, m in edges.items():
        h = homophily[relation]
        if homophily_is_share:
            h = _near_for_share(h, pools[relation.src], pools[relation.dst])

        def draw(count: int, relation=relation, h=h) -> np.ndarray:
            s = _pick(rng, pools[relation.src], np.zeros(count, np.int64), global_=True)
            home = homes[relation.src][s]
            near = rng.random(count) < h
            d = np.where(near, _pick(rng, pools[relation.dst], home),
                         _pick(rng, pools[relation.dst], home, global_=True))
            keys = s * counts[relation.dst] + d
            return keys[s != d] if relation.src == relation.dst else keys

        keys = _distinct_keys(rng, draw, m)
        s, d = keys // counts[relation.dst], keys % counts[relation.dst]
        src.append(s + offsets[relation.src])
        dst.append(d + offsets[relation.dst])
    types, src, dst, relation = typed_edges(GraphTypes(tuple(counts), tuple(edges), target), src, dst,
                                            reverse_relations)
    return ClassGraph(types, homes, src, dst, relation)


def _pool(rng, venue: np.ndarray, classes: int, sigma: float):
    """A node type's nodes by class with their propensities: what ``sample_in_blocks`` draws from (block 0 of the
    second set of bounds: every node)."""
    order = np.argsort(venue, kind="stable")
    theta = rng.lognormal(0.0, sigma, venue.shape[0])
    cum = np.concatenate([[0.0], np.cumsum(theta[order])])
    bounds = np.searchsorted(venue[order], np.arange(classes + 1))
    return order, cum, bounds


def _pick(rng, pool, venue: np.ndarray, global_: bool = False) -> np.ndarray:
    """A node of the pool's type per entry, by propensity: within the entry's class, or (``global_``) anywhere.
    A class without nodes of the type draws anywhere."""
    order, cum, bounds = pool
    if global_:
        n = order.shape[0]
        return sample_in_blocks(rng, np.zeros(venue.shape[0], np.int64), order, cum, np.array([0]), np.array([n]))
    starts, ends = bounds[:-1].copy(), bounds[1:].copy()
    empty = starts == ends
    starts[empty], ends[empty] = 0, order.shape[0]
    return sample_in_blocks(rng, venue, order, cum, starts, ends)


def _near_for_share(share: float, src_pool, dst_pool) -> float:
    """The probability of drawing an edge's destination within its source's class that makes ``share`` of the
    edges join two nodes of one class, in expectation: a source of class c comes with probability w_c (its class's
    share of the source type's propensity), a destination drawn anywhere lands in c with probability m_c (likewise),
    so share = near * A + (1 - near) * q, q = sum w_c m_c, A = sum of w_c over the classes the destination type has
    (a class it lacks draws anywhere). Clipped to [0, 1]: a share below chance (q) or above A cannot be reached."""
    w, m = (_class_mass(p) for p in (src_pool, dst_pool))
    q, reach = float(w @ m), float(w[m > 0].sum())
    return 1.0 if reach - q <= 1e-12 else float(np.clip((share - q) / (reach - q), 0.0, 1.0))


def _class_mass(pool) -> np.ndarray:
    """Each class's share of the pool's propensity."""
    _, cum, bounds = pool
    mass = cum[bounds[1:]] - cum[bounds[:-1]]
    return mass / mass.sum()


def _distinct_keys(rng, draw, m: int, rounds: int = 8) -> np.ndarray:
    """The sorted keys of ``m`` distinct edges of a relation (``draw(count)``: the keys of ``count`` edges drawn):
    drawn again for the shortfall where a draw repeated edges (a hub's), at most ``rounds`` times (a relation too
    dense for its types keeps fewer), then a random surplus dropped."""
    keys = sorted_unique(draw(m))
    for _ in range(rounds):
        if keys.shape[0] >= m:
            break
        new_share = max(keys.shape[0] / m, 0.05)
        keys = sorted_unique(np.concatenate([keys, draw(int((m - keys.shape[0]) / new_share) + 1)]))
    if keys.shape[0] > m:
        keys = np.sort(rng.choice(keys, m, replace=False))
    return keys


def feature_classes(rng, labels: np.ndarray, classes: int, label_noise: float) -> np.ndarray:
    """The class each target node's features follow: its label, another (uniform) for a ``label_noise`` share."""
    seen = labels.copy()
    atypical = rng.random(labels.shape[0]) < label_noise
    seen[atypical] = rng.integers(0, classes, int(atypical.sum()))
    return seen


def target_graph(g: ClassGraph, counts: dict[str, int], classes: int, masks: list[np.ndarray],
                 type_features: tuple, info: dict, name: str) -> Graph:
    """The typed graph of ``g``: the target type (first in id order) labelled by its class and split by ``masks``
    (train, val, test over its nodes); the other types unlabelled and in no split."""
    target = g.types.target
    labels = g.homes[target].astype(np.int64)
    total = sum(counts.values())
    pad = total - counts[target]
    return Graph(name=name, src=g.src, dst=g.dst, features=np.empty((total, 0), np.float32),
                 labels=np.concatenate([labels, np.full(pad, -1, np.int64)]),
                 train_mask=np.concatenate([masks[0], np.zeros(pad, bool)]),
                 val_mask=np.concatenate([masks[1], np.zeros(pad, bool)]),
                 test_mask=np.concatenate([masks[2], np.zeros(pad, bool)]),
                 num_classes=classes, info=info, types=g.types, type_counts=tuple(counts.values()),
                 relation=g.relation, type_features=type_features)
