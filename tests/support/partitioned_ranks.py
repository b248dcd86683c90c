"""The ranks of a partition in one process: each rank's halo plan, block and layer-0 rows built from the shards as
the full-graph trainer builds them (without torch.distributed), and training steps of the model on them, joined by
``SimulatedRanks``, the way ``FullGraphTrainer.train_step`` takes them: per epoch the boundary sample, the sampled
block and rows, the halo round with the sample's plan (and the next epoch's), the loss over every training node
divided by the global count, weight gradients summed over the ranks, one Adam step.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from support.simulated_ranks import SimulatedRanks
from sylvie.comm.boundary_sampling import BoundarySample, BoundarySampler
from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.staleness import BoundedStalenessAdaptor
from sylvie.formats.partition_manifest import read_manifest
from sylvie.models import build_model
from sylvie.models.block import Block
from sylvie.models.blocks import halo_subblock, relation_block
from sylvie.partition.shard_format import Shard
from sylvie.partition.shard_reader import read_shard


@dataclass
class SimulatedRank:
    shard: Shard
    plan: HaloPlan
    block: object
    x: torch.Tensor
    labels: torch.Tensor
    train_idx: torch.Tensor


def halo_plan(shards: list[Shard], r: int) -> HaloPlan:
    """Rank ``r``'s halo plan, its send lists from the peers' halo tables."""
    s = shards[r]
    if len(shards) == 1:
        return HaloPlan(torch.zeros(0, dtype=torch.long), [0], [0], s.num_inner, 0)
    sends = [q.halo_owner_index[q.halo_owner == r] for q in shards]  # in q's halo order
    return HaloPlan(torch.tensor(np.concatenate(sends), dtype=torch.long), [len(x) for x in sends],
                    s.halo_counts().tolist(), s.num_inner, s.num_halo)


def dropped_by(shard: Shard, plan: HaloPlan, share: float, seed: int, rank: int, epoch: int) -> np.ndarray:
    """Which of ``shard``'s edges rank ``rank``'s boundary sample of ``epoch`` drops (bool): those from the halo rows
    it does not keep."""
    kept = np.zeros(shard.num_halo, dtype=bool)
    kept[BoundarySampler(plan, share, seed, rank).sample(epoch).halo_kept.numpy()] = True
    src = np.asarray(shard.edge_src)
    gone = src >= shard.num_inner
    gone[gone] = ~kept[src[gone] - shard.num_inner]
    return gone


def rank_graphs(partition_dir, self_loop: bool) -> list[SimulatedRank]:
    """Every rank's plan (send lists from the peers' halo tables), block and layer-0 rows (halo rows from owners)."""
    manifest = read_manifest(partition_dir)
    shards = [read_shard(partition_dir, r, manifest) for r in range(manifest["num_parts"])]
    out = []
    for r, s in enumerate(shards):
        plan = halo_plan(shards, r)
        block = relation_block(s.edge_src, s.edge_dst, s.num_inner + s.num_halo, s.num_inner, True, self_loop,
                               s.in_degree, np.concatenate([s.out_degree, s.halo_out_degree]))
        halo_x = np.stack([shards[o].feat[i] for o, i in zip(s.halo_owner, s.halo_owner_index)]) if s.num_halo \
            else np.zeros((0, s.feat.shape[1]), np.float32)
        x = torch.tensor(np.concatenate([s.feat, halo_x]))
        out.append(SimulatedRank(s, plan, block, x, torch.tensor(s.label), torch.tensor(s.train).nonzero().squeeze(1)))
    return out


def epoch_graph(g: SimulatedRank, sampler: BoundarySampler, epoch: int, force_sampled_path: bool = False):
    """The epoch's block and layer-0 rows, as ``runtime.rank_graph.RankGraph.subgraph`` makes them, and its sample.
    ``force_sampled_path``: build the sub-plan and sub-block even when the sample keeps every row."""
    sample = sampler.sample(epoch)
    if force_sampled_path:
        keep_all = np.ones(g.plan.num_halo, dtype=bool)
        sub = g.plan.restrict(np.ones(len(g.plan.send_index), dtype=bool), keep_all)
        sample = BoundarySample(epoch, sub, sub.halo_rows, False)
    elif sample.every_halo_row:
        return g.block, g.x, sample
    n = g.shard.num_inner
    return halo_subblock(g.block, sample.halo_kept), torch.cat([g.x[:n], g.x[n + sample.halo_kept]]), sample


def _all_reduce(flat: torch.Tensor, world: int, a2a) -> torch.Tensor:
    """Sum over the ranks through the simulated all-to-all (every rank sends all of it to every rank)."""
    recv = torch.empty(world * flat.numel(), dtype=flat.dtype)
    a2a(recv, flat.repeat(world), [flat.numel()] * world, [flat.numel()] * world, False)
    return recv.view(world, -1).sum(0)


def train(graphs: list[SimulatedRank], model_cfg, share: float, epochs: int, bits: int = 32, pipeline: bool = False,
          seed: int = 0, lr: float = 0.01, observe=None, force_sampled_path: bool = False) -> dict:
    """``epochs`` training steps on every rank; returns per epoch the weights it started from, the global loss and
    the summed weight gradients, per rank and epoch the halo bytes sent, and the modes (staleness per epoch).
    ``observe(rank, epoch, exchange)``, if given, is called before each step (to wrap or record)."""
    world = len(graphs)
    torch.manual_seed(seed)
    base = build_model(model_cfg, graphs[0].x.shape[1], graphs[0].shard.num_classes)
    num_train = sum(int(g.train_idx.numel()) for g in graphs)

    def rank_fn(rank, a2a):
        g = graphs[rank]
        model = copy.deepcopy(base)
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
        halo = HaloExchange(g.plan, bits=bits, seed=seed, rank=rank, pipelined=pipeline, all_to_all=a2a)
        sampler = BoundarySampler(g.plan, share, seed, rank)
        adaptor = BoundedStalenessAdaptor(pipeline and world > 1)
        losses, grads, sent, modes, weights = [], [], [], [], []
        for epoch in range(epochs):
            torch.manual_seed(seed * 1_000_003 + epoch * world + rank)
            mode, after = adaptor.mode(epoch), adaptor.mode(epoch + 1)
            keep = not after.synchronous
            block, x, sample = epoch_graph(g, sampler, epoch, force_sampled_path)
            halo.start_epoch()
            halo.begin_round(epoch, fresh=mode.synchronous, keep=keep, plan=sample.plan,
                             next_plan=sampler.sample(epoch + 1).plan if keep else None)
            if observe is not None:
                observe(rank, epoch, halo)
            weights.append(copy.deepcopy(model.state_dict()))
            model.train()
            opt.zero_grad(set_to_none=True)
            logits = model(Block.homogeneous(block), x, lambda rows, layer: [halo(rows[0], layer)])
            loss_sum = F.cross_entropy(logits[g.train_idx], g.labels[g.train_idx], reduction="sum")
            (loss_sum / num_train).backward()
            params = [p for p in model.parameters()]
            flat = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in params]
                             + [loss_sum.detach().reshape(1)])
            flat = _all_reduce(flat, world, a2a)
            offset = 0
            for p in params:
                p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
            losses.append(float(flat[-1]) / num_train)
            grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
            sent.append(halo.stats.bytes_sent)
            modes.append(mode.staleness)
            opt.step()
            adaptor.observe(epoch, float("nan"))
        return {"losses": losses, "grads": grads, "sent": sent, "modes": modes, "weights": weights}

    results = SimulatedRanks(world).run(rank_fn)
    return {**results[0], "sent": [r["sent"] for r in results]}


def dropped_edges(graphs: list[SimulatedRank], share: float, seed: int, epoch: int) -> set[tuple[int, int]]:
    """The (global source, global destination) edges the epoch's samples drop on every rank: those from halo rows
    a rank does not keep."""
    dropped = set()
    for rank, g in enumerate(graphs):
        s = g.shard
        gone = dropped_by(s, g.plan, share, seed, rank, epoch)
        src, dst = np.asarray(s.edge_src), np.asarray(s.edge_dst)
        dropped |= set(zip(s.halo_global_id[src[gone] - s.num_inner].tolist(), s.global_id[dst[gone]].tolist()))
    return dropped
