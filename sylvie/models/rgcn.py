"""R-GCN's layer (Schlichtkrull et al.) on a typed block: per relation a weight (or, with ``num_bases``, a combination
of shared bases), a self-loop weight per node type (one per type, as the types' widths may differ; ``self_loop=False``
leaves it out, as DGL's does) and one bias. Each relation's mean runs on ``ops.aggregate``, the weight applied on the
narrower side, as ``GraphConv`` does.
"""
# For a destination v of node type d:
#
#     h_v = sum over relations r into d of  mean over r's in-edges u -> v of  x_u W_r   +  x_v W_loop[d]  +  b
#
# ``W_r`` is ``weight[r]`` (of the relation's source type's input width), or with ``num_bases``
# ``sum_b coeff[r, b] V_b`` (the source types then share one width). On a graph of one type the self-loop
# weight is DGL's ``RelGraphConv``'s ``loop_weight``. A destination type that no relation reaches gets its self-loop
# and the bias. The weight is applied after the mean where the layer widens or keeps its width, before it where it
# narrows (the mean and the weight commute).
from __future__ import annotations

import torch
import torch.nn as nn

from sylvie.models.block import Block
from sylvie.models.ops import aggregate, mean_scale


class RelGraphConv(nn.Module):
    def __init__(self, in_widths: tuple[int, ...], out_feats: int, relation_ends: list[tuple[int, int]],
                 num_bases: int | None = None, bias: bool = True, self_loop: bool = True):
        """``in_widths``: the input width of each node type; ``relation_ends``: (source type, destination type)
        of each relation; ``num_bases``: basis decomposition with this many bases (None: a weight per relation);
        ``self_loop``: the self-loop weight (DGL's ``RelGraphConv(self_loop=...)``)."""
        super().__init__()
        self.in_widths, self.out_feats, self.ends = tuple(in_widths), out_feats, list(relation_ends)
        self.num_bases = num_bases
        if num_bases is not None:
            widths = {self.in_widths[s] for s, _ in self.ends}
            if len(widths) != 1:
                raise ValueError(f"R-GCN bases need one input width for every relation's source type, got "
                                 f"{sorted(widths)}; give every node type the same width or use num_bases null")
            if num_bases < 1:
                raise ValueError(f"R-GCN num_bases must be >= 1, got {num_bases}")
            self.bases = nn.Parameter(torch.empty(num_bases, widths.pop(), out_feats))
            self.coeff = nn.Parameter(torch.empty(len(self.ends), num_bases))
            self.weight = None
        else:
            self.weight = nn.ParameterList(nn.Parameter(torch.empty(self.in_widths[s], out_feats))
                                           for s, _ in self.ends)
        self.loop_weight = nn.ParameterList(nn.Parameter(torch.empty(w, out_feats))
                                            for w in self.in_widths) if self_loop else None
        self.bias = nn.Parameter(torch.empty(out_feats)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """DGL's ``RelGraphConv`` initialisation: xavier-uniform with the ReLU gain, zero bias."""
        gain = nn.init.calculate_gain("relu")
        weights = [self.bases, self.coeff] if self.weight is None else list(self.weight)
        for w in weights + list(self.loop_weight or ()):
            nn.init.xavier_uniform_(w, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def relation_weights(self) -> list[torch.Tensor]:
        if self.weight is not None:
            return list(self.weight)
        w = (self.coeff @ self.bases.flatten(1)).view(len(self.ends), *self.bases.shape[1:])
        return list(w.unbind(0))

    def forward(self, tb: Block, xs: list[torch.Tensor | None], only: set[int] | None = None) \
            -> list[torch.Tensor | None]:
        """Per node type its destination rows' output ``(num_dst[t], out)`` from ``xs``, its source rows (the
        destinations first); ``only``: the node types to compute (the others' outputs None)."""
        weights = self.relation_weights()
        out = []
        for d, n in enumerate(tb.num_dst):
            if only is not None and d not in only:
                out.append(None)
                continue
            x = xs[d]
            h = None
            if self.loop_weight is not None:
                h = torch.matmul(x[:n], self.loop_weight[d])  # its destinations: the first of its sources
            for r in tb.into(d):
                s = self.ends[r][0]
                block, w = tb.relations[r], weights[r]
                scale = mean_scale(block, xs[s].dtype)
                if w.shape[0] > w.shape[1]:
                    y = aggregate(block, torch.matmul(xs[s], w), None, scale, "mean")
                else:
                    y = torch.matmul(aggregate(block, xs[s], None, scale, "mean"), w)
                h = y if h is None else h + y
            if h is None:
                h = x.new_zeros((n, self.out_feats))
            out.append(h + self.bias if self.bias is not None else h)
        return out

    def extra_repr(self) -> str:
        return (f"in={self.in_widths}, out={self.out_feats}, relations={len(self.ends)}"
                + (f", bases={self.num_bases}" if self.num_bases else ""))
