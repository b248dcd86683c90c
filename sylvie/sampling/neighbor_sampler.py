"""A part's minibatches: seeds, and the L-hop neighbourhood each draws over the whole graph's topology.

Every rank holds the topology (``Topology``: in-edges by destination, memory-mapped read-only), so it samples its
minibatches' neighbourhoods alone; only features are partitioned. A minibatch is its seeds (training vertices of
the rank's own part), its input vertices (the sources of the first block; the seeds come first) and one block
(MFG, our ``Block``) per layer, as ``dgl.dataloading.NeighborSampler`` makes them: sampling without replacement,
``fanouts`` in DGL's order (the first for the input layer), a self-loop per vertex when the model has one (drawn like
any other in-edge). The picks are ``neighbor_picks``'s and the blocks ``sampled_blocks``'s.

Every draw is a pure function of (seed, stream, epoch, rank, minibatch, hop, vertex): a minibatch is the same
whatever thread samples it, with however many numba threads (``NUMBA_NUM_THREADS``, or ``numba.set_num_threads``
in the sampling thread), in whatever order minibatches are drawn; so a resumed run and a run with another cache or
prefetch depth train on the same neighbourhoods.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from sylvie.sampling.neighbor_picks import hop_key, pick_neighbors
from sylvie.sampling.sampled_blocks import new_slot_map, sampled_block

TRAINING, PRESAMPLING = 0, 1  # random streams: the training's epochs, and the simulation cache policy's


@dataclass
class Minibatch:
    seeds: torch.Tensor  # ids of the vertices whose loss this batch computes
    input_nodes: torch.Tensor  # ids of the first block's sources (their features are the input)
    blocks: list


def batch_sizes(num_seeds: int, iterations: int) -> np.ndarray:
    """Seeds per minibatch when ``num_seeds`` are split into ``iterations`` batches as evenly as can be."""
    return np.array([len(b) for b in np.array_split(np.arange(num_seeds), iterations)], dtype=np.int64)


def _state(parts: tuple[int, ...], dtype) -> int:
    """The first word (of ``dtype``) that numpy's SeedSequence draws from non-negative integers: distinct tuples,
    distinct words."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, dtype)[0])


def sampling_seed(*parts: int) -> int:
    """A 31-bit seed from (seed, stream, epoch, rank, iteration)."""
    return _state(parts, np.uint32) >> 1


def minibatch_key(*parts: int) -> int:
    """The 64-bit key of one minibatch's draws, from (seed, stream, epoch, rank, iteration)."""
    return _state(parts, np.uint64)


class NeighborSampler:
    """Minibatches of part ``rank``'s training vertices ``train_ids`` (ids in the partition's id space), over the
    topology ``in_indptr``/``in_src`` (in-edges by destination)."""

    def __init__(self, in_indptr: np.ndarray, in_src: np.ndarray, fanouts: list[int], train_ids: np.ndarray,
                 iterations: int, seed: int, rank: int, self_loop: bool = False):
        if any(int(f) < 1 for f in fanouts):
            raise ValueError(f"sampling.fanouts must be at least 1 each, got {list(fanouts)}")
        self.indptr, self.src = np.asarray(in_indptr, np.int64), in_src
        self.fanouts, self.self_loop = [int(f) for f in fanouts], bool(self_loop)
        self.train_ids = np.asarray(train_ids, np.int64)
        self.iterations, self.seed, self.rank = iterations, seed, rank
        self._scratch = threading.local()  # each sampling thread's relabelling map

    def epoch_seeds(self, epoch: int, stream: int = TRAINING) -> list[np.ndarray]:
        """This epoch's minibatches of seeds: a seeded shuffle of the training vertices cut into ``iterations``
        batches (some may be empty when another rank has more training vertices)."""
        rng = np.random.default_rng(sampling_seed(self.seed, stream, epoch, self.rank, 0x5EED))
        return np.array_split(rng.permutation(self.train_ids), self.iterations)

    def sample(self, seeds: np.ndarray, epoch: int, iteration: int, stream: int = TRAINING) -> Minibatch:
        key = minibatch_key(self.seed, stream, epoch, self.rank, iteration)
        slot = getattr(self._scratch, "slot", None)
        if slot is None:
            slot = self._scratch.slot = new_slot_map(self.indptr.shape[0] - 1)
        seeds = np.ascontiguousarray(seeds, dtype=np.int64)
        frontier, blocks = seeds, []
        for hop, fanout in enumerate(reversed(self.fanouts)):  # from the seeds outwards
            offsets, picked = pick_neighbors(self.indptr, self.src, frontier, fanout, hop_key(key, hop),
                                             self.self_loop)
            blocks.append(sampled_block(frontier, offsets, picked, slot))
            frontier = blocks[-1].src_ids.numpy()
        blocks.reverse()
        return Minibatch(torch.from_numpy(seeds), blocks[0].src_ids, blocks)


def simulated_access_counts(sampler: NeighborSampler, epochs: int, num_nodes: int,
                            stream: int = PRESAMPLING) -> np.ndarray:
    """How often each vertex is an input of this part's minibatches over ``epochs`` epochs of ``stream``: by
    default pre-sampled ones (GNNLab's pre-sampling), a stream of their own, not the training's epochs."""
    counts = np.zeros(num_nodes, dtype=np.int64)
    for e in range(epochs):
        for i, seeds in enumerate(sampler.epoch_seeds(e, stream)):
            counts[sampler.sample(seeds, e, i, stream).input_nodes.numpy()] += 1
    return counts
