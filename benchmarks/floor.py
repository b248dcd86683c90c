"""A rank's training compute against its floor: our model against the same math in plain DGL / torch.

    python benchmarks/floor.py                          # 50K nodes, avg degree 20, 4 METIS parts, 3 x 64
    python benchmarks/floor.py --record

For every rank of a 4-part METIS partition and every architecture (gcn, sage, gat), one training step's forward
and backward (loss: cross-entropy summed over the rank's training rows, divided by the global number of training
rows, as the trainer does) on that rank's block (``local_block``: in-edges by destination, int32 ids, global degrees,
self-loops; the floor: a DGL block of the same in-edges, CSC only, int32 ids):

- **ours**: ``sylvie.models.GNN`` (our block and numba kernels, no DGL), asking for its halo rows before every
  layer >= 1 through the trainer's own halo exchange (``HaloExchange``, fp32: the gather of the rows peers need,
  the ``HaloRows`` autograd function, the scatter-add of the gradients peers return) whose all-to-all is a
  stand-in: it copies prepared rows into the receive buffer (no communication; the same shape and bytes as the
  real one would receive).
- **floor**: the same layers written the way a DGL user writes them: GCN's symmetric normalisation as node
  factors from the global degrees, computed once, around a sum aggregation (``dgl.ops.copy_u_sum``, as DGL's
  ``GraphConv(norm='both')`` does it), on the layer's ``GraphConv`` weight and bias (``--gcn-floor edge-weights``:
  DGL's ``GraphConv(norm='none')`` with the products as edge weights, also computed once); ``SAGEConv('mean')``;
  ``GATConv`` (on the block allowed an edge list, made once); ``F.dropout`` and ``torch.cat`` of the inner and halo
  rows; no autograd function of its own. Its halo rows come from the same exchange stand-in (so the exchange's own
  work is the same on both sides, and the ratio is the model's).

Both have the same parameter shapes and weights; before timing, the benchmark checks, in float64 and with dropout 0,
that they compute the same loss and the same weight gradients (so the floor really is the same operations). Each
dropout given (``--dropout``, default 0.5 and 0) gets its pair of columns; 0 times every path but dropout's.
Threads (torch, numba and DGL's OpenMP pool): what a rank of ``sylvie launch --ranks PARTS`` gets on this machine
(its OMP_NUM_THREADS). Before 2026-11-27 DGL's pool was left at every core (2 here), so the floor's DGL kernels, and
ours then, which ran on DGL's, had 2 threads where the table says 1. Steps alternate (ours, floor, floor, ours,
...) after warm-up; the table gives the medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import dgl.ops
import numba
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_record_option, publish, synthetic_partition

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.stats import CommStats
from sylvie.formats.partition_manifest import read_manifest
from sylvie.launch.torchrun import plan_geometry, thread_env
from sylvie.models.block import Block
from sylvie.models.blocks import relation_block
from sylvie.models.gnn import GNN
from sylvie.models.state_dict_adapter import one_relation_keys
from sylvie.partition.shard_reader import read_shard

ARCHS = ("gcn", "sage", "gat")


def schema_default(section: str, key: str):
    from sylvie.config import section as make_section
    return getattr(make_section(section, {}), key)


class Rank:
    """What one rank computes with: its block, layer-0 rows (inner + halo), labels, training rows, and the plan
    of its halo exchange (send lists from the other shards' halo tables)."""

    def __init__(self, shards, k: int, self_loop: bool):
        s = shards[k]
        self.block = relation_block(s.edge_src, s.edge_dst, s.num_inner + s.num_halo, s.num_inner, True, self_loop,
                                    s.in_degree, np.concatenate([s.out_degree, s.halo_out_degree]))
        self.dgl_block = dgl_block(self.block)
        halo_x = np.empty((s.num_halo, s.feat.shape[1]), np.float32)
        for j, other in enumerate(shards):
            mine = s.halo_owner == j
            halo_x[mine] = other.feat[s.halo_owner_index[mine]]
        self.x = torch.cat([torch.tensor(s.feat), torch.from_numpy(halo_x)])
        self.labels = torch.tensor(s.label)
        self.train_idx = torch.tensor(s.train).nonzero().squeeze(1)
        self.num_train_global = s.num_train_global
        self.num_inner, self.num_halo = s.num_inner, s.num_halo
        # peer j needs the inner rows of this rank that j's halo table lists as owned by k
        sends = [torch.from_numpy(o.halo_owner_index[o.halo_owner == k].astype(np.int64)) if j != k
                 else torch.zeros(0, dtype=torch.long) for j, o in enumerate(shards)]
        self.plan = HaloPlan(torch.cat(sends), [len(t) for t in sends], s.halo_counts().tolist(), s.num_inner,
                             s.num_halo)
        self.gen = torch.Generator().manual_seed(1000 + k)
        self.prepared: dict[int, torch.Tensor] = {}

    def all_to_all(self, recv, send, recv_sizes, send_sizes, async_op=False):
        """Stand-in for the collective: the receive buffer gets prepared rows (random, fixed per size) as bytes."""
        rows = self.prepared.get(recv.numel())
        if rows is None:
            rows = self.prepared[recv.numel()] = torch.randn(recv.numel() // 4, generator=self.gen)
        recv.copy_(rows.view(torch.uint8))
        return None

    def halo(self) -> HaloExchange:
        return HaloExchange(self.plan, CommStats(), all_to_all=self.all_to_all)


def dgl_block(block):
    """DGL's block of our block's in-edges (CSC only, our id type), as a DGL user of a partition would build it."""
    edge_ids = torch.arange(block.num_edges, dtype=block.idtype)
    g = dgl.create_block(("csc", (block.indptr.to(block.idtype), block.indices, edge_ids)),
                         num_src_nodes=block.num_src, num_dst_nodes=block.num_dst, idtype=block.idtype)
    return g.formats("csc")


class Floor(nn.Module):
    """The same model in plain DGL / torch: DGL's layers, ``F.dropout`` and ``torch.cat``."""

    def __init__(self, arch: str, in_feats: int, hidden: int, num_classes: int, layers: int, dropout: float,
                 heads: int):
        super().__init__()
        from dgl.nn import GATConv, GraphConv, SAGEConv
        self.arch, self.p = arch, dropout
        self.convs = nn.ModuleList()
        for i in range(layers):
            last = i == layers - 1
            d_in = in_feats if i == 0 else (hidden * heads if arch == "gat" else hidden)
            d_out = num_classes if last else hidden
            if arch == "gcn":
                conv = GraphConv(d_in, d_out, norm="none", allow_zero_in_degree=True)
            elif arch == "sage":
                conv = SAGEConv(d_in, d_out, "mean")
            else:
                conv = GATConv(d_in, d_out, 1 if last else heads, feat_drop=dropout, attn_drop=dropout,
                               allow_zero_in_degree=True)
            self.convs.append(conv)

    def prepare(self, rank: Rank, gcn_edge_weights: bool = False, dtype: torch.dtype = torch.float32):
        """Per graph, once (as a user would): GCN's symmetric normalisation from the rank's global degrees (node
        factors, or with ``gcn_edge_weights`` their products per edge, in edge-id order: the in-edges' order),
        GAT's block with an edge list."""
        if self.arch == "gcn":
            self.out_norm = rank.block.out_degree.clamp(min=1).to(dtype).pow(-0.5).unsqueeze(1)
            self.in_norm = rank.block.in_degree.clamp(min=1).to(dtype).pow(-0.5).unsqueeze(1)
            self.weight = None
            if gcn_edge_weights:
                self.weight = self.out_norm[rank.block.indices.long(), 0] * \
                    self.in_norm[rank.block.dst_of_edges(), 0]
        graph = rank.dgl_block
        self.graph = graph.formats(["csc", "coo"]) if self.arch == "gat" else graph
        return self

    def gcn(self, conv, h):
        """DGL's GraphConv with the weights as edge weights, or the same with them as node factors (as DGL's
        GraphConv(norm='both') normalises, here with global degrees) on the layer's weight and bias."""
        if self.weight is not None:
            return conv(self.graph, h, edge_weight=self.weight)
        w = conv.weight
        if w.shape[0] > w.shape[1]:
            h = dgl.ops.copy_u_sum(self.graph, (h @ w) * self.out_norm) * self.in_norm
        else:
            h = (dgl.ops.copy_u_sum(self.graph, h * self.out_norm) * self.in_norm) @ w
        return h + conv.bias

    def forward(self, x, halo):
        h = x
        for i, conv in enumerate(self.convs):
            last = i == len(self.convs) - 1
            if i > 0:
                h = torch.cat([h, halo(h, i)])
                if self.arch != "gat":  # GATConv drops out its own input
                    h = F.dropout(h, self.p, self.training)
            if self.arch == "gcn":
                h = self.gcn(conv, h)
            elif self.arch == "sage":
                h = conv(self.graph, h)
            else:
                h = conv(self.graph, h)
                h = h.mean(1) if last else h.flatten(1)
            if not last:
                h = F.elu(h) if self.arch == "gat" else F.relu(h)
        return h


def loss_of(rank: Rank, logits):
    idx = rank.train_idx
    return F.cross_entropy(logits[idx], rank.labels[idx], reduction="sum") / rank.num_train_global


def pair(rank: Rank, arch: str, args, dropout: float):
    """(step of ours, step of the floor, ours, floor): the same weights; a step is forward + backward."""
    torch.manual_seed(0)
    ours = GNN(arch, rank.x.shape[1], args.hidden, args.classes, args.layers, dropout, args.heads).train()
    floor = Floor(arch, rank.x.shape[1], args.hidden, args.classes, args.layers, dropout, args.heads).train()
    floor.load_state_dict(one_relation_keys(ours.state_dict()))
    floor.prepare(rank, args.gcn_floor == "edge-weights")
    halo = rank.halo()
    block = Block.homogeneous(rank.block)

    def step_ours():
        loss = loss_of(rank, ours(block, rank.x, lambda rows, layer: [halo(rows[0], layer)]))
        loss.backward()
        return loss

    def step_floor():
        loss = loss_of(rank, floor(rank.x, halo))
        loss.backward()
        return loss

    return step_ours, step_floor, ours, floor


def check_same(rank: Rank, arch: str, args) -> None:
    """Dropout 0, in float64: the same loss and the same weight gradients from the same weights (so the floor computes
    what ours does; float32 would need a tolerance for sums taken in another order). The halo rows: fixed rows plus
    a differentiable function of the inner rows, as the exchange is."""
    torch.manual_seed(0)
    ours = GNN(arch, rank.x.shape[1], args.hidden, args.classes, args.layers, 0.0, args.heads).double().train()
    floor = Floor(arch, rank.x.shape[1], args.hidden, args.classes, args.layers, 0.0, args.heads).double().train()
    floor.load_state_dict(one_relation_keys(ours.state_dict()))
    floor.prepare(rank, args.gcn_floor == "edge-weights", torch.float64)
    gen = torch.Generator().manual_seed(1)
    source = torch.randint(rank.num_inner, (rank.num_halo,), generator=gen)  # inner rows the halo rows depend on
    fixed: dict[int, torch.Tensor] = {}

    def halo(h, layer):
        if layer not in fixed:
            fixed[layer] = torch.randn(rank.num_halo, h.shape[1], generator=gen, dtype=torch.float64)
        return fixed[layer] + 0.5 * h[source]

    x = rank.x.double()
    a = loss_of(rank, ours(Block.homogeneous(rank.block), x, lambda rows, layer: [halo(rows[0], layer)]))
    b = loss_of(rank, floor(x, halo))
    torch.testing.assert_close(a, b, rtol=1e-10, atol=0,
                               msg=lambda m: f"{arch}: the loss of ours and of the floor differ: {m}")
    a.backward()
    b.backward()
    for (name, p), q in zip(ours.named_parameters(), floor.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-7, atol=1e-9 * float(q.grad.abs().max()),
                                   msg=lambda m, name=name: f"{arch}: the gradients of {name} differ: {m}")


def timed(step) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def measure(rank: Rank, arch: str, args, dropout: float) -> tuple[float, float]:
    """Median seconds of a step of ours and of the floor, alternating."""
    step_ours, step_floor, ours, floor = pair(rank, arch, args, dropout)
    times = {"ours": [], "floor": []}
    for rep in range(args.warmup + args.reps):
        for name, step, model in (("ours", step_ours, ours), ("floor", step_floor, floor))[::1 - 2 * (rep % 2)]:
            model.zero_grad(set_to_none=True)
            torch.manual_seed(rep)
            t = timed(step)
            if rep >= args.warmup:
                times[name].append(t)
    return statistics.median(times["ours"]), statistics.median(times["floor"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--parts", type=int, default=4, help="ranks (METIS parts); threads are this many ranks' share")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=schema_default("model", "heads"), help="gat (schema default)")
    ap.add_argument("--dropout", type=float, nargs="+", default=[0.5, 0.0],
                    help="dropout of each pair of columns (0: every path but dropout's)")
    ap.add_argument("--gcn-floor", choices=("node-factors", "edge-weights"), default="node-factors",
                    help="gcn's floor: the normalisation as node factors (as DGL's GraphConv(norm='both')), or as "
                         "edge weights into DGL's GraphConv(norm='none')")
    ap.add_argument("--arch", nargs="+", choices=ARCHS, default=list(ARCHS))
    ap.add_argument("--ranks", type=int, nargs="+", help="which ranks to time (default: all)")
    ap.add_argument("--reps", type=int, default=10, help="timed steps of each, alternating")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, help="torch and numba threads (default: a rank's OMP_NUM_THREADS under "
                                                "`sylvie launch --ranks PARTS`)")
    ap.add_argument("--work", default="results/bench-floor", help="directory for the graph and its partition "
                                                                  "(reused if present)")
    add_record_option(ap, "floor")
    args = ap.parse_args()
    threads = args.threads or int(thread_env(plan_geometry(args.parts), None, False, env={})["OMP_NUM_THREADS"])
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    # DGL's kernels run on an OpenMP pool of their own, all cores unless told (OMP_NUM_THREADS, which a rank of
    # `sylvie launch` has but this process not): the floor gets the rank's threads too
    dgl.utils.set_num_threads(threads)
    _, part = synthetic_partition(args.work, parts=args.parts, method="metis", nodes=args.nodes,
                                  avg_degree=args.avg_degree, features=args.features, classes=args.classes,
                                  train_fraction=0.3, val_fraction=0.1)
    manifest = read_manifest(part)
    shards = [read_shard(part, k, manifest) for k in range(manifest["num_parts"])]
    rows = []
    for k in args.ranks if args.ranks is not None else range(len(shards)):
        rank = Rank(shards, k, self_loop=True)  # as gcn, sage and gat have them by default
        for arch in args.arch:
            check_same(rank, arch, args)
            times = [measure(rank, arch, args, p) for p in args.dropout]
            rows.append((k, arch, times))
            print(f"rank {k} {arch}: " + "; ".join(f"dropout {p}: ours {o * 1e3:.1f} ms, floor {f * 1e3:.1f} ms, "
                                                   f"{o / f:.3f}x" for p, (o, f) in zip(args.dropout, times)),
                  file=sys.stderr, flush=True)
    cut = manifest["edge_cut"] / manifest["num_edges"]
    lines = [f"{manifest['num_nodes']:,} nodes, {manifest['num_edges']:,} directed edges (synthetic, average degree "
             f"{args.avg_degree:g}), {args.features} features, {args.parts} METIS parts (cut {cut:.1%}); "
             f"{args.layers} layers x {args.hidden} hidden (gat: {args.heads} heads), self-loops; gcn's floor: "
             f"{args.gcn_floor}; {threads} torch thread(s) per rank (as `sylvie launch --ranks {args.parts}` here, "
             f"{os.cpu_count()} CPUs); ms of one forward + backward, median of {args.reps} alternating steps each "
             f"(after {args.warmup} warm-up):", "",
             "| rank | arch | inner + halo rows | " + " | ".join(
                 f"ours, p={p:g} | floor, p={p:g} | ours / floor" for p in args.dropout) + " |",
             "| --- | --- | --- | " + " | ".join("---: | ---: | ---:" for _ in args.dropout) + " |"]
    for k, arch, times in rows:
        s = shards[k]
        lines.append(f"| {k} | {arch} | {s.num_inner:,} + {s.num_halo:,} | " + " | ".join(
            f"{o * 1e3:.1f} | {f * 1e3:.1f} | {o / f:.2f}x" for o, f in times) + " |")
    publish("\n".join(lines), args.record and "floor")


if __name__ == "__main__":
    main()
