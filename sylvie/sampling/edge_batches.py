"""Link prediction's minibatches: every epoch a rank shuffles its training pairs (those whose source it owns) and cuts
them into the run's number of iterations, as it cuts its training vertices for node classification; a batch draws
its negatives, and its seeds are the unique ends of its pairs and negatives, around which the sampler draws the
blocks, less the batch's own edges (``NeighborSampler.sample``'s ``exclude_pairs``).
"""
# A batch is a pure function of (seed, stream, epoch, rank, batch): the shuffle is seeded as the node batches' are, the
# negatives are the caller's (``RankPairs.negative_ids``: hashes of the pair's number, or of the batch for joint
# negatives), so that a resumed run, another prefetch depth or another cache draws the same batches. A pre-sampling
# stream (the simulation cache policy's) shuffles afresh but takes the negatives of the training's epoch of its number.
# Seeds are ordered by node type, then id; a pair's ends and negatives are given as rows of that order.
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sylvie.sampling.neighbor_sampler import TRAINING, sampling_seed

PAIR_SHUFFLE = 0xED6E  # the pairs' shuffle among a rank's streams (the node batches' is 0x5EED)

# (pair numbers, their destinations' node types, epoch, batch) -> negative destinations: [n, k], or [k] shared
Negatives = Callable[[np.ndarray, np.ndarray, int, int], np.ndarray]


@dataclass(frozen=True)
class EdgeBatch:
    """Batch ``index`` of an epoch: its positive pairs (``number``: their positions in the dataset's pairs; ``src``,
    ``dst``: partition ids; ``relation``: a typed graph's, else None) and their negatives (partition ids, ``[n, k]``,
    or ``[k]`` shared by the batch); ``seeds``: each node type's pair ends (ascending partition ids); ``src_at``,
    ``dst_at``, ``neg_at``: the rows of the sources, destinations and negatives among the seeds, types in order."""
    index: int
    number: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    relation: np.ndarray | None
    negatives: np.ndarray
    seeds: list[np.ndarray]
    src_at: np.ndarray
    dst_at: np.ndarray
    neg_at: np.ndarray

    @property
    def exclude_pairs(self) -> tuple:
        """What the sampler keeps out of the batch's neighbourhoods: its positive pairs' edges (and reverses)."""
        return self.src, self.dst, self.relation


class EdgeBatches:
    """Rank ``rank``'s edge minibatches over its training pairs: ``number`` (their positions in the dataset's
    pairs), ``src`` and ``dst`` (partition ids), ``relation`` (None: a graph of one relation), ``src_type`` and
    ``dst_type`` (each end's node type), ``num_types`` node types; ``iterations`` batches an epoch; ``negatives``
    draws a batch's negatives."""

    def __init__(self, number: np.ndarray, src: np.ndarray, dst: np.ndarray, relation: np.ndarray | None,
                 src_type: np.ndarray, dst_type: np.ndarray, num_types: int, iterations: int, seed: int, rank: int,
                 negatives: Negatives):
        self.number, self.src, self.dst = (np.asarray(a, np.int64) for a in (number, src, dst))
        self.relation = None if relation is None else np.asarray(relation, np.int64)
        self.src_type, self.dst_type = np.asarray(src_type, np.int64), np.asarray(dst_type, np.int64)
        self.num_types, self.iterations, self.seed, self.rank = num_types, iterations, seed, rank
        self.negatives = negatives

    @property
    def num_pairs(self) -> int:
        return int(self.number.shape[0])

    def epoch_positions(self, epoch: int, stream: int = TRAINING) -> list[np.ndarray]:
        """The epoch's batches as positions among this rank's training pairs: a seeded shuffle cut into
        ``iterations`` batches (some may be empty when another rank has more pairs)."""
        rng = np.random.default_rng(sampling_seed(self.seed, stream, epoch, self.rank, PAIR_SHUFFLE))
        return np.array_split(rng.permutation(self.num_pairs), self.iterations)

    def epoch(self, epoch: int, stream: int = TRAINING) -> EdgeEpoch:
        """The epoch's batches, each made when asked for (in the sampling thread)."""
        return EdgeEpoch(self, epoch, self.epoch_positions(epoch, stream))

    def batch(self, epoch: int, index: int, at: np.ndarray) -> EdgeBatch:
        """Batch ``index`` of ``epoch``: the pairs at positions ``at``, their negatives and seeds."""
        number, src, dst = self.number[at], self.src[at], self.dst[at]
        dst_type = self.dst_type[at]
        if len(at):
            neg = np.asarray(self.negatives(number, dst_type, epoch, index), np.int64)
            neg_type = np.broadcast_to(dst_type[:, None], neg.shape) if neg.ndim == 2 else \
                np.full(neg.shape, dst_type[0])
        else:
            neg = neg_type = np.zeros((0, 0), np.int64)
        ends = np.concatenate([src, dst, neg.ravel()])
        types = np.concatenate([self.src_type[at], dst_type, np.ravel(neg_type)])
        seeds, rows = seed_rows(ends, types, self.num_types)
        n = len(at)
        return EdgeBatch(index, number, src, dst, None if self.relation is None else self.relation[at], neg, seeds,
                         rows[:n], rows[n:2 * n], rows[2 * n:].reshape(neg.shape))


class EdgeEpoch(Sequence):
    """One epoch's edge batches (``EdgeBatches.epoch``): ``positions[i]`` are batch i's pairs; ``[i]`` makes it."""

    def __init__(self, batches: EdgeBatches, epoch: int, positions: list[np.ndarray]):
        self.batches, self.epoch, self.positions = batches, epoch, positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int) -> EdgeBatch:
        return self.batches.batch(self.epoch, i, self.positions[i])


def seed_rows(ends: np.ndarray, types: np.ndarray, num_types: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct ``ends`` (partition ids, of node types ``types``) per node type, ascending, and each end's row
    among them (the types' seeds one after another)."""
    distinct, inverse = np.unique(ends, return_inverse=True)
    if num_types == 1:
        return [distinct], inverse.reshape(-1).astype(np.int64)
    distinct_type = np.zeros(len(distinct), np.int64)
    distinct_type[inverse] = types
    order = np.argsort(distinct_type, kind="stable")  # by type, ids ascending within
    row = np.empty(len(distinct), np.int64)
    row[order] = np.arange(len(distinct))
    counts = np.bincount(distinct_type, minlength=num_types)
    return np.split(distinct[order], np.cumsum(counts)[:-1]), row[inverse.reshape(-1)]
