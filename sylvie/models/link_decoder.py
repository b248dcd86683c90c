"""The decoders of link prediction: a pair's score (a logit) from its two ends' embeddings. Shapes broadcast, so one
call scores a batch of positives ``[n, d] x [n, d]``, each source against its own negatives ``[n, 1, d] x [n, k, d]``,
or against negatives shared by the batch ``[n, 1, d] x [1, k, d]``.
"""
from __future__ import annotations

import torch
import torch.nn as nn

DECODERS = ("dot", "mlp", "distmult")


class DotDecoder(nn.Module):
    """<h_u, h_v>: no weights of its own (the encoder learns the space)."""

    def forward(self, src: torch.Tensor, dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        return (src * dst).sum(-1)


class MLPDecoder(nn.Module):
    """An MLP on the elementwise product h_u * h_v, ``hidden`` ReLU units then one logit (OGB's link predictor)."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.hidden = nn.Linear(width, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, src: torch.Tensor, dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(src * dst))).squeeze(-1)


class DistMultDecoder(nn.Module):
    """sum(h_u * w_r * h_v) with a learnt vector w_r per relation r (Yang et al., 2015), started at ones: where every
    pair is of one relation it starts as the dot product."""

    def __init__(self, width: int, relations: int):
        super().__init__()
        self.relation_weight = nn.Parameter(torch.ones(relations, width))

    def forward(self, src: torch.Tensor, dst: torch.Tensor, relation: torch.Tensor | None = None) -> torch.Tensor:
        """``relation``: each pair's relation index, of the shape of the scores (broadcast), None: relation 0."""
        w = self.relation_weight[0] if relation is None else self.relation_weight[relation]
        return (src * w * dst).sum(-1)


def build_decoder(kind: str, width: int, hidden: int, relations: int = 1) -> nn.Module:
    """The decoder ``kind`` (``link.decoder``) over embeddings of ``width`` columns."""
    if kind == "dot":
        return DotDecoder()
    if kind == "mlp":
        return MLPDecoder(width, hidden)
    if kind == "distmult":
        return DistMultDecoder(width, relations)
    raise ValueError(f"unknown link decoder {kind!r}; choose one of {', '.join(DECODERS)}")
