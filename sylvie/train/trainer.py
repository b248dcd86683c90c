"""Full-graph, partition-parallel training: one rank per partition.

Each rank holds its inner rows and, per layer, receives its halo rows from their owners: exact (fp32,
synchronous) by default, quantized with ``comm.bits``, pipelined with ``comm.pipeline`` under the Bounded
Staleness Adaptor. The loss is the sum of per-node cross-entropy over the rank's training nodes divided by
the *global* number of training nodes, so the all-reduced (summed) weight gradients equal those of the
whole-graph mean loss.
"""
from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.staleness import BoundedStalenessAdaptor
from sylvie.comm.stats import CommStats
from sylvie.errors import SylvieError
from sylvie.models import build_model
from sylvie.models.blocks import local_block
from sylvie.partition.shard_format import Shard
from sylvie.train.distributed import Context, all_reduce_sum
from sylvie.train.metrics import format_epoch

SPLITS = ("train", "val", "test")


class TrainingDiverged(SylvieError):
    """A non-finite loss or weight gradient: training stops before the optimiser step."""

    def __init__(self, epoch: int, loss: float, lr: float, grads_finite: bool):
        what = f"the training loss is {loss}" if not math.isfinite(loss) else "the weight gradients are not finite"
        super().__init__(f"epoch {epoch + 1}: {what}; training diverged and stopped (no model.pt written). Try a "
                         f"lower train.lr (now {lr:g}, e.g. {lr / 10:g}), or check the input features for "
                         f"extreme values")


class FullGraphTrainer:
    """``comm.bits`` quantizes the training exchanges of layers >= 1 (Low-bit Module); evaluation exchanges in
    fp32 and synchronously, so accuracies measure the model, not the wire. ``model``, ``train`` and ``comm`` are
    the config's typed sections; ``seed`` the run's seed."""

    def __init__(self, ctx: Context, shard: Shard, model, train, comm, seed: int):
        self.ctx, self.train_cfg, self.comm, self.seed = ctx, train, comm, seed
        dev = ctx.device
        self.reduce_stats, self.eval_stats = CommStats(), CommStats()
        plan = HaloPlan.build(shard.halo_owner_index, shard.halo_counts().tolist(), shard.num_inner, dev)
        self.halo = HaloExchange(plan, CommStats(), comm.bits, seed, ctx.rank, pipelined=comm.pipeline,
                                 smoothing=comm.smoothing)
        self.adaptor = self._adaptor(start=0)
        self.eval_halo = HaloExchange(plan, self.eval_stats, FULL_PRECISION)
        self.block = local_block(shard.edge_src, shard.edge_dst, shard.num_inner, shard.num_halo, shard.in_degree,
                                 np.concatenate([shard.out_degree, shard.halo_out_degree]), model.self_loop, dev)
        x_inner = torch.tensor(shard.feat, device=dev)  # a copy: shard arrays are read-only Arrow memory
        with torch.no_grad():  # layer-0 halo features: exchanged once, in full precision
            self.x = torch.cat([x_inner, self.eval_halo(x_inner, 0)])
        setup = torch.tensor([float(self.eval_stats.bytes_sent)], dtype=torch.float64, device=dev)
        self.setup_bytes = int(all_reduce_sum(setup).item())  # all ranks together
        self.labels = torch.tensor(shard.label, device=dev)
        self.masks = {s: torch.tensor(getattr(shard, s), device=dev) for s in SPLITS}
        self.train_idx = self.masks["train"].nonzero().squeeze(1)
        self.num_train_global = shard.num_train_global
        torch.manual_seed(seed)  # identical initial weights on every rank
        self.model = build_model(model, shard.feat.shape[1], shard.num_classes).to(dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=train.lr, weight_decay=train.weight_decay)

    def _adaptor(self, start: int) -> BoundedStalenessAdaptor:
        c = self.comm
        return BoundedStalenessAdaptor(c.pipeline and self.ctx.world > 1, c.staleness, c.staleness_policy,
                                       c.drift_tolerance, start=start)

    def _all_reduce_gradients(self) -> bool:
        """Sum the weight gradients over the ranks; returns whether they are all finite (the same on every rank)."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        if not params:
            return True
        if self.ctx.world == 1:
            return all(bool(torch.isfinite(p.grad).all()) for p in params)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        with self.reduce_stats.timed(sent=flat.numel() * flat.element_size()):
            all_reduce_sum(flat)
        offset = 0
        for p in params:
            n = p.grad.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n
        return bool(torch.isfinite(flat).all())

    def train_step(self, epoch: int) -> float:
        """One full-graph step; returns the global mean training loss."""
        # Dropout masks depend only on (seed, epoch, rank), so a resumed run repeats them exactly.
        torch.manual_seed(self.seed * 1_000_003 + epoch * self.ctx.world + self.ctx.rank)
        mode, after = self.adaptor.mode(epoch), self.adaptor.mode(epoch + 1)
        self.halo.begin_round(epoch, fresh=mode.synchronous, keep=not after.synchronous)
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(self.block, self.x, self.halo)
        loss_sum = F.cross_entropy(logits[self.train_idx], self.labels[self.train_idx], reduction="sum")
        (loss_sum / self.num_train_global).backward()
        grads_finite = self._all_reduce_gradients()
        loss = float(all_reduce_sum(loss_sum.detach().clone())) / self.num_train_global
        if not (math.isfinite(loss) and grads_finite):  # all-reduced: every rank stops at the same epoch
            raise TrainingDiverged(epoch, loss, self.train_cfg.lr, grads_finite)
        self.opt.step()
        return loss

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy on the train / val / test nodes of all ranks (eval mode: no dropout)."""
        self.model.eval()
        pred = self.model(self.block, self.x, self.eval_halo).argmax(1)
        right = pred == self.labels
        counts = torch.tensor([[float((right & self.masks[s]).sum()), float(self.masks[s].sum())] for s in SPLITS],
                              dtype=torch.float64)
        counts = all_reduce_sum(counts.to(self.ctx.device)).cpu()
        return {f"{s}_acc": float(c / t) if t > 0 else float("nan") for s, (c, t) in zip(SPLITS, counts.tolist())}

    def epoch(self, epoch: int, evaluate: bool = True) -> dict:
        """Train one epoch and (if ``evaluate``) evaluate; returns its metrics record, accuracies None when not
        evaluated (and schedules epoch + 2)."""
        self.halo.start_epoch()
        self.reduce_stats.reset()
        mode = self.adaptor.mode(epoch)
        t0 = time.perf_counter()
        loss = self.train_step(epoch)
        train_time = time.perf_counter() - t0
        halo = self.halo.end_epoch()  # all ranks
        planned = self.adaptor.observe(epoch, halo.drift_features)
        exposed = halo.seconds + self.reduce_stats.seconds
        t1 = time.perf_counter()
        acc = self.evaluate() if evaluate else {f"{s}_acc": None for s in SPLITS}
        return {
            "epoch": epoch, "loss": loss, **acc,
            "epoch_time": train_time, "compute_time": train_time - exposed - halo.codec_seconds, "comm_time": exposed,
            "hidden_comm_time": halo.hidden_seconds, "halo_time": halo.seconds, "codec_time": halo.codec_seconds,
            "allreduce_time": self.reduce_stats.seconds,
            "bits": self.comm.bits, "bytes_sent": halo.bytes_sent, "bytes_received": halo.bytes_received,
            "fp32_bytes_sent": halo.fp32_bytes_sent, "allreduce_bytes": self.reduce_stats.bytes_sent,
            "pipeline": self.comm.pipeline, "staleness": mode.staleness, "sync_reason": mode.reason,
            "drift_features": _finite_or_none(halo.drift_features),
            "drift_gradients": _finite_or_none(halo.drift_gradients),
            "planned": {"epoch": epoch + 2, "synchronous": planned.synchronous, "reason": planned.reason},
            "eval_time": time.perf_counter() - t1,
        }

    # ---- what the run loop asks of a trainer (sylvie.train.protocol.Trainer) ----

    def state_dict(self) -> dict:
        """Model and optimiser state (the adaptor restarts synchronously: stale halo data is not saved)."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict()}

    def load_state_dict(self, state: dict, next_epoch: int) -> None:
        """Continue from ``state`` at ``next_epoch``, which is synchronous."""
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.adaptor = self._adaptor(start=next_epoch)

    def weights(self) -> dict:
        """A copy of the model's weights (the run loop keeps the best-validation ones)."""
        return copy.deepcopy(self.model.state_dict())

    def summary(self) -> dict:
        """What this trainer adds to the run's summary."""
        return {"setup_bytes": self.setup_bytes}

    def log_lines(self, record: dict, epochs: int, full: bool) -> list[str]:
        """Rank 0's lines for this epoch: the epoch line when ``full``, and the adaptor's plan when it goes
        synchronous."""
        lines = [format_epoch(record, epochs)] if full else []
        planned = record["planned"]
        if self.comm.pipeline and planned["synchronous"] and planned["epoch"] < epochs:
            lines.append(f"staleness adaptor: epoch {planned['epoch'] + 1} will be synchronous ({planned['reason']})")
        return lines


def _finite_or_none(v: float) -> float | None:
    return None if math.isnan(v) else v
