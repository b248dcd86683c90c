"""A learnt embedding table partitioned over the ranks with its nodes, read and trained from any rank's minibatches:
DistDGL's ``DistEmbedding`` for sampled training of a typed graph's node types without features.

Each rank holds its own nodes' rows of the table (a ``TypedGNN``'s embedding weight, ``rank_local``), in the order of
the type's id space (``TypeSpaces``). ``pull(ids)`` fetches the rows of a minibatch's input nodes of the type from
their owners, in fp32, as a leaf that takes a gradient; after the backward pass ``push`` sends each pulled row's
gradient back to its owner, which adds it into its rows' gradient (only the rows a minibatch touched travel, each
way). The owner's rows are then stepped by the run's optimiser with the model's other weights, as an
``nn.Embedding`` is (dense: a row no minibatch touched gets a zero gradient; DistDGL's sparse optimisers, which skip
it, are not offered). Both are collectives of the calling thread (every rank pulls and pushes every such type once a
step, in type order), on the process group of the model's step, never the sampling thread's: a minibatch reads its
rows at its step, never ahead of the update before it.
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
