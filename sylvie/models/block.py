"""The graph one layer runs on: rows per node type, edges per relation (one ``RelationBlock`` each).

Type t has ``num_dst[t]`` destination rows and ``num_src[t]`` source rows, the destinations the first of its sources
(a rank's inner rows then its halo rows; the whole graph: every node of the type). A homogeneous graph is the case
of one node type and one relation, as DGL's ``_N``/``_E``. A sampled block also carries each type's source ids.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from sylvie.graph_types import HOMOGENEOUS, GraphTypes
from sylvie.models.relation_block import RelationBlock


@dataclass(eq=False)
class Block:
    types: GraphTypes
    num_dst: tuple[int, ...]  # destination rows per node type
    num_src: tuple[int, ...]  # source rows per node type (the destinations first)
    relations: tuple[RelationBlock, ...]  # one per relation of ``types``, in its order
    src_ids: tuple[torch.Tensor, ...] | None = None  # a sampled block's: per node type, its sources' graph ids

    def __post_init__(self):
        t = len(self.types.node_types)
        if len(self.num_dst) != t or len(self.num_src) != t or len(self.relations) != len(self.types.relations):
            raise ValueError(f"Block: {len(self.num_dst)}/{len(self.num_src)} row counts and "
                             f"{len(self.relations)} relation blocks for {t} node types and "
                             f"{len(self.types.relations)} relations")
        for r, block in enumerate(self.relations):
            s, d = self.types.ends(r)
            if (block.num_src, block.num_dst) != (self.num_src[s], self.num_dst[d]):
                raise ValueError(f"Block: relation {self.types.relations[r]}'s block has {block.num_src} "
                                 f"sources and {block.num_dst} destinations, expected {self.num_src[s]} and "
                                 f"{self.num_dst[d]}")

    @classmethod
    def homogeneous(cls, block: RelationBlock) -> Block:
        """The block of a graph of one node type and one relation."""
        ids = None if block.src_ids is None else (block.src_ids,)
        return cls(HOMOGENEOUS, (block.num_dst,), (block.num_src,), (block,), ids)

    @property
    def device(self) -> torch.device:
        return self.relations[0].device

    def into(self, d: int) -> list[int]:
        """The relations whose destinations are of node type ``d``."""
        return [r for r in range(len(self.relations)) if self.types.ends(r)[1] == d]

    def to(self, device) -> Block:
        return replace(self, relations=tuple(b.to(device) for b in self.relations))

    @property
    def num_edges(self) -> int:
        return sum(b.num_edges for b in self.relations)
