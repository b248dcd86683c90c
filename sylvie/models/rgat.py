"""R-GAT's layer on a typed block: a GAT layer per relation (our ``GATConv``, DGL's parameters), their outputs
summed over the relations into each destination type, as DGL's ``HeteroGraphConv(..., aggregate="sum")`` of
``GATConv``s computes it (MLPerf's R-GAT on IGBH), plus, with ``self_loop`` (the default), a self-loop weight per
node type as R-GCN's: ``h_v = sum over relations r into v's type of GAT_r(v) + x_v W_loop[type of v]``. A relation
within one node type runs as a homogeneous GAT layer (its destinations among its sources); between two types each
side is projected by the relation's ``fc`` (``fc_dst`` where the two types' widths differ). A destination type that
no relation reaches gets its self-loop term (zeros without one).

Why the self-loop weight. Without it a node's own row reaches its output only through its attention scores (and
through its neighbours' rows at the next layer), so its output is made of its neighbours' rows alone; on a rank,
most of those are halo rows, and under 1-bit exchange all of those are quantized. Measured on the mag preset at
48,494 nodes (4 METIS parts, 2 halo rows per inner row; R-GAT 2 x (4 x 16), Adam 0.01, 60 epochs, seed 0, test
accuracy at the best validation epoch): at dropout 0.5 and weight decay 5e-4, 1-bit synchronous without it 10.8%
(nothing learnt), 1-bit pipelined with it 24.6% (fp32 synchronous with it 33.3%); config/mag.yaml's R-GAT (dropout
0.2, as MLPerf's; no weight decay), fp32 synchronous / 1-bit pipelined: without it 33.9% / 11.0% at dropout 0.5,
with it 45.0% / 45.2%. DGL's and PyG's ``GATConv`` offer the same term as their ``residual`` option; MLPerf's
reference adds self-loop edges to its paper-cites-paper relation instead.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.gat import GATConv
from sylvie.models.initialisation import initialise_gat
from sylvie.models.typed_block import TypedBlock


class RelGATConv(nn.Module):
    def __init__(self, in_widths: tuple[int, ...], out_feats: int, num_heads: int,
                 relation_ends: list[tuple[int, int]], feat_drop: float = 0.0, attn_drop: float = 0.0,
                 self_loop: bool = True):
        super().__init__()
        self.num_heads, self.out_feats, self.ends = num_heads, out_feats, list(relation_ends)
        self.convs = nn.ModuleList(
            initialise_gat(GATConv(in_widths[s] if in_widths[s] == in_widths[d] else (in_widths[s], in_widths[d]),
                                   out_feats, num_heads, feat_drop=feat_drop, attn_drop=attn_drop))
            for s, d in self.ends)
        # as torch's nn.Linear(width, heads * out) starts: uniform within width^-1/2
        self.loop_weight = nn.ParameterList(
            nn.Parameter(torch.empty(w, num_heads * out_feats).uniform_(-w ** -0.5, w ** -0.5))
            for w in in_widths) if self_loop else None

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
            dst_rows = xs[d][:n]  # its destinations: the first of its sources (all of them in a whole graph)
            for r in tb.into(d):
                s = self.ends[r][0]
                block = tb.relations[r]
                feat = xs[s] if block.dst_in_src else (xs[s], dst_rows)
                y = self.convs[r](block, feat)
                h = y if h is None else h + y
            if self.loop_weight is not None:
                loop = torch.matmul(dst_rows, self.loop_weight[d]).view(n, self.num_heads, self.out_feats)
                h = loop if h is None else h + loop
            if h is None:
                h = xs[d].new_zeros((n, self.num_heads, self.out_feats))
            out.append(h)
        return out
