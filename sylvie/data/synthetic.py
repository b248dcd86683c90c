"""A deterministic degree-corrected stochastic block model with class-informative features.

Each node belongs to one of ``classes`` blocks (its label). Node degree propensities are heavy-tailed
(Pareto), so degrees are skewed as in real graphs. Every edge picks its source by propensity; with
probability ``homophily`` its destination comes from the same block (else from a uniformly chosen block),
again by propensity. Edges are made undirected, with self-loops and duplicates removed. Features are a
per-class centroid plus Gaussian noise, so they carry (noisy) class information.
"""
from __future__ import annotations

import numpy as np

from sylvie.data.graph import Graph
from sylvie.errors import SylvieError

# The knobs of the generator; their defaults are the dataset section's in the config schema.
PARAMETERS = ("nodes", "avg_degree", "features", "classes", "homophily", "feature_noise", "train_fraction",
              "val_fraction", "seed")


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
             train_fraction: float, val_fraction: float, seed: int, name: str = "synthetic") -> Graph:
    if nodes < 2 or classes < 1 or classes > nodes or features < 1 or avg_degree <= 0:
        raise SylvieError(f"synthetic: need nodes >= 2, 1 <= classes <= nodes, features >= 1, avg_degree > 0 "
                          f"(got nodes={nodes}, classes={classes}, features={features}, avg_degree={avg_degree})")
    if not (0 <= homophily <= 1) or train_fraction + val_fraction > 1:
        raise SylvieError("synthetic: homophily must be in [0, 1] and train_fraction + val_fraction <= 1")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, nodes)
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
    feats = centroids[labels]
    feats += feature_noise * rng.standard_normal((nodes, features), dtype=np.float32)

    perm = rng.permutation(nodes)
    n_train, n_val = int(train_fraction * nodes), int(val_fraction * nodes)
    masks = [np.zeros(nodes, dtype=bool) for _ in range(3)]
    masks[0][perm[:n_train]] = True
    masks[1][perm[n_train:n_train + n_val]] = True
    masks[2][perm[n_train + n_val:]] = True
    params = {"nodes": nodes, "avg_degree": avg_degree, "features": features, "classes": classes,
              "homophily": homophily, "feature_noise": feature_noise, "train_fraction": train_fraction,
              "val_fraction": val_fraction, "seed": seed}
    return Graph(name=name, src=src.astype(np.int64), dst=dst.astype(np.int64), features=feats,
                 labels=labels.astype(np.int64), train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                 num_classes=classes, info={"generator": "dc-sbm", "params": params})
