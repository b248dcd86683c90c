"""DGL's neighbour sampler over the whole graph's topology, in a partition's id space.

Every rank holds the topology (``Topology``: in-edges by destination, memory-mapped read-only), so it samples its
minibatches' L-hop neighbourhoods alone; only features are partitioned. A minibatch is its seeds (training vertices
of the rank's own part), its input vertices (the sources of the first block; the seeds come first) and one block
(MFG) per layer, as ``dgl.dataloading.NeighborSampler`` makes them: sampling without replacement, ``fanouts`` in
DGL's order (the first for the input layer). Each block carries the degrees GCN normalises by
(``srcdata['out_degree']``, ``dstdata['in_degree']``) of the sampled block itself, as DGL's ``GraphConv`` uses on
MFGs.

The RNG is seeded per minibatch from (seed, epoch, rank, iteration), so a resumed run and a run with another cache
draw the same neighbourhoods, as long as the same thread of the process does all the sampling with one OpenMP
thread (``sample_in_this_thread_only``; the trainer's sampling thread, ``sampling/pipeline.py``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import dgl
import numpy as np
import torch

TRAINING, PRESAMPLING = 0, 1  # random streams: the training's epochs, and the simulation cache policy's


@dataclass
class Minibatch:
    seeds: torch.Tensor  # ids of the vertices whose loss this batch computes
    input_nodes: torch.Tensor  # ids of the first block's sources (their features are the input)
    blocks: list


def graph_for_sampling(in_indptr: np.ndarray, in_src: np.ndarray, self_loop: bool):
    """A DGL graph (CSC: in-edges by destination) over the topology's arrays, plus one self-loop per vertex if
    ``self_loop`` (a copy of the edges then; without, DGL shares the read-only arrays)."""
    n = in_indptr.shape[0] - 1
    indptr, src = np.asarray(in_indptr, np.int64), np.asarray(in_src, np.int64)
    if self_loop:  # each vertex's loop at the end of its own in-edges
        src = np.insert(src, indptr[1:], np.arange(n, dtype=np.int64))
        indptr = indptr + np.arange(n + 1, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return dgl.graph(("csc", (torch.from_numpy(indptr), torch.from_numpy(src), torch.empty(0, dtype=torch.int64))),
                         num_nodes=n)


def sample_in_this_thread_only() -> None:
    """Make DGL sample with the calling thread alone (its OpenMP threads: 1, for this thread only): with several,
    DGL's sampling draws differently from run to run whatever the seed (measured with DGL 1.1.3)."""
    dgl.utils.set_num_threads(1)


def batch_sizes(num_seeds: int, iterations: int) -> np.ndarray:
    """Seeds per minibatch when ``num_seeds`` are split into ``iterations`` batches as evenly as can be."""
    return np.array([len(b) for b in np.array_split(np.arange(num_seeds), iterations)], dtype=np.int64)


def sampling_seed(*parts: int) -> int:
    """A 31-bit seed (what dgl.seed takes) from non-negative integers (seed, stream, epoch, rank, iteration):
    distinct tuples, distinct streams."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint32)[0] >> np.uint32(1))


class NeighborSampler:
    """Minibatches of part ``rank``'s training vertices ``train_ids`` (ids in the partition's id space)."""

    def __init__(self, graph, fanouts: list[int], train_ids: np.ndarray, iterations: int, seed: int, rank: int):
        self.graph, self.fanouts = graph, list(fanouts)
        self.train_ids = np.asarray(train_ids, np.int64)
        self.iterations, self.seed, self.rank = iterations, seed, rank
        self._sampler = dgl.dataloading.NeighborSampler(self.fanouts)

    def epoch_seeds(self, epoch: int, stream: int = TRAINING) -> list[np.ndarray]:
        """This epoch's minibatches of seeds: a seeded shuffle of the training vertices cut into ``iterations``
        batches (some may be empty when another rank has more training vertices)."""
        rng = np.random.default_rng(sampling_seed(self.seed, stream, epoch, self.rank, 0x5EED))
        return np.array_split(rng.permutation(self.train_ids), self.iterations)

    def sample(self, seeds: np.ndarray, epoch: int, iteration: int, stream: int = TRAINING) -> Minibatch:
        dgl.seed(sampling_seed(self.seed, stream, epoch, self.rank, iteration))
        seeds = torch.from_numpy(np.asarray(seeds, np.int64))
        input_nodes, _, blocks = self._sampler.sample_blocks(self.graph, seeds)
        for b in blocks:
            b.srcdata["out_degree"] = b.out_degrees()
            b.dstdata["in_degree"] = b.in_degrees()
        return Minibatch(seeds, input_nodes, blocks)


def simulated_access_counts(sampler: NeighborSampler, epochs: int, num_nodes: int,
                            stream: int = PRESAMPLING) -> np.ndarray:
    """How often each vertex is an input of this part's minibatches over ``epochs`` epochs of ``stream``: by
    default pre-sampled ones (GNNLab's pre-sampling), a stream of their own, not the training's epochs."""
    counts = np.zeros(num_nodes, dtype=np.int64)
    for e in range(epochs):
        for i, seeds in enumerate(sampler.epoch_seeds(e, stream)):
            counts[sampler.sample(seeds, e, i, stream).input_nodes.numpy()] += 1
    return counts
