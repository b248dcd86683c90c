"""A deterministic graph with the structure of real ones (ogbn-products' shape): nested communities, heavy-tailed
degrees, clustering, labels that follow communities, and a split that can follow a node score.

Nodes are sorted by leaf community, so every community is a contiguous range. An edge stays in its source's class
with probability ``homophily`` and descends the hierarchy by ``locality``; ``label_noise`` relabels single nodes or
whole leaves (``atypical``).
"""
from __future__ import annotations

import math

import numpy as np

from sylvie.data.graph import Graph, both_directions, edges_of_keys, merged_unique, pair_keys
from sylvie.data.synthetic import check_parameters, labels_and_features, sample_in_blocks, split_masks
from sylvie.errors import SylvieError

PARAMETERS = ("community_size", "branching", "locality", "split", "degrees", "degree_sigma", "atypical")
SPLITS = ("random", "score")
DEGREES = ("pareto", "lognormal")
ATYPICAL = ("nodes", "communities")
_SCORE_NOISE = 1.0  # std of the log-normal noise of the score around the log propensity
_ROUNDS = 8  # draws after the first, at most, to reach the degree asked
_MAX_DRAW = 4  # a draw asks for at most this many times the edges asked


def _hierarchy(rng, nodes: int, classes: int, community_size: int, branching: int):
    """(cls, order, starts, ends, node_block, depth): each node's class community; the nodes sorted by leaf; the
    ranges of ``order`` of every community of every level, and node_block[l][v] the community of node v at level l
    (an index into starts/ends). Levels 0..depth are the leaves, their groups and the class communities (level
    depth); above them groups of ``branching`` class communities, ..., and last one community of every node."""
    cls = rng.integers(0, classes, nodes)
    per_class = np.bincount(cls, minlength=classes)
    leaves = np.maximum(1, np.rint(per_class / community_size)).astype(np.int64)
    leaf_first = np.cumsum(leaves) - leaves
    local = np.floor(rng.random(nodes) * leaves[cls]).astype(np.int64)  # the leaf within the class community
    leaf = leaf_first[cls] + local
    order = np.argsort(leaf, kind="stable")
    size = np.bincount(leaf, minlength=int(leaves.sum()))
    leaf_end = np.cumsum(size)
    leaf_start = leaf_end - size
    leaf_class = np.repeat(np.arange(classes), leaves)
    leaf_local = np.arange(leaf_class.shape[0]) - leaf_first[leaf_class]
    depth = _levels_to_one(int(leaves.max()), branching)
    above = _levels_to_one(classes, branching)
    keys = [leaf_class * (int(leaf_local.max()) + 1) + leaf_local // branching ** level for level in range(depth)]
    keys += [leaf_class // branching ** level for level in range(above)] + [np.zeros_like(leaf_class)]
    starts, ends, node_block, offset = [], [], [], 0
    for key in keys:  # each nondecreasing over the leaves: a community is a run of leaves
        first = np.concatenate([[True], key[1:] != key[:-1]])
        last = np.concatenate([first[1:], [True]])
        starts.append(leaf_start[first])
        ends.append(leaf_end[last])
        node_block.append((np.cumsum(first) - 1 + offset)[leaf])
        offset += int(first.sum())
    return cls, order, np.concatenate(starts), np.concatenate(ends), np.stack(node_block), depth


def _levels_to_one(count: int, branching: int) -> int:
    """How many times ``count`` communities are grouped by ``branching`` before one is left."""
    levels = 0
    while count > 1:
        count, levels = -(-count // branching), levels + 1
    return levels


def _levels(rng, pairs: int, homophily: float, locality: float, depth: int, top: int) -> np.ndarray:
    """Per edge the level of the community its destination is drawn from. With probability ``homophily`` the
    source's class community or below: level l < depth with probability locality (1 - locality)^l, the rest at depth;
    else above it: level depth + 1 + l with probability locality (1 - locality)^l, the rest at ``top`` (every
    node)."""
    if locality >= 1:
        level = np.zeros(pairs, dtype=np.int64)
    elif locality <= 0:
        level = np.full(pairs, top, dtype=np.int64)
    else:  # the number of failures before the first success of a Bernoulli(locality): geometric
        level = np.floor(np.log1p(-rng.random(pairs)) / math.log1p(-locality)).astype(np.int64)
    outside = rng.random(pairs) >= homophily
    level[outside] += depth + 1
    np.minimum(level, np.where(outside, top, depth), out=level)
    return level


def _propensities(rng, nodes: int, degrees: str, sigma: float) -> np.ndarray:
    """Every node's degree propensity: Pareto (shape 2.5, from 1: the block model's; no node below two thirds of
    the mean degree) or log-normal of log-std ``sigma`` (both tails: ogbn-products-like graphs have many nodes of
    a few edges and hubs of thousands)."""
    if degrees == "pareto":
        return rng.pareto(2.5, nodes) + 1.0
    return rng.lognormal(0.0, sigma, nodes)


def _reach(rng, draw, pairs: int, nodes: int) -> np.ndarray:
    """The sorted keys (``pair_keys``) of exactly ``pairs`` distinct undirected edges: ``draw(count)`` (the keys of
    ``count`` edges drawn, loops and duplicates dropped) until as many are distinct, then a random surplus dropped.
    Inside small dense communities many draws repeat an edge: a single draw of ``pairs`` left ogbn-products' shape
    at degree 41 of the 50 asked. Each further draw asks for the shortfall over the last draw's share of new edges
    (at most ``_MAX_DRAW`` times the edges asked); a graph whose communities cannot hold the degree fails."""
    key = draw(pairs)
    share = key.shape[0] / pairs  # of the last draw's edges, the share that were new
    for _ in range(_ROUNDS):
        if key.shape[0] >= pairs:
            break
        count = int(min(_MAX_DRAW * pairs, math.ceil(1.05 * (pairs - key.shape[0]) / max(share, 1e-3))))
        before = key.shape[0]
        key = merged_unique(key, draw(count))
        share = (key.shape[0] - before) / count
    if key.shape[0] < pairs:
        raise SylvieError(f"synthetic (structure nested): {key.shape[0]:,} distinct edges after {_ROUNDS + 1} draws, "
                          f"{pairs:,} asked (average degree {2 * pairs / nodes:g}): its communities cannot hold that "
                          f"degree; raise community_size, or lower locality or avg_degree")
    surplus = key.shape[0] - pairs
    if surplus:
        drop = np.zeros(key.shape[0], dtype=bool)
        drop[rng.choice(key.shape[0], surplus, replace=False)] = True
        key = key[~drop]
    return key


def generate_nested(*, nodes: int, avg_degree: float, features: int, classes: int, homophily: float,
                    feature_noise: float, label_noise: float, train_fraction: float, val_fraction: float, seed: int,
                    community_size: int, branching: int, locality: float, split: str,
                    degrees: str = "pareto", degree_sigma: float = 1.0, atypical: str = "nodes",
                    name: str = "synthetic") -> Graph:
    check_parameters(nodes=nodes, avg_degree=avg_degree, features=features, classes=classes, homophily=homophily,
                     label_noise=label_noise, train_fraction=train_fraction, val_fraction=val_fraction)
    if (community_size < 2 or branching < 2 or not (0 <= locality <= 1) or split not in SPLITS
            or degrees not in DEGREES or degree_sigma < 0 or atypical not in ATYPICAL):
        raise SylvieError(f"synthetic (structure nested): need community_size >= 2, branching >= 2, locality in "
                          f"[0, 1], split one of {', '.join(SPLITS)}, degrees one of {', '.join(DEGREES)}, "
                          f"degree_sigma >= 0, atypical one of {', '.join(ATYPICAL)} (got community_size="
                          f"{community_size}, branching={branching}, locality={locality}, split={split!r}, degrees="
                          f"{degrees!r}, degree_sigma={degree_sigma}, atypical={atypical!r})")
    rng = np.random.default_rng(seed)
    cls, order, starts, ends, node_block, depth = _hierarchy(rng, nodes, classes, community_size, branching)
    theta = _propensities(rng, nodes, degrees, degree_sigma)
    cum = np.concatenate([[0.0], np.cumsum(theta[order])])
    top = node_block.shape[0] - 1  # the level of one community of every node

    def draw(count: int) -> np.ndarray:
        src = sample_in_blocks(rng, node_block[top, :1].repeat(count), order, cum, starts, ends)
        level = _levels(rng, count, homophily, locality, depth, top)
        block = node_block[level, src]
        del level
        dst = sample_in_blocks(rng, block, order, cum, starts, ends)
        del block
        return pair_keys(src, dst, nodes)

    key = _reach(rng, draw, int(round(nodes * avg_degree / 2)), nodes)
    src, dst = edges_of_keys(both_directions(key, nodes), nodes)

    if atypical == "nodes":
        labels, feats = labels_and_features(rng, cls, classes, features, label_noise, feature_noise)
    else:
        labels, feats = labels_and_features(rng, cls, classes, features, 0.0, feature_noise)
        leaf = node_block[0]  # level 0 is the leaves, numbered from 0
        leaves = int(leaf.max()) + 1
        relabelled = rng.random(leaves) < label_noise
        label_of_leaf = np.where(relabelled, rng.integers(0, classes, leaves), -1)[leaf]
        np.copyto(labels, label_of_leaf, where=label_of_leaf >= 0)
    score = theta * np.exp(_SCORE_NOISE * rng.standard_normal(nodes)) if split == "score" else None
    masks = split_masks(rng, nodes, train_fraction, val_fraction, score)
    params = {"nodes": nodes, "avg_degree": avg_degree, "features": features, "classes": classes,
              "homophily": homophily, "feature_noise": feature_noise, "label_noise": label_noise,
              "train_fraction": train_fraction, "val_fraction": val_fraction, "seed": seed,
              "community_size": community_size, "branching": branching, "locality": locality, "split": split,
              "degrees": degrees, "degree_sigma": degree_sigma, "atypical": atypical}
    return Graph(name=name, src=src, dst=dst, features=feats, labels=labels, train_mask=masks[0],
                 val_mask=masks[1], test_mask=masks[2], num_classes=classes,
                 info={"generator": "nested-communities", "params": params})
