"""The block of a typed graph: its edges grouped by relation, one ``Block`` per relation.

Rows are kept per node type. Type t has ``num_dst[t]`` destination rows and ``num_src[t]`` source rows, the
destinations the first of its sources (a rank's part: its inner rows of type t, then its halo rows of type t; the
whole graph: every node of type t, both). Relation r = (s, name, d) is a ``Block`` whose sources are type s's source
rows and whose destinations are type d's destination rows: for s == d the destinations are the first sources, as
in a homogeneous block; for s != d the block is bipartite (``Block.dst_in_src`` False).

A homogeneous graph's typed block is its block as the one relation of the one type. A sampled typed block (a
minibatch's, ``sylvie.sampling.sampled_blocks``) also carries each type's source ids (``src_ids``, graph ids, its
destinations first): the next hop's frontier, and for the first block the rows whose features are the input.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from sylvie.graph_types import GraphTypes
from sylvie.models.block import Block


@dataclass(eq=False)
class TypedBlock:
    types: GraphTypes
    num_dst: tuple[int, ...]  # destination rows per node type
    num_src: tuple[int, ...]  # source rows per node type (the destinations first)
    relations: tuple[Block, ...]  # one per relation of ``types``, in its order
    src_ids: tuple[torch.Tensor, ...] | None = None  # a sampled block's: per node type, its sources' graph ids

    def __post_init__(self):
        t = len(self.types.node_types)
        if len(self.num_dst) != t or len(self.num_src) != t or len(self.relations) != len(self.types.relations):
            raise ValueError(f"TypedBlock: {len(self.num_dst)}/{len(self.num_src)} row counts and "
                             f"{len(self.relations)} relation blocks for {t} node types and "
                             f"{len(self.types.relations)} relations")
        for r, block in enumerate(self.relations):
            s, d = self.types.ends(r)
            if (block.num_src, block.num_dst) != (self.num_src[s], self.num_dst[d]):
                raise ValueError(f"TypedBlock: relation {self.types.relations[r]}'s block has {block.num_src} "
                                 f"sources and {block.num_dst} destinations, expected {self.num_src[s]} and "
                                 f"{self.num_dst[d]}")

    @property
    def device(self) -> torch.device:
        return self.relations[0].device

    def into(self, d: int) -> list[int]:
        """The relations whose destinations are of node type ``d``."""
        return [r for r in range(len(self.relations)) if self.types.ends(r)[1] == d]

    def to(self, device) -> TypedBlock:
        return replace(self, relations=tuple(b.to(device) for b in self.relations))

    @property
    def num_edges(self) -> int:
        return sum(b.num_edges for b in self.relations)
