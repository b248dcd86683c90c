"""Negative destinations for link prediction's positive pairs, every draw a hash of (key, pair, draw): the same on
any number of threads, whatever order the pairs come in, and on any number of ranks where the pairs are numbered
globally (uniform). Three samplers (``link.negative_sampler``):

- uniform: each negative uniform over the destination type's nodes (the whole graph);
- local: uniform over the rank's own nodes of that type, so that their rows never travel (GraphStorm's localjoint);
- joint: k destinations drawn once for a batch, shared by its positives (each scored against all k).
"""
# The hash is splitmix64's finaliser, as the neighbour sampler's (sylvie.sampling.neighbor_picks), in numpy over
# uint64 arrays (they wrap); a draw's integer in [0, m) is its top 53 bits as a double times m. A leaf (no sylvie
# imports), as the sampler's draws are: training and evaluation's runtime draw with it.
from __future__ import annotations

import numpy as np

SAMPLERS = ("uniform", "local", "joint")
NEGATIVES_STREAM = 0x4E454721  # the stream of link negatives among a run's random streams
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _below(x: np.ndarray, m: int) -> np.ndarray:
    return np.minimum((np.float64(1.1102230246251565e-16) * (x >> np.uint64(11)).astype(np.float64)
                       * m).astype(np.int64), m - 1)


def negatives_key(seed: int, epoch: int, batch: int = 0, rank: int = 0) -> int:
    """The 64-bit key of one batch's draws (a full-graph epoch is one batch a rank): the first word numpy's
    SeedSequence draws from (seed, stream, epoch, rank, batch), as the neighbour sampler keys its minibatches."""
    return int(np.random.SeedSequence([seed, NEGATIVES_STREAM, epoch, rank, batch]).generate_state(1, np.uint64)[0])


def draws(key: int, items: np.ndarray, k: int, m: int) -> np.ndarray:
    """``[len(items), k]`` integers in [0, m), row i a function of (key, items[i]) alone."""
    with np.errstate(over="ignore"):
        base = _mix64(np.uint64(key) + np.asarray(items, np.int64).astype(np.uint64) * _GOLDEN)
        j = (np.arange(1, k + 1, dtype=np.uint64) * _GOLDEN)
        return _below(_mix64(base[:, None] + j[None, :]), m)


def uniform_negatives(key: int, pair_ids: np.ndarray, k: int, first: int, count: int) -> np.ndarray:
    """k destinations per pair, uniform over ids ``first .. first + count - 1`` (a node type's canonical ids)."""
    return first + draws(key, pair_ids, k, count)


def local_negatives(key: int, pair_ids: np.ndarray, k: int, own: np.ndarray) -> np.ndarray:
    """k destinations per pair, uniform over ``own`` (the rank's nodes of the destination type)."""
    return np.asarray(own)[draws(key, pair_ids, k, len(own))]


def joint_negatives(key: int, k: int, first: int, count: int) -> np.ndarray:
    """k destinations for a whole batch, uniform over ``first .. first + count - 1``."""
    return first + draws(key, np.zeros(1, np.int64), k, count)[0]
