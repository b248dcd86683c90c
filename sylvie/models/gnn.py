"""Layer stacks of GraphSAGE (mean), GCN and GAT on our blocks (``sylvie.models.block.Block``), on PyTorch alone.

``forward(block, x, halo)``: ``x`` holds the layer-0 rows of every source node (inner rows first, then
halo rows); before every later layer the model asks ``halo(inner_rows, layer)`` for the halo rows of
its current hidden state. With one partition (or the whole graph), ``halo`` returns nothing.

``forward(blocks, x)`` with a list of one block per layer (message flow graphs of a sampled minibatch, as our
sampler makes them): layer i runs on ``blocks[i]``, whose destinations are the first sources of ``blocks[i + 1]``.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from sylvie.models.dropout import Dropout
from sylvie.models.gat import GATConv
from sylvie.models.gcn import GraphConv
from sylvie.models.initialisation import initialise_gat
from sylvie.models.sage import MeanSAGEConv

ARCHS = ("gcn", "sage", "gat")
HaloFn = Callable[[torch.Tensor, int], torch.Tensor]


class GNN(nn.Module):
    def __init__(self, arch: str, in_feats: int, hidden: int, num_classes: int, layers: int = 2,
                 dropout: float = 0.5, heads: int = 4):
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"unknown model arch '{arch}'; choose one of {', '.join(ARCHS)}")
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        self.arch, self.heads = arch, heads
        self.convs = nn.ModuleList()
        for i in range(layers):
            last = i == layers - 1
            d_in = in_feats if i == 0 else (hidden * heads if arch == "gat" else hidden)
            d_out = num_classes if last else hidden
            if arch == "gcn":
                conv = GraphConv(d_in, d_out)
            elif arch == "sage":
                conv = MeanSAGEConv(d_in, d_out)
            else:
                # the input layer drops out its features itself (GAT drops every layer's input); later layers'
                # inputs are dropped out by the model (between layers, as for GCN and GraphSAGE), not twice
                conv = initialise_gat(GATConv(d_in, d_out, 1 if last else heads,
                                              feat_drop=dropout if i == 0 else 0.0, attn_drop=dropout))
            self.convs.append(conv)
        self.dropout = Dropout(dropout)

    def forward(self, block, x: torch.Tensor, halo: HaloFn | None = None) -> torch.Tensor:
        blocks = block if isinstance(block, (list, tuple)) else [block] * len(self.convs)
        if len(blocks) != len(self.convs):
            raise ValueError(f"got {len(blocks)} blocks for a model of {len(self.convs)} layers")
        if isinstance(block, (list, tuple)) and halo is not None:
            raise ValueError("a list of blocks (a sampled minibatch) carries all its rows; it takes no halo")
        n_dst = blocks[-1].num_dst
        h = x
        for i, conv in enumerate(self.convs):
            block = blocks[i]
            if i > 0:
                h = self._layer_input(h, i, halo)
            if _rows(h) != block.num_src:
                raise RuntimeError(f"layer {i}: got {_rows(h)} rows for {block.num_src} source nodes"
                                   + ("; a halo exchange is needed for this block" if i else ""))
            h = conv(block, h)
            if self.arch == "gat":
                h = h.mean(1) if i == len(self.convs) - 1 else h.flatten(1)
            if i < len(self.convs) - 1:
                # in place on the layer's new output (ReLU's backward keeps its result, which is then that output)
                h = F.elu(h) if self.arch == "gat" else F.relu(h, inplace=True)
        assert h.shape[0] == n_dst
        return h

    def _layer_input(self, h: torch.Tensor, layer: int, halo: HaloFn | None):
        """The input of a layer after the first: this rank's rows and the halo rows, dropped out. The halo rows
        live only until they are copied into the input (a local of this method)."""
        # Halo rows travel before dropout: each rank drops out its own source rows, and what goes on the wire is
        # a function of the weights alone, so it changes slowly from epoch to epoch (what stale, pipelined halo
        # data relies on) and carries no dropout noise.
        rows = halo(h, layer) if halo is not None else None
        # no rows and no backward of their own (one rank): skip the copy cat would make of every row. A rank
        # without halo rows among several still concatenates: its backward joins the collective.
        if rows is None or not (rows.shape[0] or rows.grad_fn is not None):
            return self.dropout(h)
        if self.arch != "sage":  # the inner and the halo rows dropped out straight into the input, in one pass
            return self.dropout.cat(h, rows)
        # GraphSAGE keeps only the inner rows (its destinations) for the backward, not the input over every
        # source row: they are a tensor of their own, and copied into the input with the halo rows dropped out
        h = self.dropout(h)
        return self.dropout.after(h, rows), h


def _rows(h) -> int:
    """Source rows of a layer's input: a tensor, or (sources, destinations)."""
    return (h[0] if isinstance(h, tuple) else h).shape[0]


def build_model(model, in_feats: int, num_classes: int) -> GNN:
    """A GNN from the config's ``model`` section (``self_loop`` belongs to the graph's block, not the model)."""
    return GNN(model.arch, in_feats, model.hidden, num_classes, model.layers, model.dropout, model.heads)
