"""A deterministic degree-corrected stochastic block model with class-informative features.

Each node belongs to one of ``classes`` blocks. Node degree propensities are heavy-tailed (Pareto), so degrees
are skewed as in real graphs. Every edge picks its source by propensity; with probability ``homophily`` its
destination comes from the same block (else from a uniformly chosen block), again by propensity. Edges are made
undirected, with self-loops and duplicates removed.

A node's label is its block, except for a ``label_noise`` share of nodes whose label is drawn uniformly (atypical
nodes, as real graphs have: a product in a category its neighbours are not in). Features are the centroid of the
node's *label* plus Gaussian noise of std ``feature_noise``. So the graph says "the block", the features say "the
label", weakly: with label_noise 0 and little feature noise every model is right about every node (the 99.9% of
earlier tables); with the defaults a model must weigh a node's own noisy features against its neighbourhood, and
full-graph GraphSAGE lands between 60% and 85% (measured in benchmarks/README.md), so what compression, staleness
or sampling cost shows in accuracy. Atypical nodes do not change the structure: METIS cuts the same edges.
"""
from __future__ import annotations

import numpy as np

from sylvie.data.graph import Graph
from sylvie.errors import SylvieError

# The knobs of the generator; their defaults are the dataset section's in the config schema.
PARAMETERS = ("nodes", "avg_degree", "features", "classes", "homophily", "feature_noise", "label_noise",
              "train_fraction", "val_fraction", "seed")


def generate_from(options, name: str = "synthetic") -> Graph:
    """The graph the dataset section ``options`` (typed, ``sylvie.config.section("dataset", ...)``) describes."""
    return generate(name=name, **{k: getattr(options, k) for k in PARAMETERS})


def _sample_in_blocks(rng, blocks, order, cum, starts, ends):
    """One node per entry of ``blocks``, chosen within that block with probability ~ propensity."""
    lo, hi = cum[starts[blocks]], cum[ends[blocks]]
    u = lo + rng.random(blocks.shape[0]) * (hi - lo)
    pos = np.searchsorted(cum, u, side="right") - 1
    return order[np.clip(pos, starts[blocks], ends[blocks] - 1)]


def generate(*, nodes: int, avg_degree: float, features: int, classes: int, homophily: float, feature_noise: float,
             train_fraction: float, val_fraction: float, seed: int, label_noise: float = 0.0,
             name: str = "synthetic") -> Graph:
    if nodes < 2 or classes < 1 or classes > nodes or features < 1 or avg_degree <= 0:
        raise SylvieError(f"synthetic: need nodes >= 2, 1 <= classes <= nodes, features >= 1, avg_degree > 0 "
                          f"(got nodes={nodes}, classes={classes}, features={features}, avg_degree={avg_degree})")
    if not (0 <= homophily <= 1) or not (0 <= label_noise <= 1) or train_fraction + val_fraction > 1:
        raise SylvieError("synthetic: homophily and label_noise must be in [0, 1] and train_fraction + "
                          "val_fraction <= 1")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, nodes)  # the blocks; the labels of atypical nodes are redrawn below
    theta = rng.pareto(2.5, nodes) + 1.0
    order = np.argsort(labels, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(theta[order])])
    counts = np.bincount(labels, minlength=classes)
    ends = np.cumsum(counts)
    starts = ends - counts
    if (counts == 0).any():  # an empty block cannot be sampled from: fold it into block 0's range
        starts, ends = np.where(counts == 0, 0, starts), np.where(counts == 0, ends[0], ends)

    pairs = int(round(nodes * avg_degree / 2))
    src_block = rng.choice(classes, pairs, p=counts / nodes)
    src = _sample_in_blocks(rng, src_block, order, cum, starts, ends)
    same = rng.random(pairs) < homophily
    dst_block = np.where(same, labels[src], rng.integers(0, classes, pairs))
    dst = _sample_in_blocks(rng, dst_block, order, cum, starts, ends)

    keep = src != dst
    src, dst = src[keep], dst[keep]
    key = np.unique(np.concatenate([src * nodes + dst, dst * nodes + src]))
    src, dst = key // nodes, key % nodes

    centroids = rng.standard_normal((classes, features)).astype(np.float32)
    if label_noise > 0:  # drawn after the edges: the structure is the same whatever label_noise is
        atypical = rng.random(nodes) < label_noise
        labels = labels.copy()
        labels[atypical] = rng.integers(0, classes, int(atypical.sum()))
    feats = centroids[labels]
    feats += feature_noise * rng.standard_normal((nodes, features), dtype=np.float32)
    feats /= np.float32(np.sqrt(1.0 + feature_noise ** 2))  # unit variance, as normalised real features: the same
    # information, and an optimiser's steps that do not depend on feature_noise

    perm = rng.permutation(nodes)
    n_train, n_val = int(train_fraction * nodes), int(val_fraction * nodes)
    masks = [np.zeros(nodes, dtype=bool) for _ in range(3)]
    masks[0][perm[:n_train]] = True
    masks[1][perm[n_train:n_train + n_val]] = True
    masks[2][perm[n_train + n_val:]] = True
    params = {"nodes": nodes, "avg_degree": avg_degree, "features": features, "classes": classes,
              "homophily": homophily, "feature_noise": feature_noise, "label_noise": label_noise,
              "train_fraction": train_fraction,
              "val_fraction": val_fraction, "seed": seed}
    return Graph(name=name, src=src.astype(np.int64), dst=dst.astype(np.int64), features=feats,
                 labels=labels.astype(np.int64), train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                 num_classes=classes, info={"generator": "dc-sbm", "params": params})
