"""The losses of link prediction over positive scores ``[n]`` and their negatives' ``[n, k]``, as sums (the trainer
divides by the global count ``link_targets`` gives, so that P ranks' summed gradients are the whole graph's)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

LOSSES = ("bce", "contrastive")


def link_loss_sum(kind: str, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """bce: binary cross-entropy of every positive against 1 and every negative against 0, summed; contrastive: the
    softmax cross-entropy of each positive among itself and its k negatives (InfoNCE), summed over the positives."""
    if kind == "bce":
        return (F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos), reduction="sum")
                + F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg), reduction="sum"))
    if kind == "contrastive":
        logits = torch.cat([pos.unsqueeze(1), neg], dim=1)
        return F.cross_entropy(logits, torch.zeros(pos.shape[0], dtype=torch.long, device=pos.device),
                               reduction="sum")
    raise ValueError(f"unknown link loss {kind!r}; choose one of {', '.join(LOSSES)}")


def link_targets(kind: str, positives: int, negatives: int) -> int:
    """What ``link_loss_sum`` over ``positives`` pairs with ``negatives`` each is divided by for its mean: every
    scored pair (bce) or every positive (contrastive)."""
    return positives * (1 + negatives) if kind == "bce" else positives
