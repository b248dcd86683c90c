"""The optimisation step both trainers take (``ModelStep.forward_backward``, then the optimiser's step in the trainer's
``train_step``): seed the step's dropout, forward, this rank's summed loss over the global number of targets, backward,
the weight gradients summed over the ranks, and a stop on every rank at once when the loss or a gradient is not finite.
And the run loop's divergence check (``check_divergence``): training stops when the loss stays far above the first
epoch's.
"""
# The loss travels in the gradients' collective. The divergence check applies to the epoch losses of either trainer.
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

from sylvie.comm.stats import CommStats
from sylvie.errors import SylvieError
from sylvie.runtime.process_group import all_reduce_sum
from sylvie.train.optimiser import Optimiser


class TrainingDiverged(SylvieError):
    """A non-finite loss or weight gradient: training stops before the optimiser step. ``epoch`` (0-based) is where
    it stopped, ``reason`` the run failure's (``sylvie.formats.run_failure``)."""

    reason = "non-finite"
    on_every_rank = True  # every rank raises it at the same epoch (all-reduced numbers): they leave together

    def __init__(self, epoch: int, loss: float, lr: float, grads_finite: bool):
        self.epoch = epoch
        what = f"the training loss is {loss}" if not math.isfinite(loss) else "the weight gradients are not finite"
        super().__init__(f"epoch {epoch + 1}: {what}; training diverged and stopped (no model.pt written). Try a "
                         f"lower train.lr (now {lr:g}, e.g. {lr / 10:g}), or check the input features for "
                         f"extreme values")


class LossDiverged(TrainingDiverged):
    """Finite, but for ``patience`` epochs in a row above ``factor`` x the first epoch's loss."""

    reason = "diverged"

    def __init__(self, epoch: int, loss: float, first: float, factor: float, patience: int, lr: float):
        self.epoch = epoch
        SylvieError.__init__(
            self, f"epoch {epoch + 1}: the training loss is {loss:.4g}, above train.divergence_factor {factor:g} x "
                  f"the first epoch's {first:.4g} for train.divergence_patience {patience} epochs in a row; training "
                  f"diverged and stopped (no model.pt written). Try a lower train.lr (now {lr:g}, e.g. {lr / 10:g}), "
                  f"or raise divergence_factor or divergence_patience (0 turns the check off)")


def check_divergence(losses: Sequence[float], train) -> None:
    """Raise ``LossDiverged`` when the last ``train.divergence_patience`` of the epoch ``losses`` so far (every
    epoch's, from the first) were all above ``train.divergence_factor`` x the first. The losses are the global means
    every rank holds alike (all-reduced), so every rank stops at the same epoch."""
    factor, patience = train.divergence_factor, train.divergence_patience
    if not factor or not patience or len(losses) <= patience:
        return
    first = losses[0]
    if not (math.isfinite(first) and first > 0):
        return
    if all(loss > factor * first for loss in losses[-patience:]):
        raise LossDiverged(len(losses) - 1, losses[-1], first, factor, patience, train.lr)


def all_reduce_gradients(model: torch.nn.Module, stats: CommStats, extra: torch.Tensor | None = None) -> bool:
    """Sum the weight gradients (and ``extra``, summed in place in the same collective) over the ranks; returns
    whether the gradients are all finite (the same answer on every rank)."""
    # a weight partitioned over the ranks (``rank_local``: a typed graph's embedding rows) keeps its own gradient
    params = [p for p in model.parameters() if p.grad is not None and not getattr(p, "rank_local", False)]
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


def step_seed(seed: int, step: int, world: int, rank: int) -> int:
    """torch's seed for the dropout masks of optimisation step ``step`` (counted from the run's first, over all
    epochs) on ``rank``: a function of these alone, so a resumed run repeats them."""
    return seed * 1_000_003 + step * world + rank


def seed_generators(seed: int) -> None:
    """``torch.manual_seed(seed)`` for what a step draws from: the CPU's default generator, and the GPUs' where CUDA is
    in use. Not ``torch.manual_seed`` itself, which before CUDA starts queues the seed for every kind of device, taking
    a traceback of the caller each time, a cost every step for nothing
    (benchmarks/records/2026-11-27_collectives_2core-vm.md)."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def node_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Node classification's loss of some targets: their summed cross-entropy."""
    return F.cross_entropy(logits, labels, reduction="sum")


class ModelStep:
    """All of one optimisation step of ``model`` with ``opt`` but the optimiser's step, the same for both trainers: a
    trainer's ``train_step`` calls ``forward_backward`` and then ``opt.step()`` itself (torchtitan's
    ``forward_backward_step`` and ``train_step``), so the step is taken in the frame the run's story names. ``stats``
    times the gradient all-reduce."""

    def __init__(self, model: torch.nn.Module, opt: Optimiser, seed: int, world: int, rank: int):
        self.model, self.opt, self.seed, self.world, self.rank = model, opt, seed, world, rank
        self.stats = CommStats()

    def forward_backward(self, step: int, epoch: int, forward: Callable[[], torch.Tensor], num_targets: float,
                         after_backward: Callable[[], None] | None = None) -> float:
        """Step number ``step`` (of epoch ``epoch``) up to the optimiser's step, with the gradient of the mean loss over
        all ranks' ``num_targets`` targets (``forward()`` returns this rank's targets' summed loss: ``node_loss_sum``
        of node classification, ``RankPairs.loss_sum`` of link prediction); returns the loss summed over all ranks'
        targets, the same on every rank. Raises ``TrainingDiverged`` on every rank when the
        loss or a gradient is not finite, so that the optimiser never steps on them."""
        # Every rank raises together since the numbers are all-reduced. ``after_backward()``: what the step does between
        # the backward pass and the gradients' all-reduce (a sampled rank sends embedding rows' gradients to their
        # owners).
        seed_generators(step_seed(self.seed, step, self.world, self.rank))
        self.model.train()
        self.opt.zero_grad()
        loss_sum = forward()
        (loss_sum / float(num_targets)).backward()
        if after_backward is not None:
            after_backward()
        total = loss_sum.detach().reshape(1).to(torch.float32).clone()
        grads_finite = all_reduce_gradients(self.model, self.stats, extra=total)
        loss = float(total)
        if not (math.isfinite(loss) and grads_finite):
            raise TrainingDiverged(epoch, loss / float(num_targets), self.opt.lr, grads_finite)
        return loss
