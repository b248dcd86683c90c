"""The optimiser and learning-rate schedule both trainers step: ``torch.optim`` and ``torch.optim.lr_scheduler`` by name
and keyword arguments from the config's train section (Adam at ``train.lr`` by default), with an optional linear
warm-up. The schedule steps once per epoch, after the epoch's optimiser steps, and a checkpoint holds both states, so a
resumed run continues its schedule exactly. ``check_optimiser`` builds both at start-up, so a wrong name fails early.
"""
# Once per epoch is Lightning's default interval. ``check_optimiser`` builds both on a stand-in parameter, so that a
# wrong name or argument fails naming the train knob, before any rank waits for another; ``train.weight_decay`` is the
# default optimiser's weight decay.
from __future__ import annotations

import inspect
from collections.abc import Iterable

import torch

from sylvie.errors import SylvieError

# schedules whose length is the run's when their arguments leave it out: the epochs after the warm-up
_LENGTH_ARGUMENT = {"CosineAnnealingLR": "T_max", "PolynomialLR": "total_iters", "LinearLR": "total_iters"}


# What torch names but a config cannot build or the trainers cannot step, by name, with the reason a refusal gives;
# the choices an error lists leave them out, as they leave out the base classes and names starting with "_".
_NOT_FROM_A_CONFIG = {
    "train.optimizer": {
        "LBFGS": "its step takes a closure that recomputes the loss, which the trainers' one step does not give",
        "SparseAdam": "it takes sparse gradients only, and the models' are dense",
        "Muon": "it takes 2-D weights only, and every model has biases"},
    "train.lr_schedule": {
        "LambdaLR": "it takes a Python function (lr_lambda), which a config can only give as text",
        "MultiplicativeLR": "it takes a Python function (lr_lambda), which a config can only give as text",
        "SequentialLR": "it takes schedule objects; warmup_epochs gives the one sequence a config needs",
        "ChainedScheduler": "it takes schedule objects, which a config cannot give",
        "ReduceLROnPlateau": "it steps on a metric, not once per epoch"},
}


def _named_class(module, base: type, name: str, knob: str, what: str) -> type:
    """The class ``name`` of ``module``: a public subclass of ``base`` that a config can build; else an error naming
    ``knob``, why where torch has it, and every name it could be."""
    refused = _NOT_FROM_A_CONFIG[knob]

    def usable(n: str, c) -> bool:
        return (inspect.isclass(c) and issubclass(c, base) and c is not base and not n.startswith("_")
                and n not in refused and not inspect.isabstract(c))

    cls = getattr(module, name, None)
    if not usable(name, cls):
        known = sorted(n for n, c in vars(module).items() if usable(n, c))
        why = refused[name] if name in refused else f"not {what}"
        raise SylvieError(f"{knob} {name!r}: {why}; choose one of {', '.join(known)}")
    return cls


def _optimiser_class(name: str) -> type:
    return _named_class(torch.optim, torch.optim.Optimizer, name, "train.optimizer", "an optimiser of torch.optim")


def _schedule_class(name: str) -> type:
    sched = torch.optim.lr_scheduler
    return _named_class(sched, sched.LRScheduler, name, "train.lr_schedule",
                        "a schedule of torch.optim.lr_scheduler stepped once per epoch (or null for a constant lr)")


def schedule_follows_epochs(lr_schedule: str | None, lr_schedule_args: dict | None) -> bool:
    """Whether the schedule's length is the run's (its length argument left out): then ``train.epochs`` shapes the
    trajectory, and a run cannot resume under another."""
    length = _LENGTH_ARGUMENT.get(lr_schedule or "")
    return length is not None and length not in (lr_schedule_args or {})


class Optimiser:
    """``train.optimizer`` over ``params`` with ``train.lr``, ``train.weight_decay`` and ``train.optimizer_args``;
    ``train.warmup_epochs`` of ``LinearLR`` from ``train.warmup_start_factor`` x lr, then ``train.lr_schedule`` (if
    any) with ``train.lr_schedule_args``, stepped by ``end_epoch``."""

    def __init__(self, params: Iterable[torch.nn.Parameter], train):
        self.train = train
        cls = _optimiser_class(train.optimizer)
        args = {"lr": train.lr, "weight_decay": train.weight_decay, **(train.optimizer_args or {})}
        if "weight_decay" not in inspect.signature(cls).parameters:  # Rprop: no weight decay to give
            decay = args.pop("weight_decay")
            if decay:
                knob = ("train.optimizer_args' weight_decay" if "weight_decay" in (train.optimizer_args or {}) else
                        "train.weight_decay")
                raise SylvieError(f"{knob} {decay!r}: train.optimizer {train.optimizer} takes no weight decay; "
                                  f"leave {knob} out (or 0)")
        try:
            self.optimizer = cls(params, **args)
        except (TypeError, ValueError) as e:
            raise SylvieError(f"train.optimizer {train.optimizer} with {_shown(args)} (lr, weight_decay and "
                              f"train.optimizer_args): {e}") from None
        self.schedule = self._schedule()

    def _schedule(self):
        train, sched = self.train, torch.optim.lr_scheduler
        after = max(1, train.epochs - train.warmup_epochs)  # the epochs the schedule runs over
        main = None
        if train.lr_schedule:
            cls = _schedule_class(train.lr_schedule)
            args = dict(train.lr_schedule_args or {})
            if schedule_follows_epochs(train.lr_schedule, args):
                args[_LENGTH_ARGUMENT[train.lr_schedule]] = after
            try:
                main = cls(self.optimizer, **args)
            except (TypeError, ValueError, KeyError) as e:
                raise SylvieError(f"train.lr_schedule {train.lr_schedule} with {_shown(args)} "
                                  f"(train.lr_schedule_args): {e}") from None
        if not train.warmup_epochs:
            return main
        warmup = sched.LinearLR(self.optimizer, start_factor=train.warmup_start_factor, end_factor=1.0,
                                total_iters=train.warmup_epochs)
        if main is None:
            return warmup
        return sched.SequentialLR(self.optimizer, [warmup, main], milestones=[train.warmup_epochs])

    @property
    def lr(self) -> float:
        """The learning rate of the next optimiser step."""
        return float(self.optimizer.param_groups[0]["lr"])

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        self.optimizer.step()

    def end_epoch(self) -> None:
        """One step of the schedule (nothing without one)."""
        if self.schedule is not None:
            self.schedule.step()

    def state_dict(self) -> dict:
        """The optimiser's state (``torch.optim``'s layout) and the schedule's."""
        return {"optimizer": self.optimizer.state_dict(),
                "lr_schedule": None if self.schedule is None else self.schedule.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state_dict()``'s, or from a checkpoint of before schedules (the optimiser's state alone,
        ``torch.optim.Adam``'s layout)."""
        if "param_groups" in state:  # an older checkpoint: the optimiser's state itself
            state = {"optimizer": state, "lr_schedule": None}
        self.optimizer.load_state_dict(state["optimizer"])
        if self.schedule is not None and state.get("lr_schedule") is not None:
            self.schedule.load_state_dict(state["lr_schedule"])


def check_optimiser(train) -> None:
    """Build ``train``'s optimiser and schedule once on a stand-in parameter: a wrong name or argument raises
    ``SylvieError`` naming the knob."""
    Optimiser([torch.nn.Parameter(torch.zeros(1))], train)


def _shown(args: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())
