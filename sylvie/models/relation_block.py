"""One relation's edges as a bipartite graph of source rows and destination rows, stored as the destinations'
in-edges (CSC), with the degrees GCN normalises by. Convolutions run on it; a layer's ``Block`` holds one per
relation. Where the relation is within one node type, the destinations are the first ``num_dst`` sources.

The backward scatters into sources along the out-edges (``transpose``: made once on first use and kept, or made
ahead by the sampler in its thread).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from sylvie.models.block_transpose import Transpose, transpose


@dataclass(eq=False)
class RelationBlock:
    """``num_dst`` destination rows, ``num_src`` source rows (the destinations are the first of them); the in-edges
    of destination v come from sources ``indices[indptr[v]:indptr[v + 1]]``.

    ``in_degree`` (per destination) and ``out_degree`` (per source) are the degrees GCN's symmetric normalisation
    uses: a rank's global ones (edges to and from other parts counted, self-loops included where added), or the
    block's own for a sampled block. GraphSAGE's mean and GAT's softmax run over the block's own in-edges."""

    indptr: torch.Tensor  # (num_dst + 1,) int64
    indices: torch.Tensor  # (num_edges,) int32 where every id fits, else int64
    num_src: int
    in_degree: torch.Tensor  # (num_dst,) int64
    out_degree: torch.Tensor  # (num_src,) int64
    src_ids: torch.Tensor | None = None  # (num_src,) graph ids of the sources (sampled blocks)
    dst_ids: torch.Tensor | None = None  # (num_dst,) graph ids of the destinations (sampled blocks)
    dst_in_src: bool = True  # the destinations are the first num_dst sources (False: two node types' relation)
    _transpose: Transpose | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)  # per-block values derived once (ops.py)

    def __post_init__(self):
        if self.indptr.dim() != 1 or self.indptr.shape[0] < 1 or self.indptr.dtype != torch.int64:
            raise ValueError(f"RelationBlock: indptr must be a 1-d int64 tensor of num_dst + 1 offsets, got "
                             f"{tuple(self.indptr.shape)} {self.indptr.dtype}")
        if self.indices.dtype not in (torch.int32, torch.int64) or self.indices.dim() != 1:
            raise ValueError(f"RelationBlock: indices must be a 1-d int32 or int64 tensor, got "
                             f"{self.indices.dtype}")
        if self.dst_in_src and self.num_dst > self.num_src:
            raise ValueError(f"RelationBlock: {self.num_dst} destinations but only {self.num_src} sources; the "
                             f"destinations are the first sources")
        if self.in_degree.shape != (self.num_dst,) or self.out_degree.shape != (self.num_src,):
            raise ValueError(f"RelationBlock: in_degree {tuple(self.in_degree.shape)} / out_degree "
                             f"{tuple(self.out_degree.shape)} for {self.num_dst} destinations / {self.num_src} sources")

    @property
    def num_dst(self) -> int:
        return self.indptr.shape[0] - 1

    @property
    def num_edges(self) -> int:
        return self.indices.shape[0]

    @property
    def device(self) -> torch.device:
        return self.indices.device

    @property
    def idtype(self) -> torch.dtype:
        return self.indices.dtype

    @property
    def same_rows(self) -> bool:
        """Sources and destinations are the same rows (the whole graph, one partition): a layer takes its input
        whole as its destinations, not a slice of it (whose backward writes a zero gradient for every row)."""
        return self.dst_in_src and self.num_src == self.num_dst

    def local_in_degree(self) -> torch.Tensor:
        """In-edges of each destination in this block (int64): what a mean or a softmax runs over."""
        return self.indptr[1:] - self.indptr[:-1]

    def dst_of_edges(self) -> torch.Tensor:
        """The destination of every in-edge (int64), in the block's edge order."""
        return torch.repeat_interleave(torch.arange(self.num_dst, device=self.device), self.local_in_degree(),
                                       output_size=self.num_edges)

    def transpose(self, edges: bool = False) -> Transpose:
        """The out-edges (made on first use, then kept with the block); ``edges``: with each one's position among
        the in-edges (``Transpose.edge``; made again with them where the kept one has none)."""
        if self._transpose is None or (edges and self._transpose.edge is None):
            self._transpose = transpose(self.indptr, self.indices, self.num_src, edges)
        return self._transpose

    def to(self, device) -> RelationBlock:
        device = torch.device(device)
        if device == self.device:
            return self

        def move(t):
            return None if t is None else t.to(device)

        return replace(self, indptr=move(self.indptr), indices=move(self.indices),
                       in_degree=move(self.in_degree), out_degree=move(self.out_degree),
                       src_ids=move(self.src_ids), dst_ids=move(self.dst_ids),
                       _transpose=None if self._transpose is None else self._transpose.to(device), _cache={})
