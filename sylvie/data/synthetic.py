"""A deterministic degree-corrected stochastic block model with class-informative features.

Degrees are heavy-tailed (Pareto); an edge stays in its source's block with probability ``homophily``. A node's
label is its block except for a ``label_noise`` share; features are the label's centroid plus noise. With the
defaults a model must weigh a node's own features against its neighbourhood, so what compression, staleness or
sampling costs shows in accuracy.
"""
from __future__ import annotations

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, undirected_keys
from sylvie.errors import SylvieError
from sylvie.memory_budget import check_fits

_ROWS = 1 << 16  # the rows of features given their centroids at a time
_CHUNK = 1 << 20  # the edges sampled at a time

# The knobs of the generator; their defaults are the dataset section's in the config schema.
PARAMETERS = ("nodes", "avg_degree", "features", "classes", "homophily", "feature_noise", "label_noise",
              "train_fraction", "val_fraction", "seed")


def _guide(cum: np.ndarray) -> tuple[np.ndarray, float]:
    """(guide, scale) for :func:`_last_at_most`: one bucket per node over [0, cum[-1]], the bucket of a value u is
    ``int(u * scale)``, and ``guide[j]`` the last i with ``cum[i]`` at or before bucket j's start."""
    n = cum.shape[0] - 1
    scale = n / cum[-1]
    return np.searchsorted(cum, np.arange(n + 1) / scale, side="right") - 1, scale


def _last_at_most(cum: np.ndarray, guide: np.ndarray, scale: float, u: np.ndarray) -> np.ndarray:
    """``np.searchsorted(cum, u, side="right") - 1`` for an increasing ``cum`` from 0 and ``u`` >= 0, the same
    result in a few cache misses per value instead of a binary search's ~log2(len(cum)) (the cumulative
    propensities outgrow the CPU caches: the search took most of the sampling and grew faster than linearly).

    The bucket width is the mean propensity and every propensity is >= 1, so the guide's start is at most a step
    or two off: it is walked back where rounding put it past ``u``, then forward."""
    n = cum.shape[0] - 1
    bucket = np.empty(u.shape[0], dtype=np.int64)
    np.multiply(u, scale, out=bucket, casting="unsafe")  # truncated, as astype(np.int64)
    pos = guide.take(bucket, mode="clip")
    back = np.flatnonzero(cum.take(pos) > u)
    while back.size:
        pos[back] -= 1
        back = back[cum.take(pos[back]) > u[back]]
    ahead = np.flatnonzero(cum.take(pos + 1, mode="clip") <= u)
    while ahead.size:
        ahead = ahead[pos[ahead] < n]
        pos[ahead] += 1
        ahead = ahead[cum.take(pos[ahead] + 1, mode="clip") <= u[ahead]]
    return pos


def sample_in_blocks(rng, blocks, order, cum, starts, ends):
    """One node per entry of ``blocks``, chosen within that block with probability ~ propensity. The uniforms
    are drawn at once (the random stream is the same whatever the chunk size), the rest is done a chunk at a time:
    temporaries the size of every edge were fresh memory to touch, which took as long as the arithmetic."""
    u = rng.random(blocks.shape[0])
    lo = cum[starts]
    width = cum[ends] - lo
    guide, scale = _guide(cum)
    nodes = np.empty(blocks.shape[0], dtype=np.int64)
    for i in range(0, blocks.shape[0], _CHUNK):
        b, uc = blocks[i:i + _CHUNK], u[i:i + _CHUNK]
        uc *= width[b]  # lo + u * (hi - lo): in place, the same value
        uc += lo[b]
        pos = _last_at_most(cum, guide, scale, uc)
        nodes[i:i + _CHUNK] = order.take(np.clip(pos, starts[b], (ends - 1)[b], out=pos))
    return nodes


def _edges(rng, labels: np.ndarray, classes: int, pairs: int, homophily: float) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst), int64: ``pairs`` edges drawn by propensity (a source, then a destination in its block with
    probability ``homophily``, else in a uniformly chosen block), made undirected without self-loops or duplicates,
    sorted by source, then destination. Each array the size of the edges is let go as soon as it is used: the
    memory and the time it takes to touch fresh memory are most of the cost at this size."""
    nodes = labels.shape[0]
    theta = rng.pareto(2.5, nodes) + 1.0
    order = np.argsort(labels, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(theta[order])])
    counts = np.bincount(labels, minlength=classes)
    ends = np.cumsum(counts)
    starts = ends - counts
    if (counts == 0).any():  # an empty block cannot be sampled from: fold it into block 0's range
        starts, ends = np.where(counts == 0, 0, starts), np.where(counts == 0, ends[0], ends)

    src = sample_in_blocks(rng, rng.choice(classes, pairs, p=counts / nodes), order, cum, starts, ends)
    same = rng.random(pairs) < homophily
    dst_block = np.where(same, labels[src], rng.integers(0, classes, pairs))
    del same
    dst = sample_in_blocks(rng, dst_block, order, cum, starts, ends)
    del dst_block
    key = undirected_keys(src, dst, nodes)
    del src, dst
    return edges_of_keys(key, nodes)


def class_features(rng, centroids: np.ndarray, labels: np.ndarray, feature_noise: float) -> np.ndarray:
    """The centroid of each node's label plus Gaussian noise of std ``feature_noise``, scaled to unit variance (as
    normalised real features: the same information, and an optimiser's steps that do not depend on feature_noise).
    The noise is drawn into the result and the centroids added a block of rows at a time: one array the size of
    the features, not three."""
    feats = rng.standard_normal((labels.shape[0], centroids.shape[1]), dtype=np.float32)
    feats *= feature_noise
    for lo in range(0, feats.shape[0], _ROWS):
        feats[lo:lo + _ROWS] += centroids[labels[lo:lo + _ROWS]]
    feats /= np.float32(np.sqrt(1.0 + feature_noise ** 2))
    return feats


def check_parameters(*, nodes: int, avg_degree: float, features: int, classes: int, homophily: float,
                     label_noise: float, train_fraction: float, val_fraction: float) -> None:
    """The parameters every synthetic generator shares, checked (a SylvieError naming them)."""
    if nodes < 2 or classes < 1 or classes > nodes or features < 1 or avg_degree <= 0:
        raise SylvieError(f"synthetic: need nodes >= 2, 1 <= classes <= nodes, features >= 1, avg_degree > 0 "
                          f"(got nodes={nodes}, classes={classes}, features={features}, avg_degree={avg_degree})")
    if not (0 <= homophily <= 1) or not (0 <= label_noise <= 1) or train_fraction + val_fraction > 1:
        raise SylvieError("synthetic: homophily and label_noise must be in [0, 1] and train_fraction + "
                          "val_fraction <= 1")
    if avg_degree > nodes - 1:
        raise SylvieError(f"synthetic: avg_degree={avg_degree} is more than {nodes:,} nodes allow (a node has at most "
                          f"nodes - 1 = {nodes - 1:,} neighbours); lower avg_degree or raise nodes")
    edges = int(round(nodes * avg_degree))  # both directions
    check_fits(generation_bytes(nodes, avg_degree, features),
               f"synthetic: {nodes:,} nodes x {features:,} features and {edges:,} edges (both directions)",
               "lower nodes, avg_degree or features")


def generation_bytes(nodes: int, avg_degree: float, features: int) -> int:
    """A lower bound of a generator's peak memory: the features (float32) and the edges in both directions (two
    int64 ids each), which it holds together at its end (the measured peak beside it:
    benchmarks/records/2026-11-29_scale_2core-vm.md)."""
    return int(nodes * features * 4 + nodes * avg_degree * 16)


def labels_and_features(rng, blocks: np.ndarray, classes: int, features: int, label_noise: float,
                        feature_noise: float) -> tuple[np.ndarray, np.ndarray]:
    """(labels int64, features): every node's label is its block but for a ``label_noise`` share of atypical nodes,
    whose label is drawn uniformly; features follow the label (:func:`class_features`). Drawn after the edges: the
    structure is the same whatever label_noise is."""
    centroids = rng.standard_normal((classes, features)).astype(np.float32)
    labels = blocks
    if label_noise > 0:
        atypical = rng.random(blocks.shape[0]) < label_noise
        labels = blocks.copy()
        labels[atypical] = rng.integers(0, classes, int(atypical.sum()))
    return labels.astype(np.int64), class_features(rng, centroids, labels, feature_noise)


def split_masks(rng, nodes: int, train_fraction: float, val_fraction: float,
                score: np.ndarray | None = None) -> list[np.ndarray]:
    """(train, val, test) masks: the first ``train_fraction`` of the nodes train, the next ``val_fraction``
    validate, the rest test, in a random order or by descending ``score``."""
    ranked = rng.permutation(nodes) if score is None else np.argsort(-score, kind="stable")
    n_train, n_val = int(train_fraction * nodes), int(val_fraction * nodes)
    masks = [np.zeros(nodes, dtype=bool) for _ in range(3)]
    masks[0][ranked[:n_train]] = True
    masks[1][ranked[n_train:n_train + n_val]] = True
    masks[2][ranked[n_train + n_val:]] = True
    return masks


def generate(*, nodes: int, avg_degree: float, features: int, classes: int, homophily: float, feature_noise: float,
             train_fraction: float, val_fraction: float, seed: int, label_noise: float = 0.0,
             name: str = "synthetic") -> Graph:
    check_parameters(nodes=nodes, avg_degree=avg_degree, features=features, classes=classes, homophily=homophily,
                     label_noise=label_noise, train_fraction=train_fraction, val_fraction=val_fraction)
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, classes, nodes)
    src, dst = _edges(rng, blocks, classes, int(round(nodes * avg_degree / 2)), homophily)
    labels, feats = labels_and_features(rng, blocks, classes, features, label_noise, feature_noise)
    masks = split_masks(rng, nodes, train_fraction, val_fraction)
    params = {"nodes": nodes, "avg_degree": avg_degree, "features": features, "classes": classes,
              "homophily": homophily, "feature_noise": feature_noise, "label_noise": label_noise,
              "train_fraction": train_fraction,
              "val_fraction": val_fraction, "seed": seed}
    return Graph(name=name, src=src, dst=dst, features=feats,
                 labels=labels, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                 num_classes=classes, info={"generator": "dc-sbm", "params": params})
