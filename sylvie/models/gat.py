"""GAT's layer (Velickovic et al.) with DGL's ``GATConv`` parameters (``attn_l``, ``attn_r`` of shape (1, heads, out),
``bias`` of heads * out, then ``fc``, in that order), so models saved before keep loading. The attention is one
operation (``ops.attend``): on the CPU our numba kernels, which keep nothing per edge between the passes; on a GPU
PyTorch's gathers and scatters. ``feat_drop`` drops out the layer's input (0 where the model drops it out itself).
"""
# Per head: ``h_v = sum over in-edges u -> v of softmax_u(leaky_relu(a_l . W x_u + a_r . W x_v)) W x_u``, plus the bias;
# the attention covers the scores, the softmax over each destination's in-edges, its dropout and the weighted sum.
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.dropout import Dropout
from sylvie.models.ops import attend
from sylvie.models.relation_block import RelationBlock


class GATConv(nn.Module):
    def __init__(self, in_feats: int | tuple[int, int], out_feats: int, num_heads: int, feat_drop: float = 0.0,
                 attn_drop: float = 0.0, negative_slope: float = 0.2):
        """``in_feats``: the input width, or (sources', destinations') for a typed graph's relation between node
        types of two widths (then ``fc`` projects the sources and ``fc_dst`` the destinations, as DGL's
        ``fc_src``/``fc_dst``)."""
        super().__init__()
        self.num_heads, self.out_feats = num_heads, out_feats
        in_src, in_dst = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self.fc = nn.Linear(in_src, out_feats * num_heads, bias=False)
        self.fc_dst = nn.Linear(in_dst, out_feats * num_heads, bias=False) if in_dst != in_src else None
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = Dropout(feat_drop)
        if not 0 <= attn_drop < 1:
            raise ValueError(f"attention dropout must be in [0, 1), got {attn_drop}")
        self.attn_drop = attn_drop
        self.negative_slope = negative_slope
        self.bias = nn.Parameter(torch.empty(num_heads * out_feats))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """DGL's initialisation (xavier-normal with the ReLU gain, zero bias); ``initialise_gat`` then redraws
        ``fc`` as torch's ``nn.Linear`` (``sylvie/models/initialisation.py`` says why)."""
        gain = nn.init.calculate_gain("relu")
        for fc in (self.fc, self.fc_dst):
            if fc is not None:
                nn.init.xavier_normal_(fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        nn.init.zeros_(self.bias)

    def forward(self, block: RelationBlock, feat) -> torch.Tensor:
        """``(num_dst, heads, out)`` from the source rows ``feat``, or from ``(source rows, destination rows)``
        where the destinations are not among the sources (a typed graph's relation between two node types: both
        through ``fc``, as DGL's ``GATConv`` of one input width takes a pair)."""
        if isinstance(feat, tuple):
            feat_src = self.fc(self.feat_drop(feat[0])).view(-1, self.num_heads, self.out_feats)
            fc_dst = self.fc if self.fc_dst is None else self.fc_dst
            feat_dst = fc_dst(self.feat_drop(feat[1])).view(-1, self.num_heads, self.out_feats)
        else:
            feat_src = self.fc(self.feat_drop(feat)).view(-1, self.num_heads, self.out_feats)
            feat_dst = feat_src if block.same_rows else feat_src[:block.num_dst]
        el = (feat_src * self.attn_l).sum(-1)
        er = (feat_dst * self.attn_r).sum(-1)
        rst = attend(block, feat_src, el, er, self.negative_slope, self.attn_drop if self.training else 0.0)
        return rst.add_(self.bias.view(1, self.num_heads, self.out_feats))  # rst is new and kept by no backward

    def extra_repr(self) -> str:
        return (f"in={self.fc.in_features}, out={self.out_feats}, heads={self.num_heads}, "
                f"attn_drop={self.attn_drop}, negative_slope={self.negative_slope}")
