"""Dropout that keeps no mask for the backward pass, and can write the halo rows it drops out straight into the layer's
input. The mask is a function of a seed drawn from PyTorch's default generator, drawn again by the backward: the same
gradients without a mask kept over every inner and halo row, and a seeded run repeats exactly. The CPU draws and applies
it in one numba pass (``dropout_cpu``; benchmarks/records/2026-11-27_floor_2core-vm.md), a GPU with a
``torch.Generator`` of its own.
"""
# PyTorch's CPU dropout keeps its float32 noise (the mask divided by 1 - p) until the backward, four bytes an element,
# and draws one number at a time; a counter-based hash draws and applies the mask in one pass over the rows.
from __future__ import annotations

import torch
import torch.nn as nn

CHUNK = 1 << 22  # elements drawn at a time on a GPU: a float temporary of bounded size, whatever the rows


def _dropped(shape, p: float, seed: int, device) -> torch.Tensor:
    """Which elements are zeroed (GPU), as bool (masked_fill_ takes it as it is, where a product would first widen
    it to the rows' float type, a copy as large as the rows). Drawn as uniforms in chunks, the same stream from the
    same seed in the backward."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out = torch.empty(shape, dtype=torch.bool, device=device)
    flat = out.view(-1)
    for start in range(0, flat.shape[0], CHUNK):
        part = flat[start:start + CHUNK]
        torch.lt(torch.rand(part.shape[0], generator=gen, device=device), p, out=part)
    return out


def drop_into(x: torch.Tensor, out: torch.Tensor, p: float, seed: int, offset: int = 0) -> torch.Tensor:
    """``out = dropout(x)`` with the mask of ``seed`` (``out`` contiguous, the shape of ``x``; it may be ``x``);
    returns ``out``. ``offset``: the elements of ``x`` are elements ``offset`` onwards of a larger tensor of that
    seed (a piece of it gets the mask it gets whole)."""
    if out.device.type == "cpu" and out.dtype in (torch.float32, torch.float64):
        from sylvie.models.dropout_cpu import drop
        drop(x.detach().contiguous().view(-1).numpy(), out.detach().view(-1).numpy(), p, seed, offset)
        return out
    if out.data_ptr() != x.data_ptr():
        out.copy_(x)
    mask = _dropped((offset + out.numel(),), p, seed, out.device)[offset:].view(out.shape)
    return out.masked_fill_(mask, 0).mul_(1 / (1 - p))


class _DropoutInto(torch.autograd.Function):
    """``cat([head, dropout(x)])`` (``drop_head``: ``dropout(cat([head, x]))``), or ``dropout(x)`` without a head,
    written once."""

    @staticmethod
    def forward(ctx, head: torch.Tensor | None, x: torch.Tensor, p: float, seed: int, drop_head: bool):
        ctx.p, ctx.seed, ctx.start = p, seed, 0 if head is None else head.shape[0]
        ctx.drop_head = drop_head and head is not None
        out = x.new_empty((ctx.start + x.shape[0],) + tuple(x.shape[1:]))
        if ctx.drop_head:
            drop_into(head, out[:ctx.start], p, seed)
        elif head is not None:
            out[:ctx.start] = head
        drop_into(x, out[ctx.start:], p, seed, offset=out[:ctx.start].numel() if ctx.drop_head else 0)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if ctx.start:
            # With a head (a layer's input over inner and halo rows) in place: that input's one consumer is the
            # layer's convolution, whose backward made ``grad`` for this function alone, and a copy would be one
            # more tensor over every halo row at the backward's peak.
            grad = grad.contiguous()
            if ctx.drop_head:
                drop_into(grad, grad, ctx.p, ctx.seed)
                return grad[:ctx.start], grad[ctx.start:], None, None, None
            tail = grad[ctx.start:]
            return grad[:ctx.start], drop_into(tail, tail, ctx.p, ctx.seed), None, None, None
        # Without, ``grad`` may be shared (an addition passes its gradient on as it is): a new tensor.
        return None, drop_into(grad, torch.empty_like(grad, memory_format=torch.contiguous_format), ctx.p,
                               ctx.seed), None, None, None


class Dropout(nn.Module):
    """``nn.Dropout`` (each element zeroed with probability ``p``, the rest scaled by 1 / (1 - p), in training
    mode only) that keeps no mask between the passes."""

    def __init__(self, p: float):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.after(None, x)

    def after(self, head: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """``cat([head, self(x)])`` (``head`` None: ``self(x)``) in one new tensor: no dropped-out copy of ``x``
        besides the result."""
        return self._drop(head, x, drop_head=False)

    def cat(self, head: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``self(cat([head, x]))`` in one new tensor, one pass over the rows."""
        return self._drop(head, x, drop_head=True)

    def _drop(self, head: torch.Tensor | None, x: torch.Tensor, drop_head: bool) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x if head is None else torch.cat([head, x])
        seed = int(torch.randint(2 ** 62, (1,)).item())  # from the default generator: torch.manual_seed repeats it
        return _DropoutInto.apply(head, x, self.p, seed, drop_head)

    def extra_repr(self) -> str:
        return f"p={self.p}"
