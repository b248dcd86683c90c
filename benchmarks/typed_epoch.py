"""One process, one full-graph R-GCN (and R-GAT) training epoch on the mag preset: ours (``sylvie.models.typed_gnn``
on our typed block: per relation our aggregation kernels) beside DGL's on the same graph, the same model and
weights, the same threads, measured in the same run.

    python benchmarks/typed_epoch.py                                # the mag preset at 1/10: 193,974 nodes
    python benchmarks/typed_epoch.py --scale 0.25 --write benchmarks/README.md

DGL's model is the one DGL's own heterogeneous R-GCN example builds: per layer ``HeteroGraphConv`` of a
``GraphConv(norm="right")`` per relation (a mean over each relation's in-edges), summed, plus a self-loop weight and
a bias; authors, institutions and fields of study as ``nn.Embedding`` tables; R-GAT: ``HeteroGraphConv`` of a
``GATConv`` per relation (MLPerf's) plus the self-loop weight (``x_v W_loop``, as ours). Both 2 layers, float32,
dropout 0 (dropout's masks differ between the two), Adam lr 0.01, embeddings as wide as the papers' features (128,
as DGL's ogbn-mag example); an epoch is the forward pass over every node, the loss over the training papers, the
backward pass and the optimiser's step. The first ``--warm-up`` epochs are not counted (DGL builds its per-relation
graphs' formats in the first); a cell is the median of the others, each implementation's epochs interleaved with the
other's.
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import publish

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.mag_like import MAG_TOTAL
from sylvie.models.blocks import whole_graph_typed_block
from sylvie.models.typed_gnn import TypedGNN


class DGLTyped(nn.Module):
    """Our model's layers written in DGL, its weights copied from ``ours``."""

    def __init__(self, ours: TypedGNN, graph):
        import dgl.nn as dglnn
        super().__init__()
        self.types, self.arch = graph.types, ours.arch
        self.embeddings = nn.ModuleDict({graph.types.node_types[int(t)]: nn.Embedding.from_pretrained(
            e.weight.detach().clone(), freeze=False) for t, e in ours.embeddings.items()})
        self.layers = nn.ModuleList()
        self.loops = nn.ModuleList()
        self.biases = nn.ParameterList()
        for conv in ours.convs:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1, help="nodes as a share of ogbn-mag's 1,939,743")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--warm-up", type=int, default=2)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--write")
    ap.add_argument("--section", default="typed-epoch-table")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    graph = generate_from(section("dataset", {"preset": "mag", "nodes": round(MAG_TOTAL * args.scale)}), "mag")
    tb = whole_graph_typed_block(graph.types, graph.node_counts, graph.src, graph.dst, graph.relation)
    g = dgl_graph(graph)
    papers = graph.node_counts[graph.types.target_index]
    y = torch.from_numpy(graph.labels[:papers])
    train = torch.from_numpy(graph.train_mask[:papers])
    x = [None if f is None else torch.from_numpy(f) for f in graph.type_features]
    xd = {t: x[i] for i, t in enumerate(graph.types.node_types) if x[i] is not None}
    rows = []
    for arch, hidden, heads in (("rgcn", 64, 1), ("rgat", 16, 4)):
        torch.manual_seed(0)
        ours = TypedGNN(arch, graph.types, graph.feature_widths, hidden, graph.num_classes, 2, 0.0, heads,
                        embedding_rows=graph.node_counts, embedding_width=128)
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
    publish("\n".join(lines), args.write, args.section)


if __name__ == "__main__":
    main()
