"""``structure: mag`` (the ``mag`` preset): a typed citation graph shaped like ogbn-mag, scaled by ``nodes``.

Four node types in ogbn-mag's proportions (paper 736,389, author 1,134,649, institution 8,740, field_of_study 59,965
of 1,939,743) and four relations in its edge counts per node (author writes paper 7,145,660, paper cites paper
5,416,271, paper has_topic field_of_study 7,505,078, author affiliated_with institution 1,043,998), each relation's
reverse added unless ``reverse_relations`` is off (as R-GCN and R-GAT recipes for ogbn-mag do). Papers carry the
labels (``classes`` venues, their sizes skewed as venues' are: class c's share ~ (c + 1)^-0.7), ``features``
features (their venue's centroid plus noise, ``label_noise`` of them following another venue), and a split by a
year-like score (the first ``train_fraction`` of the papers by score train, the next ``val_fraction`` validate, the
rest test: ogbn-mag trains on the years before 2018, validates on 2018 and tests on 2019). The other types have no
features: a model learns an embedding for each of their nodes.

Every node has a log-normal degree propensity (log-std ``degree_sigma``: most authors write a paper or two, a few
write hundreds); an edge picks its ends by propensity. Authors, institutions and fields have a home venue (drawn as
papers' venues are): an author writes papers, a paper cites papers and has topics in its (home) venue with
probability ``homophily``, else anywhere; an author's institution shares its home venue with the same probability.
So the venue is learnt from a paper's own features, its citations, its authors' other papers and its topics, as
R-GCN learns it on ogbn-mag. ``benchmarks/mag_like.py`` prints the preset beside ogbn-mag's published statistics.
"""
from __future__ import annotations

import numpy as np

from sylvie.data.graph import Graph, sorted_unique, typed_edges
from sylvie.data.synthetic import class_features, sample_in_blocks, split_masks
from sylvie.errors import SylvieError
from sylvie.graph_types import GraphTypes, Relation

MAG_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
MAG_EDGES = {Relation("author", "writes", "paper"): 7_145_660,
             Relation("paper", "cites", "paper"): 5_416_271,
             Relation("paper", "has_topic", "field_of_study"): 7_505_078,
             Relation("author", "affiliated_with", "institution"): 1_043_998}
MAG_TOTAL = sum(MAG_NODES.values())  # 1,939,743
VENUE_SKEW = 0.7


def generate_mag(*, nodes: int, features: int, classes: int, homophily: float, feature_noise: float,
                 label_noise: float, train_fraction: float, val_fraction: float, seed: int, degree_sigma: float = 1.0,
                 reverse_relations: bool = True, name: str = "synthetic") -> Graph:
    scale = nodes / MAG_TOTAL
    counts = {t: max(1, int(round(n * scale))) for t, n in MAG_NODES.items()}
    if counts["paper"] < classes or features < 1 or not (0 <= homophily <= 1) or not (0 <= label_noise <= 1) \
            or train_fraction + val_fraction > 1 or degree_sigma < 0:
        raise SylvieError(f"synthetic (structure mag): need at least one paper per class ({counts['paper']:,} papers "
                          f"for {classes} classes: raise nodes or lower classes), features >= 1, homophily and "
                          f"label_noise in [0, 1], train_fraction + val_fraction <= 1, degree_sigma >= 0")
    rng = np.random.default_rng(seed)
    types = GraphTypes(tuple(MAG_NODES), tuple(MAG_EDGES), "paper")  # papers the target
    share = (np.arange(classes) + 1.0) ** -VENUE_SKEW
    share /= share.sum()
    venue = {t: np.concatenate([np.arange(classes), rng.choice(classes, counts[t] - classes, p=share)])
             if t == "paper" else rng.choice(classes, counts[t], p=share) for t in MAG_NODES}
    pools = {t: _pool(rng, venue[t], classes, degree_sigma) for t in MAG_NODES}
    offsets = dict(zip(MAG_NODES, np.concatenate([[0], np.cumsum(list(counts.values()))]), strict=False))

    src, dst = [], []
    for relation, real in MAG_EDGES.items():
        m = max(1, int(round(real * scale)))

        def draw(count: int, relation=relation) -> np.ndarray:
            s = _pick(rng, pools[relation.src], np.zeros(count, np.int64), global_=True)
            home = venue[relation.src][s]
            near = rng.random(count) < homophily
            d = np.where(near, _pick(rng, pools[relation.dst], home),
                         _pick(rng, pools[relation.dst], home, global_=True))
            keys = s * counts[relation.dst] + d
            return keys[s != d] if relation.src == relation.dst else keys

        keys = _distinct_keys(rng, draw, m)
        s, d = keys // counts[relation.dst], keys % counts[relation.dst]
        src.append(s + offsets[relation.src])
        dst.append(d + offsets[relation.dst])
    types, src, dst, relation = typed_edges(types, src, dst, reverse_relations)

    papers = counts["paper"]
    labels = venue["paper"].astype(np.int64)
    seen = labels.copy()  # what the features follow: another venue for a label_noise share
    atypical = rng.random(papers) < label_noise
    seen[atypical] = rng.integers(0, classes, int(atypical.sum()))
    centroids = rng.standard_normal((classes, features)).astype(np.float32)
    feats = class_features(rng, centroids, seen, feature_noise)
    masks = split_masks(rng, papers, train_fraction, val_fraction, score=-rng.random(papers))
    total = sum(counts.values())
    pad = total - papers  # the other types: unlabelled, in no split
    params = {"nodes": nodes, "features": features, "classes": classes, "homophily": homophily,
              "feature_noise": feature_noise, "label_noise": label_noise, "train_fraction": train_fraction,
              "val_fraction": val_fraction, "seed": seed, "degree_sigma": degree_sigma,
              "reverse_relations": reverse_relations}
    return Graph(name=name, src=src, dst=dst,
                 features=np.empty((total, 0), np.float32),
                 labels=np.concatenate([labels, np.full(pad, -1, np.int64)]),
                 train_mask=np.concatenate([masks[0], np.zeros(pad, bool)]),
                 val_mask=np.concatenate([masks[1], np.zeros(pad, bool)]),
                 test_mask=np.concatenate([masks[2], np.zeros(pad, bool)]),
                 num_classes=classes, info={"generator": "mag-like", "params": params},
                 types=types, type_counts=tuple(counts.values()), relation=relation,
                 type_features=(feats,) + (None,) * (len(counts) - 1))


def _pool(rng, venue: np.ndarray, classes: int, sigma: float):
    """A node type's nodes by venue with their propensities: what ``sample_in_blocks`` draws from (block 0 of the
    second set of bounds: every node)."""
    order = np.argsort(venue, kind="stable")
    theta = rng.lognormal(0.0, sigma, venue.shape[0])
    cum = np.concatenate([[0.0], np.cumsum(theta[order])])
    bounds = np.searchsorted(venue[order], np.arange(classes + 1))
    return order, cum, bounds


def _pick(rng, pool, venue: np.ndarray, global_: bool = False) -> np.ndarray:
    """A node of the pool's type per entry, by propensity: within the entry's venue, or (``global_``) anywhere.
    A venue without nodes of the type draws anywhere."""
    order, cum, bounds = pool
    if global_:
        n = order.shape[0]
        return sample_in_blocks(rng, np.zeros(venue.shape[0], np.int64), order, cum, np.array([0]), np.array([n]))
    starts, ends = bounds[:-1].copy(), bounds[1:].copy()
    empty = starts == ends
    starts[empty], ends[empty] = 0, order.shape[0]
    return sample_in_blocks(rng, venue, order, cum, starts, ends)


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
