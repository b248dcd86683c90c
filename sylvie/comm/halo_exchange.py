"""The halo exchange handed to a model: ``(inner_rows, layer) -> halo_rows``, differentiable, fresh or stale.

How rows are obtained and how gradients return is ``halo_rows.HaloRows``; this object decides per call which
way (layer 0 and evaluation: always fresh and fp32; training: by the round's mode), with which bit width, and
on which all-to-all.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from sylvie.comm.boundary_drift import BoundaryDrift, relative
from sylvie.comm.collective import AllToAll, all_reduce_sum_together, torch_all_to_all
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_rows import HaloRows
from sylvie.comm.halo_wire import FORWARD, Wire
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.stale_halo import StaleHalo
from sylvie.comm.stats import CommStats


@dataclass(frozen=True)
class EpochExchange:
    """One epoch of halo traffic: bytes and drift summed over all ranks, times of this rank."""
    bytes_sent: int
    bytes_received: int
    fp32_bytes_sent: int  # what the same rows would have taken in fp32
    drift_features: float  # relative change of the boundary features since the last epoch (nan: not measured)
    drift_gradients: float
    seconds: float  # waited on (exposed)
    hidden_seconds: float  # background exchanges while the rank computed
    codec_seconds: float  # Low-bit encoding and decoding


class HaloExchange:
    """Callable ``(inner_rows, layer) -> halo_rows`` handed to the model; differentiable.

    ``bits`` applies to layers >= 1, and ``gradient_bits`` to their backward messages (0: ``bits``); layer 0 (the
    input features, exchanged once) is always fp32 and always synchronous. The random streams of quantization
    depend on (seed, rank, round, layer, direction), so a run repeats exactly, also after resuming.

    Call ``begin_round(epoch, fresh=..., keep=...)`` once per training step: ``fresh`` exchanges now
    (synchronous) rather than computing with the previous round's data; ``keep`` makes this round's data
    available to the next round (a stale one), sent in the background when this round is itself stale.
    Under boundary-node sampling the round also gets its ``plan`` (the epoch's sample of ``plan``, the full
    one) and, when it keeps data for the next round, the next round's ``next_plan``: the forward rows kept
    are those of the next round's sample (``halo_rows.HaloRows``).
    ``pipelined=True`` is needed for stale rounds: it gives the background exchanges their own process
    group (made here, so every rank must construct the exchange), so they never queue behind the
    gradient all-reduce, and records the boundary drift. ``all_to_all`` replaces torch.distributed (e.g. a
    simulator of several ranks in one process).
    """

    def __init__(self, plan: HaloPlan, stats: CommStats | None = None, bits: int = FULL_PRECISION,
                 seed: int = 0, rank: int = 0, pipelined: bool = False, smoothing: float = 0.0,
                 all_to_all: AllToAll | None = None, gradient_bits: int = 0):
        self.plan = plan
        self.stats = stats or CommStats()
        self.gradient_bits = gradient_bits or bits
        self.bits, self.seed, self.rank, self.round = bits, seed, rank, 0
        self.fresh, self.keep_for_next = True, False
        self.round_plan = self.next_plan = plan
        self.pipelined = pipelined and len(plan.send_counts) > 1
        self.drift = BoundaryDrift()
        self.stale_rows = StaleHalo(smoothing)
        if all_to_all is None:
            group = None
            if self.pipelined:
                import torch.distributed as dist
                group = dist.new_group(backend=dist.get_backend())
            all_to_all = torch_all_to_all(group)
        self.all_to_all = all_to_all

    def start_epoch(self) -> None:
        """Reset the epoch's counters and drift sums (call before the epoch's first exchange)."""
        self.stats.reset()
        self.drift.reset_epoch()

    def end_epoch(self, extra: Sequence[torch.Tensor] = ()) -> EpochExchange:
        """The epoch's traffic, bytes and drift summed over all ranks (one all-reduce: every rank calls it); each
        tensor of ``extra`` (float64, on the exchange's device), e.g. the epoch's accuracy counts, is summed in place
        in the same collective."""
        s = self.stats
        own = torch.tensor([s.bytes_sent, s.bytes_received, s.fp32_bytes_sent, *self.drift.sums()],
                           dtype=torch.float64, device=self.plan.send_index.device)
        all_reduce_sum_together([own, *extra])
        sums = own.tolist()
        return EpochExchange(int(sums[0]), int(sums[1]), int(sums[2]), relative(sums[3], sums[4]),
                             relative(sums[5], sums[6]), s.seconds, s.hidden_seconds, s.codec_seconds)

    def begin_round(self, round_: int, fresh: bool = True, keep: bool = False, plan: HaloPlan | None = None,
                    next_plan: HaloPlan | None = None) -> None:
        """Start round ``round_``: exchange now (``fresh``) or use the previous round's data; ``keep`` this round's
        data for the next one; ``plan``: this round's rows (None: all of them, ``self.plan``), ``next_plan``: the
        next round's (None: the same as this round's)."""
        if not fresh and not self.pipelined:
            raise ValueError("a stale round needs HaloExchange(pipelined=True)")
        self.round, self.fresh, self.keep_for_next = round_, fresh, keep and self.pipelined
        self.round_plan = self.plan if plan is None else plan
        self.next_plan = self.round_plan if next_plan is None else next_plan
        if fresh:
            self.stale_rows.clear_pending()

    def __call__(self, inner: torch.Tensor, layer: int = 0, rows: HaloPlan | None = None) -> torch.Tensor:
        """``rows``: the plan of another row space (``HaloPlan.of_rows``: a typed graph's rows of some node types),
        every round the same (no boundary-node sampling), for a ``layer`` index of its own."""
        if len(self.plan.send_counts) == 1:  # one rank: no halo. Otherwise every rank joins the collective.
            return inner.new_empty((0,) + tuple(inner.shape[1:]))
        bits, gradient_bits = (FULL_PRECISION, FULL_PRECISION) if layer == 0 else (self.bits, self.gradient_bits)
        wire = Wire(bits, (self.seed, self.rank, self.round), layer, self.stats, self.all_to_all, gradient_bits)
        plan = self.round_plan if rows is None else rows
        if layer == 0 or not torch.is_grad_enabled():  # input features, or evaluation: always fresh
            return HaloRows.apply(inner, plan, plan, wire, None, True, False, None)
        drift = self.drift if self.pipelined else None
        if drift is not None:  # the whole send list (at its sample positions), whatever this round's sample
            drift.observe_gathered(layer, FORWARD, inner, (self.plan if rows is None else rows).send_index)
        return HaloRows.apply(inner, plan, self.next_plan if rows is None else rows, wire, self.stale_rows,
                              self.fresh, self.keep_for_next, drift)
