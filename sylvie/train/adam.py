"""Adam (Kingma and Ba, 2015) with L2 weight decay: the optimiser both trainers step, ``torch.optim.Adam``'s update
without ``torch.optim``.

Why not ``torch.optim.Adam``: its constructor, ``zero_grad``, ``state_dict`` and step are wrapped to keep
TorchDynamo out, and the first call of any of them imports ``torch._dynamo`` (with FSDP and DTensor): about 1 s of
CPU in every rank of every run (measured with torch 2.13: 2.5 s instead of 1.5 s to import torch and build an
optimiser), for a compiler we never use. On P ranks sharing a node's cores that is P seconds of start-up per run.

The update is torch's single-tensor Adam (what ``torch.optim.Adam`` runs on the CPU), operation for operation, so
it computes the same bits (tests/test_adam.py checks it against ``torch.optim.Adam``), and ``state_dict`` has
``torch.optim.Adam``'s layout, so checkpoints written by either load in the other.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch


class Adam:
    """``torch.optim.Adam(params, lr, betas, eps, weight_decay)`` for one parameter group (no amsgrad, no
    maximize, weight decay added to the gradient)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam: an empty parameter list")
        if not (lr >= 0 and eps >= 0 and weight_decay >= 0 and 0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"Adam: invalid lr {lr}, betas {betas}, eps {eps} or weight_decay {weight_decay}")
        self.lr, self.betas, self.eps, self.weight_decay = float(lr), tuple(map(float, betas)), float(eps), \
            float(weight_decay)
        # per parameter: its step count (a float32 scalar, as torch keeps it), first and second moments; a
        # parameter's state is made at its first step with a gradient
        self.state: dict[int, dict[str, torch.Tensor]] = {}

    def zero_grad(self) -> None:
        """Drop every gradient (``set_to_none``)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            s = self.state.get(i)
            if s is None:
                s = self.state[i] = {"step": torch.tensor(0.0, dtype=torch.float32),
                                     "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                     "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
            grad, exp_avg, exp_avg_sq = p.grad, s["exp_avg"], s["exp_avg_sq"]
            s["step"] += 1
            if self.weight_decay != 0:
                grad = grad.add(p, alpha=self.weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = s["step"].item()
            step_size = self.lr / (1 - beta1 ** step)
            denom = (exp_avg_sq.sqrt() / (1 - beta2 ** step) ** 0.5).add_(self.eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)

    def state_dict(self) -> dict:
        """``torch.optim.Adam.state_dict()``'s layout: ``state`` by parameter index, one ``param_groups`` entry."""
        group = {"lr": self.lr, "betas": self.betas, "eps": self.eps, "weight_decay": self.weight_decay,
                 "amsgrad": False, "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                 "fused": None, "decoupled_weight_decay": False, "params": list(range(len(self.params)))}
        return {"state": {i: dict(s) for i, s in self.state.items()},
                "param_groups": [group]}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (ours or ``torch.optim.Adam``'s for the same parameters); the moments move to
        each parameter's device and dtype, the step stays a float32 scalar on the CPU."""
        groups = state.get("param_groups", [])
        if len(groups) != 1 or len(groups[0].get("params", ())) != len(self.params):
            raise ValueError(f"Adam: the saved state is for {sum(len(g.get('params', ())) for g in groups)} "
                             f"parameters in {len(groups)} groups, this optimiser has {len(self.params)} in one")
        g = groups[0]
        if g.get("amsgrad") or g.get("maximize") or g.get("decoupled_weight_decay"):
            raise ValueError("Adam: the saved state is of an amsgrad, maximize or decoupled-weight-decay Adam")
        self.lr, self.betas, self.eps, self.weight_decay = float(g["lr"]), tuple(map(float, g["betas"])), \
            float(g["eps"]), float(g["weight_decay"])
        index = {saved: i for i, saved in enumerate(g["params"])}
        self.state = {}
        for saved, s in state.get("state", {}).items():
            p = self.params[index[saved]]
            self.state[index[saved]] = {
                "step": torch.as_tensor(s["step"], dtype=torch.float32).detach().clone().cpu(),
                "exp_avg": s["exp_avg"].detach().to(device=p.device, dtype=p.dtype).clone(),
                "exp_avg_sq": s["exp_avg_sq"].detach().to(device=p.device, dtype=p.dtype).clone()}
