"""Which remote vertices a rank caches (SALIENT++ and the policies it was compared with), and the order of its own
rows.

A rank may cache ``floor(alpha * N / K)`` remote rows, ranked by ``vip``, ``simulation`` (pre-sampled access
counts), ``degree``, ``halo`` (1-hop in-neighbours of its training vertices), ``random`` or ``none``. Ties go to the
lower id, so every policy is deterministic. A typed graph's budget is bytes, filled by score per byte.
"""
from __future__ import annotations

import numpy as np

from sylvie.sampling.vip import edge_destinations

POLICIES = ("vip", "simulation", "degree", "halo", "random", "none")


def cache_budget(alpha: float, num_nodes: int, num_parts: int) -> int:
    if alpha < 0:
        raise ValueError(f"cache.alpha must be >= 0, got {alpha}")
    return int(alpha * num_nodes / num_parts)


def cache_budget_bytes(alpha: float, rows_bytes: float, num_parts: int) -> int:
    """A typed graph's budget: ``alpha`` times the bytes of every node's row (``rows_bytes``) over the parts."""
    if alpha < 0:
        raise ValueError(f"cache.alpha must be >= 0, got {alpha}")
    return int(alpha * rows_bytes / num_parts)


def _fitting(order: np.ndarray, row_bytes: np.ndarray | None, budget: int) -> np.ndarray:
    """The prefix of ``order`` (candidate ids, best first) within ``budget``: rows, or bytes with ``row_bytes``
    (each row taken while its bytes still fit, so a narrow row may fill what a wide one leaves)."""
    if row_bytes is None:
        return order[:budget]
    size = np.asarray(row_bytes, np.int64)[order]
    taken = np.cumsum(size) <= budget
    if not taken.all():  # past the first row that does not fit, the narrower ones that still do
        first = int(np.argmin(taken))
        room, rest, narrowest = budget - int(size[:first].sum()), [], int(size[first:].min())
        for i in range(first, len(order)):
            if room < narrowest:  # nothing left fits
                break
            if size[i] <= room:
                rest.append(i)
                room -= int(size[i])
        return np.concatenate([order[:first], order[np.asarray(rest, np.int64)]])
    return order


def _top(scores: np.ndarray, candidates: np.ndarray, budget: int, row_bytes: np.ndarray | None = None) \
        -> np.ndarray:
    """The candidates of highest positive score (per byte with ``row_bytes``; ties: lower id) within ``budget``,
    sorted by id."""
    candidates = candidates[scores[candidates] > 0]
    density = scores[candidates] if row_bytes is None else scores[candidates] / row_bytes[candidates]
    order = candidates[np.lexsort((candidates, -density))]
    return np.sort(_fitting(order, row_bytes, budget))


def select_cache(policy: str, part: int, part_offsets: np.ndarray, budget: int, *, vip: np.ndarray | None = None,
                 access_counts: np.ndarray | None = None, in_indptr: np.ndarray | None = None,
                 in_src: np.ndarray | None = None, train_nodes: np.ndarray | None = None,
                 seed: int = 0, row_bytes: np.ndarray | None = None,
                 cacheable: np.ndarray | None = None) -> np.ndarray:
    """The remote vertices part ``part`` caches under ``policy`` (sorted ids, at most ``budget``: rows, or bytes
    where ``row_bytes`` gives each vertex's). Each policy needs its own input: ``vip``; ``access_counts``
    (simulation); ``in_indptr``/``in_src`` (degree, halo) and ``train_nodes`` (halo). ``cacheable``: which
    vertices may be cached at all (a typed graph's learnt embedding rows may not)."""
    if policy not in POLICIES:
        raise ValueError(f"cache.policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    n = int(part_offsets[-1])
    lo, hi = int(part_offsets[part]), int(part_offsets[part + 1])
    remote = np.concatenate([np.arange(0, lo), np.arange(hi, n)])
    if cacheable is not None:
        remote = remote[np.asarray(cacheable, bool)[remote]]
    if policy == "none" or budget <= 0 or remote.size == 0:
        return np.zeros(0, dtype=np.int64)
    if policy == "vip":
        return _top(np.asarray(vip, dtype=np.float64), remote, budget, row_bytes)
    if policy == "simulation":
        return _top(np.asarray(access_counts, dtype=np.float64), remote, budget, row_bytes)
    if policy == "degree":
        return _top(np.bincount(in_src, minlength=n).astype(np.float64), remote, budget, row_bytes)
    if policy == "halo":
        is_train = np.zeros(n, dtype=bool)
        is_train[train_nodes] = True
        dst = edge_destinations(in_indptr)
        edges_into_train = np.bincount(in_src[is_train[dst]], minlength=n).astype(np.float64)
        return _top(edges_into_train, remote, budget, row_bytes)
    rng = np.random.default_rng(seed)  # random
    if row_bytes is not None:
        return np.sort(_fitting(rng.permutation(remote), row_bytes, budget))
    return np.sort(rng.choice(remote, size=min(budget, remote.size), replace=False))


def local_order(vip: np.ndarray, part: int, part_offsets: np.ndarray) -> np.ndarray:
    """Part ``part``'s own vertices, hottest (highest VIP) first, ties by id: the order of its rows in the
    feature store, so the fastest tier holds the rows most likely needed."""
    return hottest_first(vip, np.arange(part_offsets[part], part_offsets[part + 1]))


def hottest_first(vip: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``ids`` by VIP, highest first, ties by id (``local_order`` of any set of own vertices: one node type's)."""
    return ids[np.lexsort((ids, -np.asarray(vip)[ids]))]
