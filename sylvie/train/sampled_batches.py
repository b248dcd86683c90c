"""The sampled trainer's minibatches, made ready for the model in the sampling thread: each batch's blocks are
sampled (``NeighborSampler``) and the rows of its input vertices gathered (``RankFeatures``: own rows, cached
rows, rows fetched from their owners). A ``PreparedBatch`` is what the model step takes."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from sylvie.features.typed_features import TypedRankFeatures
from sylvie.sampling.neighbor_sampler import Minibatch, NeighborSampler


@dataclass(frozen=True)
class PreparedBatch:
    """Minibatch ``index`` of an epoch: its blocks and seeds (``minibatch``) and its input rows ``x``, per node type
    (one row per ``minibatch.input_nodes`` of the type, on the training device)."""
    index: int
    minibatch: Minibatch
    x: list[torch.Tensor]


class BatchPreparer:
    """Makes minibatches of ``sampler`` ready with the rows of ``features``. The features keep the account of
    fetching; this keeps the time spent sampling (``sample_seconds``, from ``begin_epoch``)."""

    def __init__(self, sampler: NeighborSampler, features: TypedRankFeatures):
        self.sampler, self.features = sampler, features
        self.sample_seconds = 0.0

    def begin_epoch(self) -> None:
        self.sample_seconds = 0.0

    def producer(self, epoch: int, seeds: list[np.ndarray]) -> Callable[[int], PreparedBatch]:
        """``produce(i)``: minibatch i of ``epoch`` over ``seeds[i]``; Low-bit remote rows draw from the stream
        of (epoch, i)."""
        def produce(i: int) -> PreparedBatch:
            t0 = time.perf_counter()
            mb = self.sampler.sample(seeds[i], epoch, i)
            self.sample_seconds += time.perf_counter() - t0
            x, _ = self.features.gather(torch.split(mb.input_nodes, list(mb.input_counts())), key=(epoch, i))
            return PreparedBatch(i, mb, x)
        return produce
