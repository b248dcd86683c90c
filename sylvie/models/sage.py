"""GraphSAGE's mean layer with DGL's ``SAGEConv`` parameters (``fc_neigh`` without a bias, ``fc_self`` with one, in
that order), so models saved before keep loading; initialised as torch's ``nn.Linear`` is, since DGL's init makes a
fresh model plateau and lose hidden units (``sylvie/models/initialisation.py``); and ordered to keep less for the
backward pass.
"""
# Order: applying ``fc_neigh`` before aggregating (DGL's choice whenever the layer narrows) keeps the layer's whole
# source input for the weight gradient, and a partitioned rank's sources include every halo row. Given its destination
# rows as a tensor of their own (``(sources, destinations)``), this layer aggregates first when the sources have a
# gradient, keeping only destination-sized tensors. Otherwise it narrows first: the input has no gradient (the layer-0
# features), or the destinations are a view of the sources, which the backward keeps whole anyway (one rank, a sampled
# minibatch). The mean and ``fc_neigh`` commute, so both orders compute the same function.
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.ops import aggregate, mean_scale
from sylvie.models.relation_block import RelationBlock


class MeanSAGEConv(nn.Module):
    def __init__(self, in_feats: int | tuple[int, int], out_feats: int):
        """``in_feats``: the input width, or (sources', destinations') for a relation between two node types."""
        super().__init__()
        in_src, in_dst = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self.fc_neigh = nn.Linear(in_src, out_feats, bias=False)
        self.fc_self = nn.Linear(in_dst, out_feats)
        # drawn again, as when this layer was DGL's SAGEConv (whose constructor called it): the same seed gives the
        # same initial weights as before
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's ``nn.Linear`` initialisation on both branches (see the module's docstring for why)."""
        self.fc_self.reset_parameters()
        self.fc_neigh.reset_parameters()

    def forward(self, block: RelationBlock, feat) -> torch.Tensor:
        """``feat``: the source rows, or (source rows, destination rows) when the caller holds the destinations
        as a tensor of their own (then the source tensor is not kept for the backward)."""
        apart = isinstance(feat, tuple)
        # sources that are the destinations (the whole graph): no slice, whose backward would write a zero
        # gradient for every row and add into it
        src, dst = feat if apart else (feat, feat if block.same_rows else feat[:block.num_dst])
        scale = mean_scale(block, src.dtype)
        if self.fc_neigh.in_features > self.fc_neigh.out_features and not (apart and src.requires_grad):
            neigh = aggregate(block, self.fc_neigh(src), None, scale, "mean")
        else:
            neigh = self.fc_neigh(aggregate(block, src, None, scale, "mean"))
        return self.fc_self(dst).add_(neigh)  # in place: the sum is the only new tensor of the layer's output size
