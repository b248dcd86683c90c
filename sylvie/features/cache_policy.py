"""Which remote vertices a rank caches (SALIENT++ and the policies it was compared with), and in which order its
local rows are stored.

A rank of part k may cache ``floor(alpha * N / K)`` rows of vertices it does not own (N vertices, K parts). The
policies rank the remote vertices by:

- ``vip``: their VIP for part k (SALIENT++);
- ``simulation``: how often they were an input of part k's minibatches in pre-sampled epochs (GNNLab's PreSC),
  with the same sampler the trainer uses;
- ``degree``: their out-degree in the sampler's graph, highest first (PaGraph; SALIENT++'s own code sorted it
  ascending, caching the least useful vertices);
- ``halo``: being a 1-hop in-neighbour of a local training vertex, most such edges first (DistDGL); never more than
  the 1-hop halo, however large the budget;
- ``random``: a seeded uniform choice; ``none``: nothing.

Ties go to the lower id, so every policy is deterministic. Ids are in the partition's id space (``Topology``).
"""
from __future__ import annotations

import numpy as np

from sylvie.sampling.vip import edge_destinations

POLICIES = ("vip", "simulation", "degree", "halo", "random", "none")


def cache_budget(alpha: float, num_nodes: int, num_parts: int) -> int:
    if alpha < 0:
        raise ValueError(f"cache.alpha must be >= 0, got {alpha}")
    return int(alpha * num_nodes / num_parts)


def _top(scores: np.ndarray, candidates: np.ndarray, budget: int) -> np.ndarray:
    """The ``budget`` candidates of highest positive score (ties: lower id), sorted by id."""
    candidates = candidates[scores[candidates] > 0]
    order = np.lexsort((candidates, -scores[candidates]))
    return np.sort(candidates[order[:budget]])


def select_cache(policy: str, part: int, part_offsets: np.ndarray, budget: int, *, vip: np.ndarray | None = None,
                 access_counts: np.ndarray | None = None, in_indptr: np.ndarray | None = None,
                 in_src: np.ndarray | None = None, train_nodes: np.ndarray | None = None,
                 seed: int = 0) -> np.ndarray:
    """The remote vertices part ``part`` caches under ``policy`` (sorted ids, at most ``budget``). Each policy
    needs its own input: ``vip``; ``access_counts`` (simulation); ``in_indptr``/``in_src`` (degree, halo) and
    ``train_nodes`` (halo)."""
    if policy not in POLICIES:
        raise ValueError(f"cache.policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    n = int(part_offsets[-1])
    lo, hi = int(part_offsets[part]), int(part_offsets[part + 1])
    remote = np.concatenate([np.arange(0, lo), np.arange(hi, n)])
    if policy == "none" or budget <= 0 or remote.size == 0:
        return np.zeros(0, dtype=np.int64)
    if policy == "vip":
        return _top(np.asarray(vip, dtype=np.float64), remote, budget)
    if policy == "simulation":
        return _top(np.asarray(access_counts, dtype=np.float64), remote, budget)
    if policy == "degree":
        return _top(np.bincount(in_src, minlength=n).astype(np.float64), remote, budget)
    if policy == "halo":
        is_train = np.zeros(n, dtype=bool)
        is_train[train_nodes] = True
        dst = edge_destinations(in_indptr)
        edges_into_train = np.bincount(in_src[is_train[dst]], minlength=n).astype(np.float64)
        return _top(edges_into_train, remote, budget)
    rng = np.random.default_rng(seed)  # random
    return np.sort(rng.choice(remote, size=min(budget, remote.size), replace=False))


def local_order(vip: np.ndarray, part: int, part_offsets: np.ndarray) -> np.ndarray:
    """Part ``part``'s own vertices, hottest (highest VIP) first, ties by id: the order of its rows in the
    feature store, so the fastest tier holds the rows most likely needed."""
    own = np.arange(part_offsets[part], part_offsets[part + 1])
    return own[np.lexsort((own, -np.asarray(vip)[own]))]
