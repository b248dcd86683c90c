"""What the run loop (``train/run.py``) asks of a trainer: the full-graph trainer (Sylvie) and the sampled
trainer (SALIENT++). The loop never reaches inside a trainer; a trainer never writes files.

The run's story is four calls of ours: ``sylvie train`` (``cli.main``), its handler, which drives the run's epochs
(``train/run.py``), ``Trainer.epoch`` and ``Trainer.train_step``, which takes the optimiser's step after the step
both trainers share (``train/step.py``: ``ModelStep.forward_backward``)."""
from __future__ import annotations

from typing import Protocol

from sylvie.formats.epoch_record import EpochRecord


class Trainer(Protocol):
    def epoch(self, epoch: int, evaluate: bool) -> EpochRecord:
        """Train one epoch (and evaluate if asked); its record (``loss`` the global mean, the same on every rank;
        accuracies None if not evaluated). Raises ``TrainingDiverged`` on a non-finite loss or gradient."""

    def train_step(self, epoch: int, batch=None) -> float:
        """One optimisation step of epoch ``epoch``, on ``batch`` (a sampled trainer's minibatch; the full-graph
        trainer's one step an epoch takes the whole partition, no batch), up to and including the optimiser's step.
        Returns the step's loss over all ranks' targets, the same on every rank: the full-graph trainer's their
        mean, the sampled trainer's their sum (its epoch divides the sum of its steps' by the training nodes)."""

    def state_dict(self) -> dict:
        """Everything needed to continue exactly (model, optimiser, ...), for a checkpoint."""

    def load_state_dict(self, state: dict, next_epoch: int) -> None:
        """Continue from a checkpoint's state at ``next_epoch``."""

    def weights(self) -> dict:
        """A copy of the model's weights, as ``model.pt`` stores them."""

    def summary(self) -> dict:
        """Extra fields of the run's summary (e.g. setup bytes)."""

    def log_lines(self, record: EpochRecord, epochs: int, full: bool) -> list[str]:
        """Rank 0's log lines for this epoch; the one-line epoch summary when ``full``."""

    def close(self) -> None:
        """Release what the trainer runs in the background (the sampling thread); called once, last."""
