"""A hop's picks as the block (MFG) the models take, sources relabelled to block-local ids as DGL's ``to_block`` does:
each node type's sources are its destinations (the hop's frontier, in order), then the vertices of that type the hop
picked, in order of first appearance. Each relation's block carries its graph ids, its own degrees (GCN normalises a
sampled block by them) and its out-edges, built in the sampling thread rather than in the model's backward.
"""
# Picks are read relation by relation, destination by destination. The relabelling is a serial numba pass (the GIL
# released) over a scratch map of one int32 per vertex, reset after each use, so it costs the picks, not the graph.
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from sylvie.graph_types import GraphTypes
from sylvie.models.block import Block
from sylvie.models.relation_block import RelationBlock


@njit(cache=True, nogil=True)
def _relabel(frontier, picked, slot, src_nodes, local_src):
    """Fill ``src_nodes`` (frontier first) and ``local_src`` (each pick's block-local source); return the number
    of sources. ``slot`` is -1 everywhere on entry and on return."""
    n = frontier.shape[0]
    for i in range(n):
        slot[frontier[i]] = i
        src_nodes[i] = frontier[i]
    for e in range(picked.shape[0]):
        u = picked[e]
        s = slot[u]
        if s < 0:
            s = n
            slot[u] = n
            src_nodes[n] = u
            n += 1
        local_src[e] = s
    for i in range(n):
        slot[src_nodes[i]] = -1
    return n


def new_slot_map(num_nodes: int) -> np.ndarray:
    """The scratch map ``sampled_block`` relabels with (one per thread that samples)."""
    return np.full(num_nodes, -1, dtype=np.int32)


def sampled_block(types: GraphTypes, frontiers: list[np.ndarray], picks: list[tuple[np.ndarray, np.ndarray]],
                  slot: np.ndarray) -> Block:
    """The block whose destinations of type t are ``frontiers[t]`` and whose relation r's in-edges are
    ``picks[r]`` (``pick_neighbors``'s ``offsets``/``picked`` over ``frontiers`` of r's destination type)."""
    num_types, num_rel = len(types.node_types), len(types.relations)
    ends = [types.ends(r) for r in range(num_rel)]
    src_ids, local = [], [np.zeros(0, np.int32)] * num_rel
    for t in range(num_types):
        frontier = np.ascontiguousarray(frontiers[t], dtype=np.int64)
        rels = [r for r in range(num_rel) if ends[r][0] == t]
        picked = np.concatenate([picks[r][1] for r in rels]) if rels else np.zeros(0, np.int64)
        src_nodes = np.empty(frontier.shape[0] + picked.shape[0], dtype=np.int64)
        local_src = np.empty(picked.shape[0], dtype=np.int32)
        src_ids.append(src_nodes[:int(_relabel(frontier, picked, slot, src_nodes, local_src))])
        cuts = np.cumsum([picks[r][1].shape[0] for r in rels])[:-1]
        for r, part in zip(rels, np.split(local_src, cuts), strict=True):
            local[r] = part
    blocks = []
    for r, (s, d) in enumerate(ends):
        offsets, n_src = np.asarray(picks[r][0], np.int64), src_ids[s].shape[0]
        block = RelationBlock(torch.from_numpy(offsets), torch.from_numpy(local[r]), n_src,
                      in_degree=torch.from_numpy(np.diff(offsets)),
                      out_degree=torch.from_numpy(np.bincount(local[r], minlength=n_src)),
                      src_ids=torch.from_numpy(src_ids[s]),
                      dst_ids=torch.from_numpy(np.asarray(frontiers[d], np.int64)), dst_in_src=s == d)
        block.transpose(edges=True)  # every model's backward: GAT's takes the edges too
        blocks.append(block)
    return Block(types, tuple(len(f) for f in frontiers), tuple(len(x) for x in src_ids), tuple(blocks),
                      src_ids=tuple(torch.from_numpy(x) for x in src_ids))
