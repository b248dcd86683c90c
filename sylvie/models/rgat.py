"""R-GAT's layer on a typed block: a GAT layer per relation (our ``GATConv``, DGL's parameters), their outputs
summed over the relations into each destination type, as DGL's ``HeteroGraphConv(..., aggregate="sum")`` of
``GATConv``s computes it (MLPerf's R-GAT on IGBH). A relation within one node type runs as a homogeneous GAT layer
(its destinations among its sources); between two types each side is projected by the relation's ``fc`` (``fc_dst``
where the two types' widths differ). A destination type that no relation reaches gets zeros.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.gat import GATConv
from sylvie.models.initialisation import initialise_gat
from sylvie.models.typed_block import TypedBlock


class RelGATConv(nn.Module):
    def __init__(self, in_widths: tuple[int, ...], out_feats: int, num_heads: int,
                 relation_ends: list[tuple[int, int]], feat_drop: float = 0.0, attn_drop: float = 0.0):
        super().__init__()
        self.num_heads, self.out_feats, self.ends = num_heads, out_feats, list(relation_ends)
        self.convs = nn.ModuleList(
            initialise_gat(GATConv(in_widths[s] if in_widths[s] == in_widths[d] else (in_widths[s], in_widths[d]),
                                   out_feats, num_heads, feat_drop=feat_drop, attn_drop=attn_drop))
            for s, d in self.ends)

    def forward(self, tb: TypedBlock, xs: list[torch.Tensor | None], only: set[int] | None = None) \
            -> list[torch.Tensor | None]:
        """Per node type ``(num_dst[t], heads, out)`` from ``xs``, each type's source rows (the destinations
        first); ``only``: the node types to compute (the others' outputs None)."""
        out = []
        for d, n in enumerate(tb.num_dst):
            if only is not None and d not in only:
                out.append(None)
                continue
            h = None
            for r in tb.into(d):
                s = self.ends[r][0]
                block = tb.relations[r]
                feat = xs[s] if block.dst_in_src else (xs[s], xs[d] if xs[d].shape[0] == n else xs[d][:n])
                y = self.convs[r](block, feat)
                h = y if h is None else h + y
            if h is None:
                ref = xs[d]
                h = ref.new_zeros((n, self.num_heads, self.out_feats))
            out.append(h)
        return out
