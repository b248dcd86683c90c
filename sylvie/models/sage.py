"""GraphSAGE's mean layer (DGL's ``SAGEConv``, same parameters and initialisation), ordered to keep less for the
backward pass.

DGL applies ``fc_neigh`` before aggregating whenever the layer narrows (in > out features), which saves the layer's
whole source input for the weight gradient. On a rank of a partitioned graph the sources are the inner rows plus
the halo rows, 3.6x the inner rows on a products-shaped graph at 4 parts, so that kept a hidden state of every halo
row alive per layer until the backward. Given its destination rows as a tensor of their own (``(sources,
destinations)``, as the model passes a layer over inner + halo rows), this layer aggregates the sources first when
they have a gradient, and keeps only destination-sized tensors. Otherwise it keeps DGL's order: the input has no
gradient (the layer-0 features, in memory anyway), or the destinations are a view of the sources, which the
backward keeps whole anyway (one rank, a sampled minibatch). Both orders compute the same function (the mean and
``fc_neigh`` commute).
"""
from __future__ import annotations

import dgl.ops
import torch
from dgl.nn import SAGEConv


class MeanSAGEConv(SAGEConv):
    def __init__(self, in_feats: int, out_feats: int):
        super().__init__(in_feats, out_feats, "mean")

    def forward(self, graph, feat, edge_weight=None) -> torch.Tensor:
        """``feat``: the source rows, or (source rows, destination rows) when the caller holds the destinations
        as a tensor of their own (then the source tensor is not kept for the backward)."""
        if edge_weight is not None:
            raise ValueError("GraphSAGE (mean) takes no edge weights")
        apart = isinstance(feat, tuple)
        # a graph's destinations are its sources: no slice, whose backward would write a zero gradient for every
        # row and add into it
        src, dst = feat if apart else (feat, feat[:graph.num_dst_nodes()] if graph.is_block else feat)
        if self._in_src_feats > self._out_feats and not (apart and src.requires_grad):
            neigh = dgl.ops.copy_u_mean(graph, self.fc_neigh(src))
        else:
            neigh = self.fc_neigh(dgl.ops.copy_u_mean(graph, src))
        return self.fc_self(dst) + neigh
