"""The Bounded Staleness Adaptor: which epochs exchange halo data synchronously (fresh) and which compute with the
previous epoch's (stale, pipelined).

Epoch 0 and the first after a resume are synchronous; with bound K, at least every K-th epoch is; the adaptive
policy also syncs when the boundary rows drifted beyond ``drift_tolerance``. Decisions are taken two epochs ahead,
so an epoch knows whether to send its rows for the next; every rank decides alike from one all-reduced signal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

POLICIES = ("fixed", "adaptive")


@dataclass(frozen=True)
class Mode:
    synchronous: bool
    reason: str  # why: "first epoch", "resumed", "not pipelined", "bound K", "drift 0.12 > 0.1", or "stale"

    @property
    def staleness(self) -> int:
        """Age in epochs of the halo data this epoch computes with."""
        return 0 if self.synchronous else 1


class BoundedStalenessAdaptor:
    def __init__(self, pipeline: bool, bound: int = 0, policy: str = "fixed", drift_tolerance: float = 0.1,
                 start: int = 0):
        if bound < 0:
            raise ValueError(f"comm.staleness (the bound K) must be >= 0, got {bound}")
        if policy not in POLICIES:
            raise ValueError(f"comm.staleness_policy must be one of {POLICIES}, got {policy!r}")
        self.pipeline, self.bound, self.policy, self.tolerance = pipeline, bound, policy, drift_tolerance
        self.modes: dict[int, Mode] = {start: Mode(True, "first epoch" if start == 0 else "resumed")}
        self.modes[start + 1] = self._decide(start + 1, drift=float("nan"))

    def mode(self, epoch: int) -> Mode:
        """The mode of ``epoch``; one never observed (steps driven without ``observe``) is decided from the
        bound alone."""
        if epoch not in self.modes:
            self.modes[epoch] = self._decide(epoch, drift=float("nan"))
        return self.modes[epoch]

    def _last_synchronous(self, before: int) -> int:
        return max(e for e, m in self.modes.items() if e < before and m.synchronous)

    def _decide(self, epoch: int, drift: float) -> Mode:
        if not self.pipeline:
            return Mode(True, "not pipelined")
        if self.bound and epoch - self._last_synchronous(epoch) >= self.bound:
            return Mode(True, f"bound {self.bound}")
        if self.policy == "adaptive" and not math.isnan(drift) and drift > self.tolerance:
            return Mode(True, f"drift {drift:.3g} > {self.tolerance:g}")
        return Mode(False, "stale")

    def observe(self, epoch: int, drift: float) -> Mode:
        """Epoch ``epoch`` ended with boundary drift ``drift``; returns the decision for epoch + 2."""
        decision = self._decide(epoch + 2, drift)
        self.modes[epoch + 2] = decision
        keep = self._last_synchronous(epoch + 2)
        for old in [e for e in self.modes if e < epoch - 1 and e != keep]:
            del self.modes[old]
        return decision
