"""What every trainer's optimisation step shares: summing the weight gradients over the ranks, and stopping, on
every rank at once, when the loss or the gradients are not finite."""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from sylvie.comm.stats import CommStats
from sylvie.errors import SylvieError
from sylvie.train.distributed import all_reduce_sum


class TrainingDiverged(SylvieError):
    """A non-finite loss or weight gradient: training stops before the optimiser step."""

    def __init__(self, epoch: int, loss: float, lr: float, grads_finite: bool):
        what = f"the training loss is {loss}" if not math.isfinite(loss) else "the weight gradients are not finite"
        super().__init__(f"epoch {epoch + 1}: {what}; training diverged and stopped (no model.pt written). Try a "
                         f"lower train.lr (now {lr:g}, e.g. {lr / 10:g}), or check the input features for "
                         f"extreme values")


def all_reduce_gradients(model: torch.nn.Module, stats: CommStats, extra: torch.Tensor | None = None) -> bool:
    """Sum the weight gradients (and ``extra``, summed in place in the same collective) over the ranks; returns
    whether the gradients are all finite (the same answer on every rank)."""
    params = [p for p in model.parameters() if p.grad is not None]
    parts = [p.grad.reshape(-1) for p in params] + ([extra.reshape(-1)] if extra is not None else [])
    if not parts:
        return True
    flat = torch.cat(parts)
    if dist.is_initialized() and dist.get_world_size() > 1:
        with stats.timed(sent=flat.numel() * flat.element_size()):
            all_reduce_sum(flat)
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n
    if extra is not None:
        extra.copy_(flat[offset:].view_as(extra))
    return bool(torch.isfinite(flat[:offset]).all())
