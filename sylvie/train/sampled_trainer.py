"""Sampled minibatch training on partitioned features (SALIENT++): one rank per part, each holding the whole topology
(memory-mapped) and its own part's feature rows. A step samples a minibatch of the rank's training vertices and
gathers its input rows (its own, cached, or from their owners), prepared ahead in the sampling thread; gradients are
summed over the ranks, each loss divided by the step's global number of seeds, so a step follows the mean loss over
all seeds.
"""
# Sampling: ``sampling/neighbor_sampler.py``; the remote-row cache is chosen at start-up by ``cache.policy`` within
# ``cache.alpha``; uncached rows come as an all-to-all of ids, then of rows at ``sampling.remote_bits``. The sampling
# thread (``sampling/pipeline.py``) runs ``sampling.prefetch`` minibatches ahead and sends each to the training device
# in one copy (``train/sampled_batches.py``). All ranks run the same number of iterations per epoch. Validation and test
# use full neighbourhoods on the rank's part (``RankGraph``), in fp32. Where a row comes from changes nothing but the
# time: with fp32 remote rows, any cache gives the same losses.
#
# Link prediction (``train.task`` link, ``pairs``): a step's minibatch is a batch of the rank's training pairs
# (``sampling/edge_batches.py``: shuffled each epoch, ``sampling.batch_size`` positive pairs, their negatives drawn as
# ``RankPairs`` draws them); its seeds are the pairs' ends and negatives, its blocks sampled without the pairs' edges
# and their reverses (DGL's exclude="reverse_id"), and its loss is the pairs' ``link.loss``, divided by the step's
# global number of scored pairs (bce) or positives (contrastive). Validation and test rank their pairs on full
# neighbourhoods (``RankPairs.metric_counts``), as the full-graph trainer does.
#
# A typed graph samples per relation (``sylvie.sampling.fanouts``), seeds of the target type; its rows live in one
# feature store per node type (``FeaturesByType``), the cache's budget in bytes shared across types by one ranking
# (score per byte). A node type without features learns an embedding table partitioned with its nodes: a step pulls its
# input rows from their owners and pushes their gradients back (``EmbeddingRows``), in the main thread; its rows are
# never cached. A homogeneous graph is the case of one type.
from __future__ import annotations

import copy
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from sylvie.comm.collective import torch_all_to_all
from sylvie.config import section
from sylvie.errors import SylvieError
from sylvie.features.cache_policy import cache_budget, cache_budget_bytes, hottest_first, select_cache
from sylvie.features.embedding_rows import EmbeddingRows
from sylvie.features.features_by_type import FeaturesByType, TypeSpaces
from sylvie.formats.epoch_record import NOT_EVALUATED, BatchEpoch, EpochRecord
from sylvie.graph_types import GraphTypes
from sylvie.models.gnn import build_model
from sylvie.models.link_loss import link_loss_sum, link_targets
from sylvie.models.registry import needs_global_out_degrees, self_loop_edges
from sylvie.partition.shard_format import Shard, Topology
from sylvie.runtime.partitioned_rows import PartitionedWeights
from sylvie.runtime.process_group import Context, sum_over_ranks
from sylvie.runtime.rank_graph import RankGraph, accuracies
from sylvie.runtime.rank_pairs import RankPairs, score_pairs
from sylvie.runtime.type_rows import partitioned_embeddings
from sylvie.sampling.batch_transfer import BatchTransfer, wait
from sylvie.sampling.edge_batches import EdgeBatches
from sylvie.sampling.fanouts import resolve_fanouts
from sylvie.sampling.neighbor_sampler import (
    NeighborSampler,
    batch_sizes,
    simulated_access_counts,
)
from sylvie.sampling.pipeline import SamplingPipeline
from sylvie.sampling.vip import iterations_per_epoch
from sylvie.train.log_line import format_epoch
from sylvie.train.optimiser import Optimiser
from sylvie.train.rank_times import minor_faults, rank_times, rank_times_slots
from sylvie.train.sampled_batches import BatchPreparer, PreparedBatch
from sylvie.train.step import ModelStep, node_loss_sum

SIMULATED_EPOCHS = 2  # the simulation policy's pre-sampled epochs (GNNLab)


def check_sampled_graph(types: GraphTypes, sampling) -> list[tuple[int, ...]]:
    """The fanouts per hop per relation (``resolve_fanouts``); a SylvieError for fanouts that do not fit the graph's
    relations."""
    return resolve_fanouts(sampling.fanouts, types)


class SampledTrainer:
    """``model``, ``train``, ``sampling`` and ``cache`` are the config's sections; ``vip`` this part's VIP
    (``sylvie vip``), needed by the vip policy and used to order the local rows (None: id order)."""

    def __init__(self, ctx: Context, shard: Shard, topology: Topology, model, train, sampling, cache, seed: int,
                 vip: np.ndarray | None, timeout: float, features=None, pairs: RankPairs | None = None, link=None):
        """``timeout``: seconds a collective of the sampling thread may wait for a peer; ``features``: the config's
        features section (the feature store's tiers; defaults if None). ``pairs`` and ``link``: a link-prediction
        run's (``train.task`` link): this rank's pairs and the ``link`` section; its minibatches are then batches of
        pairs, and the model's outputs embeddings, scored by its decoder."""
        self.ctx, self.train_cfg, self.sampling, self.cache, self.seed = ctx, train, sampling, cache, seed
        rank, world = ctx.rank, ctx.world
        offsets = np.asarray(topology.part_offsets, np.int64)
        self.first_id = int(offsets[rank])
        type_feat = list(shard.type_feat) if shard.typed else [shard.feat]
        fanouts = check_sampled_graph(topology.types, sampling)
        # full-neighbourhood evaluation
        self.graph = RankGraph(ctx, shard, self_loop_edges(model), needs_global_out_degrees(model))
        self.pairs, self.link = pairs, link
        # what a batch is cut from: the rank's training vertices, or its training pairs (link prediction)
        train_ids = self.first_id + np.flatnonzero(shard.train) if pairs is None else np.zeros(0, np.int64)
        pair_rows = _training_pairs(pairs, self.first_id, topology) if pairs is not None else None
        counts = torch.zeros(world, dtype=torch.float64)
        counts[rank] = len(train_ids) if pairs is None else len(pair_rows[0])
        counts = sum_over_ranks(counts, ctx.device).long().numpy()  # every rank's number of training vertices (pairs)
        self.num_train_global = int(counts.sum())
        if self.num_train_global == 0:
            raise SylvieError("no part has training vertices: sampled training needs some (check the dataset's "
                              "train split)" if pairs is None else "no part has training pairs: sampled link "
                              "prediction needs some (check the dataset's edge split)")
        self.iterations = iterations_per_epoch(counts, sampling.batch_size)
        self.global_batch = np.sum([batch_sizes(int(c), self.iterations) for c in counts], axis=0)
        self.sampler = NeighborSampler(topology.in_indptr, topology.in_src, fanouts, train_ids, self.iterations,
                                       seed, rank, self_loop=self_loop_edges(model), types=topology.types,
                                       in_relation=topology.in_relation)
        self.edges = None if pairs is None else EdgeBatches(
            *pair_rows, len(topology.types.node_types), self.iterations, seed, rank, pairs.negative_ids)
        if pairs is not None:  # the halo cache policy's: the in-neighbours of the pairs' ends
            train_ids = np.unique(np.concatenate([self.edges.src, self.edges.dst]))
        # the sampling thread's collectives get a process group of their own, with the run's bound on waits
        group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout)) \
            if dist.is_initialized() and world > 1 else None
        self.pipeline = SamplingPipeline(sampling.prefetch, 2 * timeout)
        node_type = topology.node_type(np.arange(topology.num_nodes))
        num_types = len(topology.types.node_types)
        spaces = TypeSpaces(offsets, np.bincount(np.repeat(np.arange(world), np.diff(offsets)) * num_types + node_type,
                                                 minlength=world * num_types))
        # a row's bytes, by type (0: a type without features, whose rows are learnt: never cached)
        widths = np.array([0 if f is None else f.shape[1] * f.itemsize for f in type_feat], np.int64)
        try:
            t0 = time.perf_counter()
            # several node types: a budget in bytes (their rows' widths differ); one type: in rows
            cached = self._select_cache(topology, offsets, train_ids, vip, widths[node_type] if num_types > 1 else None)
            order = [spaces.own_ids(rank, t) for t in range(num_types)]
            if vip is not None:  # hottest first
                order = [hottest_first(vip, ids) for ids in order]
            store = features or section("features")
            self.features = self.pipeline.run(lambda: FeaturesByType(
                rank, spaces, type_feat, order, [cached[node_type[cached] == t] for t in range(num_types)],
                torch_all_to_all(group), sampling.remote_bits, seed, store.gpu_fraction, store.zero_copy,
                ctx.device), "cache fill")
        except BaseException:
            self.pipeline.close()
            raise
        self.cache_seconds = time.perf_counter() - t0
        totals = sum_over_ranks(torch.tensor([float(self.features.num_cached), float(self.features.fill_bytes)],
                                             dtype=torch.float64), ctx.device)
        self.cache_rows, self.setup_bytes = int(totals[0]), self.graph.setup_bytes + int(totals[1])
        self.labels = torch.tensor(shard.label) if pairs is None else None
        # at most prefetch + 1 batches are alive (sampling/pipeline.py); one buffer more, so none is written in use
        self.preparer = BatchPreparer(self.sampler, self.features, self.labels, self.first_id,
                                      BatchTransfer(ctx.device, sampling.prefetch + 2))
        torch.manual_seed(seed)  # identical initial weights on every rank
        ids = self.graph.rows.embedding_ids(shard)  # a type without features: a table partitioned with its nodes
        self.model = build_model(model, self.graph.feature_widths, shard.num_classes, types=topology.types,
                                 embedding_rows=ids, seed=seed, link=link if pairs is not None else None).to(ctx.device)
        # link prediction: the node types pairs end in, whose seeds' embeddings the model gives
        self.pair_types = sorted({t for r in range(len(topology.types.relations)) for t in topology.types.ends(r)})
        # the embedding rows a step needs are pulled from their owners, their gradients pushed back
        self.embedded = {t: EmbeddingRows(rank, spaces.offsets[t], self.model.embeddings[str(t)].weight)
                         for t in range(num_types) if ids[t] is not None}
        self.weights_of = PartitionedWeights(self.model, partitioned_embeddings(shard, ids, ctx.device))
        self.spaces = spaces
        self.opt = Optimiser(self.model.parameters(), train)
        self.step = ModelStep(self.model, self.opt, seed, world, rank)

    def _select_cache(self, topology: Topology, offsets: np.ndarray, train_ids: np.ndarray,
                      vip: np.ndarray | None, row_bytes: np.ndarray | None) -> np.ndarray:
        """The remote vertices to cache; ``row_bytes`` (a typed graph's): each vertex's row bytes, the budget
        bytes."""
        policy, rank = self.cache.policy, self.ctx.rank
        budget = cache_budget(self.cache.alpha, topology.num_nodes, self.ctx.world) if row_bytes is None else \
            cache_budget_bytes(self.cache.alpha, float(row_bytes.sum()), self.ctx.world)
        cacheable = None if row_bytes is None or (row_bytes > 0).all() else row_bytes > 0
        if policy == "none" or budget == 0:
            return np.zeros(0, dtype=np.int64)
        access = None
        if policy == "simulation":
            access = self.pipeline.run(lambda: simulated_access_counts(self.sampler, SIMULATED_EPOCHS,
                                                                       topology.num_nodes, edges=self.edges),
                                       "pre-sampling", local=True)
        return select_cache(policy, rank, offsets, budget, vip=vip, access_counts=access,
                            in_indptr=topology.in_indptr, in_src=topology.in_src, train_nodes=train_ids,
                            seed=self.seed, row_bytes=row_bytes, cacheable=cacheable)

    # ---- one epoch ----

    def train_step(self, epoch: int, batch: PreparedBatch) -> float:
        """One optimisation step on ``batch``, the optimiser's step taken here; the loss summed over all ranks' seeds
        of that step."""
        pulled = {}  # a type without features: (its input ids in the type's space, the rows pulled for them)
        if self.embedded:
            inputs = torch.split(batch.input_nodes, list(batch.input_counts()))
            for t, rows in self.embedded.items():
                ids = torch.from_numpy(self.spaces.type_ids(inputs[t].numpy(), t))
                pulled[t] = (ids, rows.pull(ids))

        wait(batch.ready)  # the batch's copy (and the rows the GPU gathered for it) is done

        def forward():
            xs = [pulled[t][1] if t in pulled else x for t, x in enumerate(batch.x)]
            if batch.pairs is None:
                return node_loss_sum(self.model(batch.blocks, xs), batch.labels)
            return self._pairs_loss_sum(batch, xs)

        def push():  # the pulled rows' gradients to their owners, into their tables' gradients
            for t, (ids, rows) in pulled.items():
                self.embedded[t].push(ids, rows)

        # dropout masks depend only on (seed, step, rank): a resumed run repeats them
        loss = self.step.forward_backward(epoch * self.iterations + batch.index, epoch, forward,
                                          self._step_targets(batch.index), push if pulled else None)
        self.opt.step()
        return loss

    def _step_targets(self, index: int) -> float:
        """What step ``index``'s summed loss is divided by: its seeds over all ranks, or (link prediction) what
        ``link.loss`` averages over of its pairs over all ranks."""
        if self.pairs is None:
            return float(self.global_batch[index])
        return float(link_targets(self.link.loss, int(self.global_batch[index]), self.link.negatives))

    def _pairs_loss_sum(self, batch: PreparedBatch, xs: list) -> torch.Tensor:
        """A link batch's summed loss: its seeds' embeddings (each node type's, in type order), its pairs scored."""
        h = self.model(batch.blocks, xs, out_types=self.pair_types)
        some = next(y for y in h if y is not None)  # a type no pair ends in has no seeds: no rows
        seeds = torch.cat([y if y is not None else some.new_zeros(n, some.shape[1])
                           for y, n in zip(h, batch.blocks[-1].num_dst, strict=True)])
        p = batch.pairs
        pos, neg = score_pairs(self.model.decoder, seeds[p.src_at], seeds[p.dst_at], seeds[p.neg_at], p.relation)
        return link_loss_sum(self.link.loss, pos, neg)

    def epoch(self, epoch: int, evaluate: bool = True) -> EpochRecord:
        faults = minor_faults()
        self.step.stats.reset()  # each part keeps its own account of the epoch
        self.features.begin_epoch()
        for rows in self.embedded.values():
            rows.stats.reset()
        self.preparer.begin_epoch()
        self.pipeline.begin_epoch()
        lr = self.opt.lr
        t0 = time.perf_counter()
        plan = self.sampler.epoch_seeds(epoch) if self.edges is None else self.edges.epoch(epoch)
        batches = self.pipeline.map(self.preparer.producer(epoch, plan), self.iterations)
        losses = []  # each step in this frame (no generator's between the epoch and the step); summed as ever
        try:
            for batch in batches:
                losses.append(self.train_step(epoch, batch))
        finally:
            batches.close()  # on an error: what is queued is dropped now, not when the traceback is freed
        loss_total = sum(losses)
        epoch_time = time.perf_counter() - t0
        self.opt.end_epoch()
        waited, reduce = self.pipeline.waited, self.step.stats
        # the evaluation's counts travel in the epoch's one all-reduce of the feature store's account (all ranks)
        t1 = time.perf_counter()
        counts = None
        if evaluate:  # link prediction: the pairs' MRR (or Hits@50) on full neighbourhoods
            counts = self.graph.accuracy_counts(self.model) if self.pairs is None else \
                self.pairs.metric_counts(self.graph.pair_ends(self.model), self.model.decoder)
        eval_seconds = time.perf_counter() - t1
        compute, wait = max(0.0, epoch_time - waited - reduce.seconds), waited + reduce.seconds
        times = rank_times_slots(self.ctx.rank, self.ctx.world, compute, wait, self.ctx.device,
                                 minor_faults() - faults)
        # the embedding rows' pulls and pushes: bytes sent and received, all ranks' (in the same collective)
        learnt = torch.tensor([float(sum(r.stats.bytes_sent for r in self.embedded.values())),
                               float(sum(r.stats.bytes_received for r in self.embedded.values()))],
                              dtype=torch.float64, device=self.ctx.device)
        fetch = self.features.end_epoch(self.ctx.device,
                                        extra=[learnt, times] if counts is None else [learnt, counts, times])
        learnt_sent, learnt_received = (int(x) for x in learnt.tolist())
        acc = accuracies(counts) if evaluate else NOT_EVALUATED
        rows = fetch.rows
        return EpochRecord(
            epoch=epoch, mode="sampled", loss=loss_total / self._epoch_targets(), lr=lr, **acc, **rank_times(times),
            epoch_time=epoch_time, compute_time=compute, comm_time=wait,
            hidden_comm_time=max(0.0, self.preparer.sample_seconds + fetch.seconds - waited), codec_time=0.0,
            allreduce_time=reduce.seconds, sample_time=self.preparer.sample_seconds,
            eval_time=eval_seconds, bits=self.sampling.remote_bits, bytes_sent=fetch.bytes_sent + learnt_sent,
            bytes_received=fetch.bytes_received + learnt_received, fp32_bytes_sent=fetch.fp32_bytes_sent + learnt_sent,
            allreduce_bytes=reduce.bytes_sent, metric="accuracy" if self.pairs is None else self.pairs.metric,
            batches=BatchEpoch(
                minibatches=self.iterations,
                input_rows_per_batch=(rows.local + rows.cached + rows.remote) / (self.iterations * self.ctx.world),
                rows_local=rows.local, rows_cached=rows.cached, rows_remote=rows.remote,
                cache_hit_rate=fetch.cache_hit_rate, remote_bytes=fetch.bytes_sent,
                store_device_bytes=fetch.store_device_bytes, store_host_bytes=fetch.store_host_bytes,
                fetch_time=fetch.seconds, fetch_wait_time=waited))

    def _epoch_targets(self) -> int:
        """What the epoch's summed loss is divided by: every rank's training vertices, or their pairs' targets."""
        return self.num_train_global if self.pairs is None else self.pairs.num_targets

    # ---- what the run loop asks of a trainer (sylvie.train.protocol.Trainer) ----

    def state_dict(self) -> dict:
        """Model, optimiser and lr schedule (sampling is seeded per epoch and minibatch: nothing else to save),
        embedding tables whole; collective."""
        return self.weights_of.state_dict(self.opt.state_dict())

    def load_state_dict(self, state: dict, next_epoch: int) -> None:
        self.opt.load_state_dict(self.weights_of.load(state))

    def weights(self) -> dict:
        """A copy of the weights, embedding tables whole; collective."""
        return copy.deepcopy(self.weights_of.whole(self.model.state_dict()))

    def summary(self) -> dict:
        return {"setup_bytes": self.setup_bytes, "cache_rows": self.cache_rows, "cache_seconds": self.cache_seconds,
                "minibatches_per_epoch": self.iterations}

    def log_lines(self, record: EpochRecord, epochs: int, full: bool) -> list[str]:
        if not full:
            return []
        b = record.batches
        hit = b.cache_hit_rate
        return [format_epoch(record, epochs) + f" | {b.minibatches} batches, {b.input_rows_per_batch:.0f} rows/batch, "
                f"cache hits {'–' if hit is None else f'{hit:.0%}'} | sampling {record.sample_time:.3f} s, "
                f"fetching {b.fetch_time:.3f} s (ahead), waited {b.fetch_wait_time:.3f} s, "
                f"computing {record.compute_time:.3f} s"]

    def close(self) -> None:
        self.pipeline.close()


def _training_pairs(pairs: RankPairs, first_id: int, topology: Topology) -> tuple:
    """``EdgeBatches``' view of this rank's training pairs (on the host): their numbers, sources and destinations
    (partition ids), relations (None: one relation) and each end's node type."""
    train = pairs.splits["train"]
    relation = None if train.relation is None else train.relation.cpu().numpy()
    types = topology.types
    src_type = np.array([types.ends(r)[0] for r in range(len(types.relations))], np.int64)[
        np.zeros(len(train.number), np.int64) if relation is None else relation]
    return (train.number, train.src.cpu().numpy() + first_id, train.dst.cpu().numpy(), relation, src_type,
            train.dst_type)
