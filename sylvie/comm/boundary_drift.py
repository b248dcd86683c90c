"""How much the boundary rows a rank sends change from one epoch to the next, measured by the sender in fp32.

With pipelining, a peer computes with the rows sent one epoch earlier, so this change *is* the error of
the stale data it uses (before quantization noise, which is why the sender measures it, not the receiver).
The Bounded Staleness Adaptor's adaptive policy reads it; ``metrics.jsonl`` records it.
"""
from __future__ import annotations

import math

import torch

SAMPLE_ROWS = 1024


class BoundaryDrift:
    """Per (layer, direction): a sample of the rows sent last time; per epoch: sums of squared change and of
    squared size.

    The sample is the same evenly spaced ``SAMPLE_ROWS`` rows every epoch (all rows when there are fewer), so
    the ratio estimates the drift of the whole message at a cost independent of its size: copying and
    differencing every boundary row each epoch cost as much as a third of the computation on big graphs.
    """

    def __init__(self, sample_rows: int = SAMPLE_ROWS):
        self.sample_rows = sample_rows
        self.previous: dict[tuple[int, int], torch.Tensor] = {}
        self.change2 = [0.0, 0.0]  # per direction (forward features, backward gradients)
        self.size2 = [0.0, 0.0]

    def reset_epoch(self) -> None:
        self.change2, self.size2 = [0.0, 0.0], [0.0, 0.0]

    def observe(self, layer: int, direction: int, rows: torch.Tensor) -> None:
        rows = rows.detach()
        n = rows.shape[0]
        if n > self.sample_rows:
            rows = rows[torch.linspace(0, n - 1, self.sample_rows, device=rows.device).long()]
        prev = self.previous.get((layer, direction))
        if prev is not None and prev.shape == rows.shape:
            self.change2[direction] += float((rows - prev).pow(2).sum())
            self.size2[direction] += float(prev.pow(2).sum())
        self.previous[(layer, direction)] = rows.clone()

    def sums(self) -> list[float]:
        """[change² forward, size² forward, change² backward, size² backward]: summed over ranks, they give
        the global relative drift (``relative``)."""
        return [self.change2[0], self.size2[0], self.change2[1], self.size2[1]]


def relative(change2: float, size2: float) -> float:
    """sqrt(change² / size²); NaN when nothing was measured (first epoch, or no boundary)."""
    return math.sqrt(change2 / size2) if size2 > 0 else float("nan")
