"""GraphSAGE's mean layer with DGL's ``SAGEConv`` parameters (``fc_neigh`` without a bias, ``fc_self`` with one, in
that order), so models saved before keep loading, initialised as torch's ``nn.Linear`` is, and ordered to keep less
for the backward pass.

**Initialisation.** DGL draws both branches xavier-uniform with the ReLU gain (weight variance 4 / (fan_in +
fan_out)), so the two branches, summed, double the variance of a layer's input, and train-mode dropout doubles it
again: on a 50K-node graph (64 features, 16 classes, degree 20) a fresh 3 x 64 model's logits had std 4.8 and its
first loss was 9.1 (ln 16 = 2.77); Adam then shrank the output until every node got the same prediction (loss ~ln 16
from epoch 7 to ~22) and ~40% of the second hidden layer's units died for good: test 71.2% at 60 epochs. torch's
default (weights and bias uniform in +-1 / sqrt(fan_in), variance 1 / (3 fan_in), as PipeGCN's layer): first loss
2.80, 2-3% of units dead, 73.3% at 20 epochs and 76.1% at 60. ``sylvie/models/initialisation.py`` says how the other
layers start; ``tests/test_initialisation.py`` guards them.

**Order.** Applying ``fc_neigh`` before aggregating (what DGL does whenever the layer narrows) keeps the layer's
whole source input for the weight gradient. On a rank of a partitioned graph the sources are the inner rows plus the
halo rows, 3.6x the inner rows on a products-shaped graph at 4 parts, so that kept a hidden state of every halo row
alive per layer until the backward. Given its destination rows as a tensor of their own (``(sources,
destinations)``, as the model passes a layer over inner + halo rows), this layer aggregates the sources first when
they have a gradient, and keeps only destination-sized tensors. Otherwise it narrows first: the input has no
gradient (the layer-0 features, in memory anyway), or the destinations are a view of the sources, which the
backward keeps whole anyway (one rank, a sampled minibatch). Both orders compute the same function (the mean and
``fc_neigh`` commute).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.block import Block
from sylvie.models.ops import aggregate, mean_scale


class MeanSAGEConv(nn.Module):
    def __init__(self, in_feats: int, out_feats: int):
        super().__init__()
        self.fc_neigh = nn.Linear(in_feats, out_feats, bias=False)
        self.fc_self = nn.Linear(in_feats, out_feats)
        # drawn again, as when this layer was DGL's SAGEConv (whose constructor called it): the same seed gives the
        # same initial weights as before
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's ``nn.Linear`` initialisation on both branches (see the module's docstring for why)."""
        self.fc_self.reset_parameters()
        self.fc_neigh.reset_parameters()

    def forward(self, block: Block, feat) -> torch.Tensor:
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
