"""One layer on a ``Block``: a convolution per relation, summed into each destination type, plus an optional self-loop
weight per node type (``x_v W_loop[type]``), as PyG's ``HeteroConv`` and DGL's ``HeteroGraphConv(aggregate="sum")``. A
type's input is its source rows (destinations first), or ``(sources, destinations)`` where the model holds the
destinations apart; a relation between two types takes ``(its source type's sources, its destination type's
destinations)``.
"""
# GraphSAGE's layout holds the destinations apart. A relation within one type takes its type's input as it is. On a
# homogeneous graph the layer is the one relation's convolution.
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.block import Block


def sources(x):
    """A type's source rows from its input (a tensor, or (sources, destinations))."""
    return x[0] if isinstance(x, tuple) else x


def destinations(x, n: int) -> torch.Tensor:
    """A type's ``n`` destination rows from its input: the first of its sources, or the ones held apart."""
    # a slice even where they are all the rows: the gradients then add up in the order R-GAT's always did
    return x[1] if isinstance(x, tuple) else x[:n]


class RelationalConv(nn.Module):
    def __init__(self, convs: list[nn.Module], relation_ends: list[tuple[int, int]],
                 loop_widths: tuple[int, ...] | None, out_feats: int, num_heads: int | None = None):
        """``convs``: one per relation; ``loop_widths``: each node type's input width, for a self-loop weight per
        type (None: none); ``num_heads``: the convolutions' heads (their outputs ``(rows, heads, out)``), or None."""
        super().__init__()
        self.convs, self.ends = nn.ModuleList(convs), list(relation_ends)
        self.out_feats, self.num_heads = out_feats, num_heads
        width = out_feats * (num_heads or 1)
        # as torch's nn.Linear(w, width) starts: uniform within w^-1/2
        self.loop_weight = nn.ParameterList(
            nn.Parameter(torch.empty(w, width).uniform_(-w ** -0.5, w ** -0.5)) for w in loop_widths) \
            if loop_widths is not None else None

    def forward(self, block: Block, xs: list, only: set[int] | None = None) -> list[torch.Tensor | None]:
        """Per node type its destination rows' output from ``xs`` (one input per type); ``only``: the node types to
        compute (the others' outputs None)."""
        out = []
        for d, n in enumerate(block.num_dst):
            if only is not None and d not in only:
                out.append(None)
                continue
            h, dst_rows = None, destinations(xs[d], n)  # one view of them for every use
            for r in block.into(d):
                s = self.ends[r][0]
                rel = block.relations[r]
                feat = xs[s] if rel.dst_in_src else (sources(xs[s]), dst_rows)
                y = self.convs[r](rel, feat)
                h = y if h is None else h + y
            if self.loop_weight is not None:
                loop = torch.matmul(dst_rows, self.loop_weight[d])
                loop = loop if self.num_heads is None else loop.view(n, self.num_heads, self.out_feats)
                h = loop if h is None else h + loop
            if h is None:  # a type no relation reaches, without a self-loop weight
                shape = (n, self.out_feats) if self.num_heads is None else (n, self.num_heads, self.out_feats)
                h = sources(xs[d]).new_zeros(shape)
            out.append(h)
        return out
