"""A part's minibatches: seeds, and the L-hop neighbourhood each draws over the whole graph's topology, as
``dgl.dataloading.NeighborSampler`` makes them. Every rank holds the topology (memory-mapped), so it samples alone;
only features are partitioned. A typed graph is sampled per relation, as DGL samples a heterograph. Every draw is a
pure function of (seed, stream, epoch, rank, minibatch, hop, vertex), so a resumed run trains on the same
neighbourhoods.
"""
# A minibatch is its seeds (training vertices of the rank's own part), its input vertices (the first block's sources,
# seeds first) and one block (MFG, our ``Block``) per layer: sampling without replacement, ``fanouts`` in DGL's order
# (the first for the input layer), a self-loop per vertex when the model has one (drawn like any other in-edge). The
# picks are ``neighbor_picks``'s and the blocks ``sampled_blocks``'s.
#
# A typed graph (``relation_offsets``: the in-edges by destination and relation): at every hop each frontier vertex of
# relation r's destination type draws ``fanouts[hop][r]`` of its in-edges of relation r, each relation from a random
# stream of its own (``relation_key``); the seeds are of the target type, and ``input_nodes`` holds the first block's
# sources type by type. A homogeneous graph is the case of one relation, with the same bits either way.
#
# Link prediction's minibatches (``edge_batches``) give seeds of every node type a pair ends in, and pairs whose edges
# and reverse edges no hop draws (``excluded_edges``: they leave the candidates before the draw).
#
# A minibatch is the same whatever thread samples it, with however many numba threads (``NUMBA_NUM_THREADS``, or
# ``numba.set_num_threads`` in the sampling thread), in whatever order minibatches are drawn, so runs with another cache
# or prefetch depth train on the same neighbourhoods too.
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from sylvie.graph_types import HOMOGENEOUS, GraphTypes
from sylvie.sampling.excluded_edges import pair_edges
from sylvie.sampling.neighbor_picks import hop_key, pick_neighbors, relation_key, relation_offsets
from sylvie.sampling.sampled_blocks import new_slot_map, sampled_block

TRAINING, PRESAMPLING = 0, 1  # random streams: the training's epochs, and the simulation cache policy's


@dataclass
class Minibatch:
    seeds: torch.Tensor  # ids of the vertices whose loss this batch computes
    input_nodes: torch.Tensor  # ids of the first block's sources (their features are the input); typed: type by type
    blocks: list  # one Block per layer, the input layer's first

    def input_counts(self) -> tuple[int, ...]:
        return input_counts(self.blocks)


def input_counts(blocks: list) -> tuple[int, ...]:
    """Input rows of each node type: the first block's sources."""
    return tuple(blocks[0].num_src)


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
    topology ``in_indptr``/``in_src`` (in-edges by destination). A typed graph: ``types``, each in-edge's relation
    ``in_relation`` (the topology ordered by destination, then relation) and per hop a fanout per relation
    (``fanouts``: ``sylvie.sampling.fanouts.resolve_fanouts``'s); ``self_loop``: each destination is a candidate
    source of itself in every relation within one node type (as after ``dgl.add_self_loop``)."""

    def __init__(self, in_indptr: np.ndarray, in_src: np.ndarray, fanouts: list, train_ids: np.ndarray,
                 iterations: int, seed: int, rank: int, self_loop: bool = False, *, types: GraphTypes = HOMOGENEOUS,
                 in_relation: np.ndarray | None = None):
        per_hop = [tuple(f) if isinstance(f, (tuple, list)) else (f,) * len(types.relations) for f in fanouts]
        if any(len(f) != len(types.relations) or any(int(x) < 1 for x in f) for f in per_hop):
            raise ValueError(f"sampling.fanouts must be at least 1 each, one per relation, got {list(fanouts)}")
        self.types = types
        self.stride = len(types.relations)
        self.indptr = relation_offsets(in_indptr, in_relation, self.stride)
        self.src = in_src
        self.fanouts = [tuple(int(x) for x in f) for f in per_hop]
        self.self_loop = [bool(self_loop) and types.ends(r)[0] == types.ends(r)[1] for r in range(self.stride)]
        self.train_ids = np.asarray(train_ids, np.int64)
        self.iterations, self.seed, self.rank = iterations, seed, rank
        self._scratch = threading.local()  # each sampling thread's relabelling map

    def epoch_seeds(self, epoch: int, stream: int = TRAINING) -> list[np.ndarray]:
        """This epoch's minibatches of seeds: a seeded shuffle of the training vertices cut into ``iterations``
        batches (some may be empty when another rank has more training vertices)."""
        rng = np.random.default_rng(sampling_seed(self.seed, stream, epoch, self.rank, 0x5EED))
        return np.array_split(rng.permutation(self.train_ids), self.iterations)

    def sample(self, seeds, epoch: int, iteration: int, stream: int = TRAINING,
               exclude_pairs: tuple | None = None) -> Minibatch:
        """Minibatch ``iteration`` of ``epoch`` around ``seeds``: vertices of the target type, or a list of each node
        type's (an edge minibatch's pair ends). ``exclude_pairs``: (sources, destinations, relations or None) of pairs
        whose edges and reverse edges no hop draws (``excluded_edges``)."""
        key = minibatch_key(self.seed, stream, epoch, self.rank, iteration)
        slot = getattr(self._scratch, "slot", None)
        if slot is None:
            slot = self._scratch.slot = new_slot_map(self.indptr.shape[0] - 1)
        types = self.types
        if isinstance(seeds, (list, tuple)):
            frontiers = [np.ascontiguousarray(s, dtype=np.int64) for s in seeds]
        else:
            frontiers = [np.zeros(0, np.int64)] * len(types.node_types)
            frontiers[types.target_index] = np.ascontiguousarray(seeds, dtype=np.int64)
        seeds = np.concatenate(frontiers) if len(frontiers) > 1 else frontiers[0]
        excluded = None if exclude_pairs is None else self.pair_edges(*exclude_pairs)
        blocks = []
        for hop, fanout in enumerate(reversed(self.fanouts)):  # from the seeds outwards
            hk = hop_key(key, hop)
            picks = [pick_neighbors(self.indptr, self.src, frontiers[types.ends(r)[1]], fanout[r], relation_key(hk, r),
                                    self.self_loop[r], self.stride, r, excluded) for r in range(self.stride)]
            blocks.append(sampled_block(types, frontiers, picks, slot))
            frontiers = [ids.numpy() for ids in blocks[-1].src_ids]
        blocks.reverse()
        inputs = torch.from_numpy(np.concatenate(frontiers)) if len(frontiers) > 1 else torch.from_numpy(frontiers[0])
        return Minibatch(torch.from_numpy(seeds), inputs, blocks)

    def pair_edges(self, src: np.ndarray, dst: np.ndarray, relation: np.ndarray | None = None) -> np.ndarray:
        """The in-edge positions of the pairs ``src -> dst`` (of ``relation``, None: 0) and of their reverses."""
        return pair_edges(self.indptr, self.src, src, dst, relation, self.types.reverse_index(), self.stride)


def simulated_access_counts(sampler: NeighborSampler, epochs: int, num_nodes: int, stream: int = PRESAMPLING,
                            edges=None) -> np.ndarray:
    """How often each vertex is an input of this part's minibatches over ``epochs`` epochs of ``stream``: by
    default pre-sampled ones (GNNLab's pre-sampling), a stream of their own, not the training's epochs. ``edges``:
    link prediction's batches (``EdgeBatches``) instead of the sampler's training vertices."""
    counts = np.zeros(num_nodes, dtype=np.int64)
    for e in range(epochs):
        if edges is None:
            batches = [(seeds, None) for seeds in sampler.epoch_seeds(e, stream)]
        else:
            batches = ((b.seeds, b.exclude_pairs) for b in edges.epoch(e, stream))
        for i, (seeds, exclude) in enumerate(batches):
            counts[sampler.sample(seeds, e, i, stream, exclude).input_nodes.numpy()] += 1
    return counts
