"""One process, one full-graph R-GCN (and R-GAT) training epoch on the mag preset: ours (``sylvie.models.typed_gnn``
on our typed block: per relation our aggregation kernels) beside DGL's on the same graph, the same model and
weights, the same threads, measured in the same run.

    python benchmarks/typed_epoch.py                                # the mag preset at 1/10: 193,974 nodes
    python benchmarks/typed_epoch.py --scale 0.25 --record

DGL's model is the one DGL's own heterogeneous R-GCN example builds: per layer ``HeteroGraphConv`` of a
``GraphConv(norm="right")`` per relation (a mean over each relation's in-edges), summed, plus a self-loop weight and
a bias; authors, institutions and fields of study as ``nn.Embedding`` tables; R-GAT: ``HeteroGraphConv`` of a
``GATConv`` per relation (MLPerf's) plus the self-loop weight (``x_v W_loop``, as ours). Both 2 layers, float32,
dropout 0 (dropout's masks differ between the two), Adam lr 0.01, embeddings as wide as the papers' features (128,
as DGL's ogbn-mag example); an epoch is the forward pass over every node, the loss over the training papers, the
backward pass and the optimiser's step. The first ``--warm-up`` epochs are not counted (DGL builds its per-relation
graphs' formats in the first); a cell is the median of the others, each implementation's epochs interleaved with the
other's.

``--sampled``: one rank's sampled R-GAT epoch on the igbh preset (IGBH-small's shape; ``--nodes``, ``--features`` on
every type), MLPerf's R-GAT setting scaled down: 3 layers (``--heads`` x ``--hidden``, the last one head), fanouts
(15, 10, 5) of every relation from the seeds, batches of 1024 training papers, Adam, dropout 0, float32.

    python benchmarks/typed_epoch.py --sampled --record     # 100,000 nodes, 128 features

Ours is ``sylvie train --mode sampled``'s trainer (``SampledTrainer``) on the graph's one-part partition, in this
process (prefetch 1: sampling and gathering the input rows in the sampling thread, one minibatch ahead). DGL's is
what a DGL user writes: ``dgl.heterograph`` of the same graph, ``DataLoader(g, {"paper": train}, NeighborSampler(
[{etype: fanout} ...], prefetch_node_feats=...), batch_size, shuffle=True, num_workers=w)`` for each ``w`` in
``--dgl-workers``, the model ``HeteroGraphConv`` of a ``GATConv`` per relation plus the self-loop weight
(``DGLTyped.forward_blocks``) on ``blocks`` with ``blocks[0].srcdata["feat"]``. Both start from the same weights
(checked: the same logits on every paper with full neighbourhoods); torch, DGL's OpenMP and numba get ``--threads``.
An epoch is every training paper once; the runs' epochs are interleaved, each run first in turn, so a load from
elsewhere on the machine falls on all alike; each cell the median after ``--warm-up`` epochs.
"""
import argparse
import copy
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_record_option, publish

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.mag_like import MAG_TOTAL
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gnn import GNN


class DGLTyped(nn.Module):
    """Our model's layers written in DGL, its weights copied from ``ours``."""

    def __init__(self, ours: GNN, graph):
        import dgl.nn as dglnn
        super().__init__()
        self.types, self.arch = graph.types, ours.arch
        self.embeddings = nn.ModuleDict({graph.types.node_types[int(t)]: nn.Embedding.from_pretrained(
            e.weight.detach().clone(), freeze=False) for t, e in ours.embeddings.items()})
        self.layers = nn.ModuleList()
        self.loops = nn.ModuleList()
        self.biases = nn.ParameterList()
        self.shapes = []  # R-GAT: each layer's (heads, width per head)
        for conv in ours.convs:
            if ours.arch == "rgat":
                self.shapes.append((conv.num_heads, conv.out_feats))
            mods = {}
            for r, rel in enumerate(graph.types.relations):
                if ours.arch == "rgcn":
                    w = conv.weight[r]
                    m = dglnn.GraphConv(w.shape[0], w.shape[1], norm="right", bias=False, allow_zero_in_degree=True)
                    m.weight.data.copy_(w.detach())
                else:
                    c = conv.convs[r]
                    m = dglnn.GATConv(c.fc.in_features, c.out_feats, c.num_heads, allow_zero_in_degree=True)
                    m.fc.weight.data.copy_(c.fc.weight.detach())
                    m.attn_l.data.copy_(c.attn_l.detach())
                    m.attn_r.data.copy_(c.attn_r.detach())
                    m.bias.data.copy_(c.bias.detach())
                mods[rel.name] = m
            self.layers.append(dglnn.HeteroGraphConv(mods, aggregate="sum"))
            self.loops.append(nn.ParameterList(nn.Parameter(w.detach().clone()) for w in conv.loop_weight))
            if ours.arch == "rgcn":
                self.biases.append(nn.Parameter(conv.bias.detach().clone()))

    def forward(self, g, x: dict):
        h = {**x, **{t: e.weight for t, e in self.embeddings.items()}}
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            out = layer(g, h)
            if self.arch == "rgcn":
                out = {t: out.get(t, 0) + h[t] @ self.loops[i][j] + self.biases[i]
                       for j, t in enumerate(self.types.node_types)}
            else:
                kinds = self.types.node_types
                out = {t: (y + (h[t] @ self.loops[i][kinds.index(t)]).view(y.shape)) for t, y in out.items()}
                out = {t: (y.mean(1) if last else y.flatten(1)) for t, y in out.items()}
            h = out if last else {t: (F.elu(y) if self.arch == "rgat" else F.relu(y)) for t, y in out.items()}
        return h[self.types.target]

    def forward_blocks(self, blocks, x: dict):
        """R-GAT on a sampled minibatch's DGL blocks (input layer first; a type's destinations the first of its
        sources, as in ours): a destination type that no sampled edge reaches gets its self-loop term alone (as
        ours), the last layer computes the target type only (as ours)."""
        kinds, h = self.types.node_types, x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            last = i == len(self.layers) - 1
            out, heads, width = layer(block, h), *self.shapes[i]
            y = {}
            for t in (self.types.target,) if last else kinds:
                n = block.num_dst_nodes(t)
                loop = (h[t][:n] @ self.loops[i][kinds.index(t)]).view(n, heads, width)
                y[t] = out[t] + loop if t in out else loop
            h = {t: v.mean(1) if last else F.elu(v.flatten(1)) for t, v in y.items()}
        return h[self.types.target]


def dgl_graph(graph):
    import dgl
    offsets, data = graph.type_offsets, {}
    for r, rel in enumerate(graph.types.relations):
        mine = graph.relation == r
        s, d = graph.types.ends(r)
        data[(rel.src, rel.name, rel.dst)] = (torch.from_numpy(graph.src[mine] - offsets[s]),
                                              torch.from_numpy(graph.dst[mine] - offsets[d]))
    return dgl.heterograph(data, num_nodes_dict=dict(zip(graph.types.node_types, graph.node_counts, strict=True)))


def step(model, forward, opt, y, train) -> float:
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = F.cross_entropy(forward()[train], y[train])
    loss.backward()
    opt.step()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------ --sampled: one rank

class Counted:
    """An account of our sampler's minibatches, their input rows and edges (what the table shows per batch): in
    place of the sampler's ``sample`` (this instance's attribute, which the trainer's preparer calls)."""

    def __init__(self, sampler):
        self.sample, self.batches, self.rows, self.edges = sampler.sample, 0, 0, 0
        sampler.sample = self

    def __call__(self, *args, **kwargs):
        mb = self.sample(*args, **kwargs)
        self.batches += 1
        self.rows += sum(mb.blocks[0].num_src)
        self.edges += sum(b.num_edges for b in mb.blocks)
        return mb


def our_trainer(part, args):
    """``sylvie train --mode sampled``'s trainer of rank 0 on the one-part partition, in this process."""
    from sylvie.formats.partition_manifest import read_manifest
    from sylvie.partition.shard_reader import read_shard, read_topology
    from sylvie.runtime.process_group import Context
    from sylvie.train.sampled_trainer import SampledTrainer

    manifest = read_manifest(part)
    model = section("model", {"arch": "rgat", "hidden": args.hidden, "heads": args.heads, "layers": 3,
                              "dropout": 0.0})
    return SampledTrainer(Context(0, 1, torch.device("cpu"), "gloo"), read_shard(part, 0, manifest),
                          read_topology(part, manifest), model,
                          section("train", {"mode": "sampled", "lr": args.lr, "weight_decay": 0.0}),
                          section("sampling", {"fanouts": args.fanouts[::-1], "batch_size": args.batch_size,
                                               "prefetch": 1}),
                          section("cache", {}), seed=0, vip=None, timeout=600)


def same_model(ours: GNN, theirs: DGLTyped, graph, g) -> float:
    """The largest difference between the two models' logits on every paper with full neighbourhoods (ours on
    the whole graph's typed block, DGL's ``forward_blocks`` on ``to_block`` of the whole graph at every layer)."""
    import dgl
    tb = whole_graph_block(graph.src, graph.dst, graph.node_counts, types=graph.types, relation=graph.relation)
    x = [torch.from_numpy(f) for f in graph.type_features]
    full = dgl.to_block(g, {t: torch.arange(g.num_nodes(t)) for t in g.ntypes})
    with torch.no_grad():
        a = ours([tb] * len(ours.convs), x)
        b = theirs.forward_blocks([full] * len(ours.convs), {t: x[i] for i, t in enumerate(graph.types.node_types)})
    return (a - b).abs().max().item()


class DGLRun:
    """Plain DGL's sampled R-GAT epoch: ``DataLoader`` over the training papers with ``NeighborSampler``'s fanout
    per relation, the input rows ``blocks[0].srcdata["feat"]`` (prefetched by the loader), ``DGLTyped``."""

    def __init__(self, g, model: DGLTyped, y, train, args, workers: int):
        import dgl
        self.model, self.y, self.batches, self.rows, self.edges = model, y, 0, 0, 0
        self.opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        sampler = dgl.dataloading.NeighborSampler([{e: f for e in g.etypes} for f in args.fanouts[::-1]],
                                                  prefetch_node_feats={t: ["feat"] for t in g.ntypes})
        self.loader = dgl.dataloading.DataLoader(g, {"paper": train}, sampler, batch_size=args.batch_size,
                                                 shuffle=True, num_workers=workers, persistent_workers=workers > 0)

    def epoch(self) -> float:
        t0 = time.perf_counter()
        for input_nodes, seeds, blocks in self.loader:
            self.opt.zero_grad()
            loss = F.cross_entropy(self.model.forward_blocks(blocks, blocks[0].srcdata["feat"]), self.y[seeds["paper"]])
            loss.backward()
            self.opt.step()
            self.batches += 1
            self.rows += sum(v.shape[0] for v in input_nodes.values())
            self.edges += sum(b.num_edges() for b in blocks)
        return time.perf_counter() - t0


def sampled_main(args) -> None:
    """One rank's sampled R-GAT epoch on the igbh preset: ours (``SampledTrainer``) against plain DGL's at each
    ``--dgl-workers``, their epochs interleaved."""
    from pathlib import Path

    from common import partition, synthetic_graph
    from sampled import set_threads

    from sylvie.data.graph import load_graph

    set_threads(args.threads)
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")  # nothing writes them
    work = Path(args.work)
    graph_dir = synthetic_graph(work / "graph", preset="igbh", nodes=args.nodes, features=args.features)
    part = partition(graph_dir, work / "p1", parts=1)
    graph = load_graph(graph_dir)
    g = dgl_graph(graph)
    for i, t in enumerate(graph.types.node_types):
        g.nodes[t].data["feat"] = torch.from_numpy(graph.type_features[i])
    papers = graph.node_counts[graph.types.target_index]
    y = torch.from_numpy(graph.labels[:papers])
    train = torch.from_numpy(graph.train_mask[:papers]).nonzero().squeeze(1)
    trainer = our_trainer(part, args)
    counted = Counted(trainer.sampler)
    if trainer.sampler.types != graph.types:
        raise SystemExit("the partition's types are not the graph's")
    theirs = DGLTyped(trainer.model, graph)
    diff = same_model(trainer.model, theirs, graph, g)
    if diff > 1e-3:
        raise SystemExit(f"ours and DGL's logits differ by {diff:g}; the two are not the same model")
    print(f"the same model: logits within {diff:.2g} on every paper (full neighbourhoods)", file=sys.stderr)
    runs = {"ours": None, **{f"DGL, num_workers {w}": DGLRun(g, theirs if i == 0 else copy.deepcopy(theirs), y,
                                                               train, args, w)
                             for i, w in enumerate(args.dgl_workers)}}
    times, records, total = {k: [] for k in runs}, [], args.warm_up + args.epochs
    try:
        for epoch in range(total):
            names = list(runs)
            names = names[epoch % len(names):] + names[:epoch % len(names)]  # each one first in turn
            for name in names:
                if name == "ours":
                    records.append(trainer.epoch(epoch, evaluate=False))
                    seconds = records[-1].epoch_time
                else:
                    seconds = runs[name].epoch()
                times[name].append(seconds)
                print(f"epoch {epoch + 1}: {name} {seconds:.2f} s", file=sys.stderr, flush=True)
    finally:
        trainer.close()
    med = {k: statistics.median(v[args.warm_up:]) for k, v in times.items()}
    best = min((k for k in runs if k != "ours"), key=med.get)
    per_batch = {k: ((r.batches / total, r.rows / r.batches, r.edges / r.batches) if r else
                     (counted.batches / total, counted.rows / counted.batches, counted.edges / counted.batches))
                 for k, r in runs.items()}
    ours = {k: statistics.median(getattr(r, k) if hasattr(r, k) else getattr(r.batches, k)
                                 for r in records[args.warm_up:])
            for k in ("sample_time", "fetch_time", "fetch_wait_time", "compute_time")}
    types = graph.types
    counts = ", ".join(f"{n:,} {t}" for t, n in zip(types.node_types, graph.node_counts, strict=True))
    lines = [f"The igbh preset at {graph.num_nodes:,} nodes ({counts}; "
             f"{graph.num_edges:,} edges in {len(types.relations)} relations with the reverses; {args.features} "
             f"features on every type, float32), {len(train):,} training papers; one process, {args.threads} "
             f"threads (torch, DGL's OpenMP, numba). R-GAT 3 layers ({args.heads} x {args.hidden}, the last 1 head), "
             f"self-loop weight, dropout 0, Adam lr {args.lr:g}; fanouts ({', '.join(map(str, args.fanouts))}) of "
             f"every relation (first next to the seeds), batch {args.batch_size} papers. An epoch: every training "
             f"paper once (sample, gather the input rows, forward, backward, step); median of epochs "
             f"{args.warm_up + 1}-{total}, the runs' epochs interleaved (each run first in turn).", "",
             "| run | s/epoch | vs DGL's best | minibatches | input rows / batch | sampled edges / batch |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name in (*(k for k in runs if k != "ours"), "ours"):
        label = "sylvie `SampledTrainer`, 1 rank (prefetch 1)" if name == "ours" else f"plain {name}"
        b, rows, edges = per_batch[name]
        lines.append(f"| {label} | {med[name]:.2f} | {med[name] / med[best]:.2f}x | {b:.0f} | {rows:,.0f} | "
                     f"{edges:,.0f} |")
    lines += ["", f"Ours per epoch (medians): sampling {ours['sample_time']:.2f} s and gathering "
                  f"{ours['fetch_time']:.2f} s in the sampling thread, the model waiting {ours['fetch_wait_time']:.2f}"
                  f" s for them; forward, backward and step {ours['compute_time']:.2f} s."]
    publish("\n".join(lines), args.record and (args.topic or "typed-sampled-epoch"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1, help="nodes as a share of ogbn-mag's 1,939,743")
    ap.add_argument("--epochs", type=int, help="epochs counted (default 8; --sampled 5)")
    ap.add_argument("--warm-up", type=int, help="epochs before them, not counted (default 2; --sampled 1)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    add_record_option(ap, "typed-epoch")
    ap.add_argument("--topic", default=None,
                    help="the record's topic (default: typed-epoch, with --sampled typed-sampled-epoch)")
    sampled = ap.add_argument_group("--sampled: one rank's sampled R-GAT epoch on the igbh preset")
    sampled.add_argument("--sampled", action="store_true")
    sampled.add_argument("--nodes", type=int, default=100_000)
    sampled.add_argument("--features", type=int, default=128, help="on every node type (IGBH's: 1024)")
    sampled.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="first next to the seeds")
    sampled.add_argument("--batch-size", type=int, default=1024)
    sampled.add_argument("--hidden", type=int, default=32, help="per head")
    sampled.add_argument("--heads", type=int, default=4)
    sampled.add_argument("--lr", type=float, default=0.001)
    sampled.add_argument("--dgl-workers", type=int, nargs="+", default=[0, 1, 2])
    sampled.add_argument("--work", default="results/bench-typed-sampled")
    args = ap.parse_args()
    if args.sampled:
        args.epochs, args.warm_up = args.epochs or 5, 1 if args.warm_up is None else args.warm_up
        return sampled_main(args)
    args.epochs, args.warm_up = args.epochs or 8, 2 if args.warm_up is None else args.warm_up
    torch.set_num_threads(args.threads)
    graph = generate_from(section("dataset", {"preset": "mag", "nodes": round(MAG_TOTAL * args.scale)}), "mag")
    tb = whole_graph_block(graph.src, graph.dst, graph.node_counts, types=graph.types, relation=graph.relation)
    g = dgl_graph(graph)
    papers = graph.node_counts[graph.types.target_index]
    y = torch.from_numpy(graph.labels[:papers])
    train = torch.from_numpy(graph.train_mask[:papers])
    x = [None if f is None else torch.from_numpy(f) for f in graph.type_features]
    xd = {t: x[i] for i, t in enumerate(graph.types.node_types) if x[i] is not None}
    rows = []
    for arch, hidden, heads in (("rgcn", 64, 1), ("rgat", 16, 4)):
        torch.manual_seed(0)
        ours = GNN(arch, graph.feature_widths, hidden, graph.num_classes, 2, 0.0, heads,
                   embedding_rows=graph.node_counts, embedding_width=128, types=graph.types)
        theirs = DGLTyped(ours, graph)
        opts = {"ours": torch.optim.Adam(ours.parameters(), lr=0.01),
                "DGL": torch.optim.Adam(theirs.parameters(), lr=0.01)}
        runs = {"ours": lambda ours=ours: ours(tb, x), "DGL": lambda theirs=theirs: theirs(g, xd)}
        models = {"ours": ours, "DGL": theirs}
        with torch.no_grad():  # the same model: the same logits before any step
            diff = (runs["ours"]() - runs["DGL"]()).abs().max().item()
        if diff > 1e-3:
            raise SystemExit(f"{arch}: ours and DGL's logits differ by {diff:g}; the two are not the same model")
        times = {"ours": [], "DGL": []}
        for epoch in range(args.warm_up + args.epochs):
            for name in (("ours", "DGL") if epoch % 2 else ("DGL", "ours")):
                seconds = step(models[name], runs[name], opts[name], y, train)
                if epoch >= args.warm_up:
                    times[name].append(seconds)
            print(f"{arch} epoch {epoch + 1}: ours {seconds:.2f} s", file=sys.stderr)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((arch, med["ours"], med["DGL"]))
        print(f"{arch}: ours {med['ours']:.3f} s, DGL {med['DGL']:.3f} s", file=sys.stderr)
    lines = [f"The mag preset at {graph.num_nodes:,} nodes ({args.scale:g} of ogbn-mag; {graph.num_edges:,} edges "
             f"with the reverses), one process, {args.threads} threads, float32, 2 layers, embeddings 128 wide; "
             f"median of {args.epochs} epochs after {args.warm_up}.", "",
             "| model | ours s/epoch | DGL s/epoch | ours / DGL |", "| --- | --- | --- | --- |"]
    for arch, o, d in rows:
        name = "R-GCN 2 x 64" if arch == "rgcn" else "R-GAT 2 x (4 x 16)"
        lines.append(f"| {name} | {o:.3f} | {d:.3f} | {o / d:.2f}x |")
    publish("\n".join(lines), args.record and (args.topic or "typed-epoch"))


if __name__ == "__main__":
    main()
