"""A learnt embedding table partitioned over the ranks with its nodes (DistDGL's ``DistEmbedding``), for a typed
graph's featureless node types in sampled training.

``pull(ids)`` fetches a minibatch's rows from their owners as a leaf taking a gradient; ``push`` returns the
gradients, and owners step their rows with the model's weights (dense, as ``nn.Embedding``). Both are collectives of
the model's thread, so no minibatch reads rows ahead of an update.
"""
from __future__ import annotations

import torch

from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.remote_rows import RemoteRows
from sylvie.comm.stats import CommStats


class EmbeddingRows:
    def __init__(self, rank: int, part_offsets, weight: torch.nn.Parameter, all_to_all=None,
                 stats: CommStats | None = None):
        """``weight``: this rank's rows of the table (its ids ``part_offsets[rank]`` onwards, in order)."""
        self.weight = weight
        self.stats = stats or CommStats()
        self.remote = RemoteRows(rank, part_offsets, weight.detach(), FULL_PRECISION, 0, all_to_all, self.stats)

    def pull(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of ``ids`` (the type's space), a leaf that takes a gradient."""
        return self.remote.fetch(ids).detach().requires_grad_(True)

    def push(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Add ``rows.grad`` (zeros where it has none) into the owners' gradient of their rows ``ids``."""
        grad = rows.grad if rows.grad is not None else torch.zeros_like(rows)
        local, got = self.remote.send_to_owners(ids, grad)
        if self.weight.grad is None:
            self.weight.grad = torch.zeros_like(self.weight)
        self.weight.grad.index_add_(0, local.to(self.weight.device), got.to(self.weight.device))
