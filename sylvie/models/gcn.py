"""GCN's layer (Kipf and Welling): ``D_in^-1/2 A D_out^-1/2 X W + b``, with DGL's ``GraphConv`` parameters (``weight``
of shape (in, out), ``bias``) and initialisation (Glorot uniform, zero bias), so models saved before keep loading. The
normalisation's edge weight is a product of a factor of each end, so it runs as node factors inside ``ops.aggregate`` (a
rank's degrees are global): no weight per edge, no scaled copy of the rows.
"""
# The weight multiplies before the aggregation when the layer narrows and after it otherwise, so that the sum runs over
# the narrower rows.
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.ops import aggregate, gcn_scales
from sylvie.models.relation_block import RelationBlock


class GraphConv(nn.Module):
    def __init__(self, in_feats: int, out_feats: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats))
        self.bias = nn.Parameter(torch.empty(out_feats)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: RelationBlock, h) -> torch.Tensor:
        """From the source rows ``h`` (or (sources, destinations): GCN reads only the sources)."""
        h = h[0] if isinstance(h, tuple) else h
        out_norm, in_norm = gcn_scales(block, h.dtype)
        w = self.weight
        if w.shape[0] > w.shape[1]:
            rst = aggregate(block, torch.matmul(h, w), out_norm, in_norm, "gcn")
        else:
            rst = torch.matmul(aggregate(block, h, out_norm, in_norm, "gcn"), w)
        return rst.add_(self.bias) if self.bias is not None else rst  # rst is new and kept by no backward

    def extra_repr(self) -> str:
        return f"in={self.weight.shape[0]}, out={self.weight.shape[1]}"
