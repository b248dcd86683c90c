"""Sampled minibatch training on partitioned features (SALIENT++): one rank per part.

Every rank holds the whole topology (memory-mapped) and its own part's feature rows. Each iteration, every rank
samples a minibatch of its own training vertices with DGL's neighbour sampler and gathers the rows of its input
vertices: its own, from its cache of remote rows (chosen at start-up by ``cache.policy`` within ``cache.alpha``),
or from their owners (an all-to-all of ids, then of rows at ``sampling.remote_bits``). Sampling and fetching run
``sampling.prefetch`` minibatches ahead in the sampling thread (``sampling/pipeline.py``). All ranks run the same
number of iterations per epoch; the weight gradients are summed over the ranks, each rank's loss divided by the
iteration's global number of seeds, so a step follows the gradient of the mean loss over all ranks' seeds.
Validation and test use full neighbourhoods (``RankGraph``), in fp32.

Where a row comes from changes nothing but the time: with fp32 remote rows, any cache gives the same losses.
"""
from __future__ import annotations

import copy
import math
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from sylvie.comm.collective import torch_all_to_all
from sylvie.comm.stats import CommStats
from sylvie.config import section
from sylvie.errors import SylvieError
from sylvie.features.cache_policy import cache_budget, local_order, select_cache
from sylvie.features.rank_features import GatherCounts, RankFeatures
from sylvie.models import build_model
from sylvie.partition.shard_format import Shard, Topology
from sylvie.runtime.process_group import Context, sum_over_ranks
from sylvie.runtime.rank_graph import SPLITS, RankGraph
from sylvie.sampling.neighbor_sampler import (
    NeighborSampler,
    batch_sizes,
    graph_for_sampling,
    sample_in_this_thread_only,
    simulated_access_counts,
)
from sylvie.sampling.pipeline import SamplingPipeline
from sylvie.sampling.vip import iterations_per_epoch
from sylvie.train.metrics import format_epoch
from sylvie.train.step import TrainingDiverged, all_reduce_gradients

SIMULATED_EPOCHS = 2  # the simulation policy's pre-sampled epochs (GNNLab)


class SampledTrainer:
    """``model``, ``train``, ``sampling`` and ``cache`` are the config's typed sections; ``vip`` this part's VIP
    (``sylvie vip``), needed by the vip policy and used to order the local rows (None: id order)."""

    def __init__(self, ctx: Context, shard: Shard, topology: Topology, model, train, sampling, cache, seed: int,
                 vip: np.ndarray | None, timeout: float, features=None):
        """``timeout``: seconds a collective of the sampling thread may wait for a peer; ``features``: the config's
        features section (the feature store's tiers; defaults if None)."""
        self.ctx, self.train_cfg, self.sampling, self.cache, self.seed = ctx, train, sampling, cache, seed
        rank, world = ctx.rank, ctx.world
        offsets = np.asarray(topology.part_offsets, np.int64)
        self.first_id = int(offsets[rank])
        self.graph = RankGraph(ctx, shard, model.self_loop)  # full-neighbourhood evaluation
        train_ids = self.first_id + np.flatnonzero(shard.train)
        counts = torch.zeros(world, dtype=torch.float64)
        counts[rank] = len(train_ids)
        counts = sum_over_ranks(counts, ctx.device).long().numpy()  # every rank's number of training vertices
        self.num_train_global = int(counts.sum())
        if self.num_train_global == 0:
            raise SylvieError("no part has training vertices: sampled training needs some (check the dataset's "
                              "train split)")
        self.iterations = iterations_per_epoch(counts, sampling.batch_size)
        self.global_batch = np.sum([batch_sizes(int(c), self.iterations) for c in counts], axis=0)
        self.sampler = NeighborSampler(graph_for_sampling(topology.in_indptr, topology.in_src, model.self_loop),
                                       sampling.fanouts, train_ids, self.iterations, seed, rank)
        # the sampling thread's collectives get a process group of their own, with the run's bound on waits
        group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout)) \
            if dist.is_initialized() and world > 1 else None
        self.pipeline = SamplingPipeline(sampling.prefetch, 2 * timeout, initializer=sample_in_this_thread_only)
        try:
            t0 = time.perf_counter()
            cached = self._select_cache(topology, offsets, train_ids, vip)
            order = local_order(vip, rank, offsets) if vip is not None else np.arange(offsets[rank], offsets[rank + 1])
            store = features or section("features")
            self.features = self.pipeline.run(lambda: RankFeatures(
                rank, offsets, shard.feat, order, cached, torch_all_to_all(group), sampling.remote_bits, seed,
                store.gpu_fraction, store.zero_copy, ctx.device), "cache fill")
        except BaseException:
            self.pipeline.close()
            raise
        self.cache_seconds = time.perf_counter() - t0
        totals = sum_over_ranks(torch.tensor([float(self.features.num_cached),
                                              float(self.features.fill_stats.bytes_sent)], dtype=torch.float64),
                                ctx.device)
        self.cache_rows, self.setup_bytes = int(totals[0]), self.graph.setup_bytes + int(totals[1])
        self.labels = torch.tensor(shard.label)
        self.reduce_stats = CommStats()
        torch.manual_seed(seed)  # identical initial weights on every rank
        self.model = build_model(model, shard.feat.shape[1], shard.num_classes).to(ctx.device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=train.lr, weight_decay=train.weight_decay)

    def _select_cache(self, topology: Topology, offsets: np.ndarray, train_ids: np.ndarray,
                      vip: np.ndarray | None) -> np.ndarray:
        policy, rank = self.cache.policy, self.ctx.rank
        budget = cache_budget(self.cache.alpha, topology.num_nodes, self.ctx.world)
        if policy == "none" or budget == 0:
            return np.zeros(0, dtype=np.int64)
        access = None
        if policy == "simulation":
            access = self.pipeline.run(lambda: simulated_access_counts(self.sampler, SIMULATED_EPOCHS,
                                                                       topology.num_nodes), "pre-sampling", local=True)
        return select_cache(policy, rank, offsets, budget, vip=vip, access_counts=access,
                            in_indptr=topology.in_indptr, in_src=topology.in_src, train_nodes=train_ids,
                            seed=self.seed)

    # ---- one epoch ----

    def _produce(self, epoch: int, seeds: list[np.ndarray]):
        def produce(i: int):
            t0 = time.perf_counter()
            mb = self.sampler.sample(seeds[i], epoch, i)
            t1 = time.perf_counter()
            x, counts = self.features.gather(mb.input_nodes, key=(epoch, i))
            return mb, x, counts, t1 - t0, time.perf_counter() - t1
        return produce

    def _train_batches(self, epoch: int, batches, rows: GatherCounts) -> tuple[float, float, float]:
        """The epoch's optimisation steps; returns the sum of the loss over all ranks' seeds and this rank's
        sampling and fetching seconds."""
        dev, world, rank = self.ctx.device, self.ctx.world, self.ctx.rank
        loss_total, sample_s, fetch_s = 0.0, 0.0, 0.0
        for i, (mb, x, counts, ts, tf) in enumerate(batches):
            rows.add(counts)
            sample_s, fetch_s = sample_s + ts, fetch_s + tf
            # dropout masks depend only on (seed, epoch, iteration, rank): a resumed run repeats them
            torch.manual_seed(self.seed * 1_000_003 + (epoch * self.iterations + i) * world + rank)
            self.model.train()
            self.opt.zero_grad(set_to_none=True)
            logits = self.model([b.to(dev) for b in mb.blocks], x.to(dev))
            loss_sum = F.cross_entropy(logits, self.labels[mb.seeds - self.first_id].to(dev), reduction="sum")
            (loss_sum / float(self.global_batch[i])).backward()
            loss_here = loss_sum.detach().reshape(1).to(torch.float32).clone()
            grads_finite = all_reduce_gradients(self.model, self.reduce_stats, extra=loss_here)
            loss_total += float(loss_here)
            if not (math.isfinite(loss_total) and grads_finite):  # all-reduced: every rank stops here
                raise TrainingDiverged(epoch, loss_total / self.num_train_global, self.train_cfg.lr, grads_finite)
            self.opt.step()
        return loss_total, sample_s, fetch_s

    def epoch(self, epoch: int, evaluate: bool = True) -> dict:
        world = self.ctx.world
        self.reduce_stats.reset()
        self.features.stats.reset()
        served = self.features.store.bytes_served
        served.update({tier: 0 for tier in served})
        self.pipeline.waited = 0.0
        rows = GatherCounts()
        t0 = time.perf_counter()
        seeds = self.sampler.epoch_seeds(epoch)
        batches = self.pipeline.map(self._produce(epoch, seeds), self.iterations)
        try:
            loss_total, sample_s, fetch_s = self._train_batches(epoch, batches, rows)
        finally:
            batches.close()  # on an error: what is queued is dropped now, not when the traceback is freed
        epoch_time = time.perf_counter() - t0
        waited = self.pipeline.waited
        fetch = self.features.stats
        totals = sum_over_ranks(torch.tensor(
            [rows.local, rows.cached, rows.remote, fetch.bytes_sent, fetch.fp32_bytes_sent, fetch.bytes_received,
             served["device"], served["host"]], dtype=torch.float64), self.ctx.device).tolist()
        t1 = time.perf_counter()
        acc = self.graph.accuracy(self.model) if evaluate else {f"{s}_acc": None for s in SPLITS}
        inputs = totals[0] + totals[1] + totals[2]
        return {
            "epoch": epoch, "loss": loss_total / self.num_train_global, **acc, "mode": "sampled",
            "epoch_time": epoch_time, "minibatches": self.iterations,
            "input_rows_per_batch": inputs / (self.iterations * world),
            "rows_local": int(totals[0]), "rows_cached": int(totals[1]), "rows_remote": int(totals[2]),
            "cache_hit_rate": totals[1] / (totals[1] + totals[2]) if totals[1] + totals[2] else None,
            "remote_bytes": int(totals[3]), "bytes_sent": int(totals[3]), "fp32_bytes_sent": int(totals[4]),
            "bytes_received": int(totals[5]), "bits": self.sampling.remote_bits,
            "store_device_bytes": int(totals[6]), "store_host_bytes": int(totals[7]),
            "sample_time": sample_s, "fetch_time": fetch_s, "fetch_wait_time": waited,
            "compute_time": max(0.0, epoch_time - waited - self.reduce_stats.seconds),
            "allreduce_time": self.reduce_stats.seconds, "allreduce_bytes": self.reduce_stats.bytes_sent,
            "comm_time": waited + self.reduce_stats.seconds,
            "hidden_comm_time": max(0.0, sample_s + fetch_s - waited), "codec_time": 0.0,
            "eval_time": time.perf_counter() - t1,
        }

    # ---- what the run loop asks of a trainer (sylvie.train.protocol.Trainer) ----

    def state_dict(self) -> dict:
        """Model and optimiser (sampling is seeded per epoch and minibatch: nothing else to save)."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict()}

    def load_state_dict(self, state: dict, next_epoch: int) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])

    def weights(self) -> dict:
        return copy.deepcopy(self.model.state_dict())

    def summary(self) -> dict:
        return {"setup_bytes": self.setup_bytes, "cache_rows": self.cache_rows, "cache_seconds": self.cache_seconds,
                "minibatches_per_epoch": self.iterations}

    def log_lines(self, record: dict, epochs: int, full: bool) -> list[str]:
        if not full:
            return []
        hit = record["cache_hit_rate"]
        return [format_epoch(record, epochs) + f" | {record['minibatches']} batches, "
                f"{record['input_rows_per_batch']:.0f} rows/batch, cache hits "
                f"{'–' if hit is None else f'{hit:.0%}'}"]

    def close(self) -> None:
        self.pipeline.close()
