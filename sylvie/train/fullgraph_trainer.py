"""Full-graph, partition-parallel training: one rank per partition, holding its inner rows and receiving its halo rows
per layer from their owners (fp32 and synchronous by default, quantized with ``comm.bits``, pipelined with
``comm.pipeline`` under the Bounded Staleness Adaptor). Each rank's loss over its training nodes is divided by the
*global* number of training nodes, so the summed weight gradients equal those of the whole-graph mean loss.
"""
# With ``train.boundary_sampling`` p < 1 (BNS-GCN) every epoch trains on the partition less the halo rows that epoch's
# sample drops (``sylvie.comm.boundary_sampling``), and its halo exchanges carry only the kept rows; the loss is still
# over every training node, and evaluation uses the whole partition. The embedding tables of a typed graph's node types
# without features are partitioned with their nodes: their gradients are not summed over the ranks, and a model file or
# a checkpoint holds them whole (``runtime.partitioned_rows``).
from __future__ import annotations

import copy
import math
import time

import torch

from sylvie.comm.boundary_sampling import BoundarySampler
from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.staleness import BoundedStalenessAdaptor
from sylvie.comm.stats import CommStats
from sylvie.config import check_boundary_sampling
from sylvie.formats.epoch_record import NOT_EVALUATED, EpochRecord, HaloEpoch, PlannedEpoch
from sylvie.models.gnn import build_model
from sylvie.models.registry import needs_global_out_degrees, self_loop_edges
from sylvie.partition.shard_format import Shard
from sylvie.runtime.partitioned_rows import PartitionedWeights
from sylvie.runtime.process_group import Context
from sylvie.runtime.rank_graph import RankGraph, accuracies
from sylvie.runtime.rank_pairs import RankPairs
from sylvie.runtime.type_rows import partitioned_embeddings
from sylvie.train.log_line import format_epoch
from sylvie.train.optimiser import Optimiser
from sylvie.train.rank_times import minor_faults, rank_times, rank_times_slots
from sylvie.train.step import ModelStep, node_loss_sum


class FullGraphTrainer:
    """``comm.bits`` quantizes the training exchanges of layers >= 1 (Low-bit Module); evaluation exchanges in
    fp32 and synchronously, so accuracies measure the model, not the wire. ``model``, ``train`` and ``comm`` are
    the config's sections; ``seed`` the run's seed."""

    def __init__(self, ctx: Context, shard: Shard, model, train, comm, seed: int, pairs: RankPairs | None = None,
                 link=None):
        """``pairs`` and ``link``: a link-prediction run's (``train.task`` link): this rank's pairs and the ``link``
        section; the model's outputs are then embeddings, scored by its decoder."""
        check_boundary_sampling(train, comm, "sylvie train")
        self.ctx, self.train_cfg, self.comm, self.seed = ctx, train, comm, seed
        dev = ctx.device
        self.graph = RankGraph(ctx, shard, self_loop_edges(model), needs_global_out_degrees(model))
        self.halo = HaloExchange(self.graph.plan, CommStats(), comm.bits, seed, ctx.rank, pipelined=comm.pipeline,
                                 smoothing=comm.smoothing, gradient_bits=comm.gradient_bits)
        self.adaptor = self._adaptor(start=0)
        self.sampler = BoundarySampler(self.graph.plan, train.boundary_sampling, seed, ctx.rank)
        self.sample_seconds = 0.0
        self.setup_bytes = self.graph.setup_bytes
        self.labels = self.graph.labels
        self.train_idx = self.graph.masks["train"].nonzero().squeeze(1)
        self.pairs = pairs
        self.num_targets = shard.num_train_global if pairs is None else pairs.num_targets
        torch.manual_seed(seed)  # identical initial weights on every rank
        ids = self.graph.rows.embedding_ids(shard)  # rank-local weights: the embedding rows of this rank's nodes
        self.model = build_model(model, self.graph.feature_widths, shard.num_classes, types=self.graph.types,
                                 embedding_rows=ids, seed=seed, link=link if pairs is not None else None).to(dev)
        self.whole_halo = self.model_halo = self.graph.halo(self.halo, model.layers)
        self.weights_of = PartitionedWeights(self.model, partitioned_embeddings(shard, ids, dev))
        self.opt = Optimiser(self.model.parameters(), train)
        self.step = ModelStep(self.model, self.opt, seed, ctx.world, ctx.rank)

    def _adaptor(self, start: int) -> BoundedStalenessAdaptor:
        c = self.comm
        return BoundedStalenessAdaptor(c.pipeline and self.ctx.world > 1, c.staleness, c.staleness_policy,
                                       c.drift_tolerance, start=start)

    def train_step(self, epoch: int, batch=None) -> float:
        """One full-graph step (the epoch's only one, over the whole partition: no ``batch``), the optimiser's step
        taken here; returns the global mean training loss."""
        fresh, keep = self.adaptor.mode(epoch).synchronous, not self.adaptor.mode(epoch + 1).synchronous

        def forward():
            block, x = self._epoch_graph(epoch, fresh, keep)
            if self.pairs is None:
                logits = self.model(block, x, self.model_halo)
                return node_loss_sum(logits[self.train_idx], self.labels[self.train_idx])
            own = self.graph.pair_ends(self.model, block, x, self.model_halo)
            return self.pairs.loss_sum(own, self.model.decoder, epoch)

        loss = self.step.forward_backward(epoch, epoch, forward, self.num_targets)
        self.opt.step()
        return loss / self.num_targets

    def _epoch_graph(self, epoch: int, fresh: bool, keep: bool):
        """The epoch's block and layer-0 rows (the whole partition, or its boundary sample), its halo round
        begun with the sample's plan (and the next epoch's, to send ahead for it when this epoch keeps data)."""
        t0 = time.perf_counter()
        sample = self.sampler.sample(epoch)
        ahead = self.sampler.sample(epoch + 1).plan if keep else None
        if sample.every_halo_row:
            block, x, self.model_halo = self.graph.block, self.graph.x, self.whole_halo
        else:  # each type's kept halo rows, found once for the block and the halo rows
            kept = self.graph.rows.kept(sample.halo_kept)
            block, x = self.graph.subgraph(kept[0])
            self.model_halo = self.whole_halo.sampled(*kept)
        self.sample_seconds = time.perf_counter() - t0  # what sampling costs the epoch (recorded as sample_time)
        self.halo.begin_round(epoch, fresh=fresh, keep=keep, plan=sample.plan, next_plan=ahead)
        return block, x

    def epoch(self, epoch: int, evaluate: bool = True) -> EpochRecord:
        """Train one epoch and (if ``evaluate``) evaluate; returns its record, accuracies None when not evaluated
        (and schedules epoch + 2)."""
        faults = minor_faults()
        self.halo.start_epoch()
        self.step.stats.reset()
        if self.pairs is not None:
            self.pairs.stats.reset()
        mode = self.adaptor.mode(epoch)
        lr = self.opt.lr
        t0 = time.perf_counter()
        loss = self.train_step(epoch)
        train_time = time.perf_counter() - t0
        self.opt.end_epoch()
        # the evaluation's counts travel in the epoch's one all-reduce of traffic and drift (all ranks)
        t1 = time.perf_counter()
        counts = None
        if evaluate:
            counts = self.graph.accuracy_counts(self.model) if self.pairs is None else \
                self.pairs.metric_counts(self.graph.pair_ends(self.model), self.model.decoder)
        eval_seconds = time.perf_counter() - t1
        reduce, own = self.step.stats, self.halo.stats
        pair = self.pairs.stats if self.pairs is not None else CommStats()  # the pairs' remote ends and gradients
        exposed = own.seconds + reduce.seconds + pair.seconds  # this rank's wait on its peers
        compute = train_time - exposed - own.codec_seconds
        times = rank_times_slots(self.ctx.rank, self.ctx.world, compute, exposed, self.ctx.device,
                                 minor_faults() - faults)
        # the pairs' traffic (this rank's), summed over the ranks in the same collective
        pair_bytes = torch.tensor([pair.bytes_sent, pair.bytes_received, pair.fp32_bytes_sent], dtype=torch.float64,
                                  device=times.device)
        halo = self.halo.end_epoch(extra=[times, pair_bytes] if counts is None else [counts, times, pair_bytes])
        pair_sent, pair_received, pair_fp32 = (int(b) for b in pair_bytes.tolist())
        acc = accuracies(counts) if evaluate else NOT_EVALUATED  # link prediction: MRR (pairs' counts)
        planned = self.adaptor.observe(epoch, halo.drift_features)
        return EpochRecord(
            epoch=epoch, mode="full", loss=loss, lr=lr, **acc, **rank_times(times),
            epoch_time=train_time, compute_time=compute, comm_time=exposed,
            hidden_comm_time=halo.hidden_seconds, codec_time=halo.codec_seconds, allreduce_time=reduce.seconds,
            sample_time=self.sample_seconds, eval_time=eval_seconds,
            bits=self.comm.bits, bytes_sent=halo.bytes_sent + pair_sent, bytes_received=halo.bytes_received
            + pair_received, fp32_bytes_sent=halo.fp32_bytes_sent + pair_fp32, allreduce_bytes=reduce.bytes_sent,
            metric="accuracy" if self.pairs is None else self.pairs.metric,
            halo=HaloEpoch(
                halo_time=halo.seconds, pipeline=self.comm.pipeline, staleness=mode.staleness,
                sync_reason=mode.reason, boundary_sampling=self.train_cfg.boundary_sampling,
                drift_features=_finite_or_none(halo.drift_features),
                drift_gradients=_finite_or_none(halo.drift_gradients),
                planned=PlannedEpoch(epoch + 2, planned.synchronous, planned.reason),
                gradient_bits=self.halo.gradient_bits))

    # ---- what the run loop asks of a trainer (sylvie.train.protocol.Trainer) ----

    def state_dict(self) -> dict:
        """Model, optimiser and lr schedule state (the adaptor restarts synchronously: stale halo data is not saved),
        partitioned weights whole; collective: every rank calls it."""
        return self.weights_of.state_dict(self.opt.state_dict())

    def load_state_dict(self, state: dict, next_epoch: int) -> None:
        """Continue from ``state`` at ``next_epoch``, which is synchronous."""
        self.opt.load_state_dict(self.weights_of.load(state))
        self.adaptor = self._adaptor(start=next_epoch)

    def weights(self) -> dict:
        """A copy of the model's weights, partitioned ones whole (the run loop keeps the best-validation ones);
        collective: every rank calls it."""
        return copy.deepcopy(self.weights_of.whole(self.model.state_dict()))

    def summary(self) -> dict:
        """What this trainer adds to the run's summary."""
        return {"setup_bytes": self.setup_bytes}

    def log_lines(self, record: EpochRecord, epochs: int, full: bool) -> list[str]:
        """Rank 0's lines for this epoch: the epoch line when ``full``, and the adaptor's plan when it goes
        synchronous."""
        lines = [format_epoch(record, epochs)] if full else []
        planned = record.halo.planned
        if self.comm.pipeline and planned.synchronous and planned.epoch < epochs:
            lines.append(f"staleness adaptor: epoch {planned.epoch + 1} will be synchronous ({planned.reason})")
        return lines

    def close(self) -> None:
        """Nothing runs in the background between epochs."""


def _finite_or_none(v: float) -> float | None:
    return None if math.isnan(v) else v
