"""The products-like preset (``preset: products``) beside ogbn-products' published statistics, in one table: size,
degrees, homophily, clustering, METIS's cut, what one sampled minibatch touches, and the test accuracy of GraphSAGE
and of an MLP trained by plain DGL / torch (independent of Sylvie's trainer).

    python benchmarks/products_like.py                          # products scale: 2,449,029 nodes
    python benchmarks/products_like.py --scale 0.1 --accuracy-epochs 0
    python benchmarks/products_like.py --record

The graph is generated in this process (the generator's seconds and peak RSS are printed: issue 29's <= 60 s and
<= 8 GB), then measured:

- degrees of the undirected graph (each edge both ways, as OGB loads it), percentiles over the nodes;
- edge homophily (share of edges whose ends share a label), node homophily (mean over nodes of the share of their
  neighbours that share their label), degree assortativity (Pearson's r of the degrees at the two ends of an edge);
- the mean local clustering coefficient of a uniform sample of nodes (a node of degree < 2 counts 0, as networkx's
  ``average_clustering``);
- METIS (the stage's library and constraints, balance full) at 4, 8 and 10 parts: the share of undirected edges
  cut, and the halo (a part's distinct remote neighbours, summed over the parts, per node: what BNS-GCN calls the
  communication volume);
- minibatches of 1024 seeds drawn from part 0's training nodes: the input nodes of DGL's NeighborSampler([15, 10,
  5]) (5 next to the seeds, as OGB's example), and the remote input vertices under SALIENT++'s (15, 10, 5) (15 next
  to the seeds: DGL's [5, 10, 15]) at 4 parts;
- test accuracy of GraphSAGE 3 x 256 (mean, DGL's SAGEConv), trained with DGL's NeighborSampler([15, 10, 5])
  and batch 1024 as OGB's products example, Adam lr 0.003, dropout 0.5, at the epoch of best validation accuracy
  (``--accuracy-epochs``; 0 skips both), and of an MLP 3 x 256 on the features alone (100 full-batch steps, Adam
  lr 0.01, at the step of best validation accuracy).
"""
import argparse
import resource
import sys
import time

import numba
import numpy as np
import yaml
from common import add_record_option, publish

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.partition.metis import metis_assign, metis_input

# ogbn-products as published. Sources: [OGB] Hu et al., Open Graph Benchmark, NeurIPS 2020 (arXiv 2005.00687) and
# https://ogb.stanford.edu/docs/nodeprop/; [CoB] Xing et al., Less is More: on the Over-Globalizing Problem in Graph
# Transformers, ICML 2024 (arXiv 2405.14786), dataset table; [PyAGC] the PyAGC library's dataset table
# (docs/source/modules/data.rst); [DL] Leirunlin/DatasetLoader Statistics.md (computed from OGB's files);
# [BNS] C. Wan (BNS-GCN's first author), dmlc/dgl pull request 3821: METIS on ogbn-products, 10 parts, edge-cut
# objective, communication volume 2,108,759; [S++] SALIENT++ (Kaler et al., MLSys 2023), artifact README: 1.67e7
# remote vertex fetches per epoch without a cache, 4 parts, fanouts (15, 10, 5), batch 1024, ~192 minibatches;
# [B] one measured DGL batch of NeighborSampler([15, 10, 5]), batch 1024, on ogbn-products in a public README
# (460,206 input nodes); [SNAP] SNAP's com-Amazon (another Amazon co-purchase graph, 334,863 nodes): average
# clustering coefficient 0.3967, https://snap.stanford.edu/data/com-Amazon.html.
PUBLISHED = {
    "nodes": (2_449_029, "OGB"), "undirected edges": (61_859_140, "OGB"), "mean degree": (50.52, "OGB (2E/N)"),
    "edge homophily": (0.81, "CoB, PyAGC; DL 0.808"), "node homophily": (0.82, "PyAGC; DL 0.817"),
    "degree assortativity": (-0.042, "DL"), "mean clustering coefficient": (0.3967, "SNAP com-Amazon (not products)"),
    "halo per node, 10 parts": (2_108_759 / 2_449_029, "BNS"),
    "inputs of a minibatch, DGL [15,10,5]": (460_206 / 2_449_029, "B"),
    "remote inputs of a minibatch, 4 parts, S++ (15,10,5)": (1.67e7 / 192 / 2_449_029, "S++ (derived)"),
    "GraphSAGE test accuracy": (0.7870, "OGB leaderboard, NS 78.70 +- 0.36; full-batch 78.50"),
    "MLP test accuracy": (0.6106, "OGB"),
}


def generate(scale: float, seed: int, knobs: dict):
    t0 = time.perf_counter()
    graph = generate_from(section("dataset", {"preset": "products", "nodes": max(1000, round(2_449_029 * scale)),
                                              "seed": seed, **knobs}), "synthetic-products")
    seconds = time.perf_counter() - t0
    return graph, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def csr(graph):
    """(indptr, indices) of the graph's edges by source: a canonical graph is sorted by source already."""
    indptr = np.zeros(graph.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(graph.src, minlength=graph.num_nodes), out=indptr[1:])
    return indptr, graph.dst


@numba.njit(cache=True, nogil=True)
def _clustering(indptr, indices, nodes):
    mark = np.zeros(indptr.shape[0] - 1, dtype=np.uint8)
    out = np.zeros(nodes.shape[0])
    for i in range(nodes.shape[0]):
        v = nodes[i]
        d = indptr[v + 1] - indptr[v]
        if d < 2:
            continue
        for e in range(indptr[v], indptr[v + 1]):
            mark[indices[e]] = 1
        links = 0
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            for f in range(indptr[u], indptr[u + 1]):
                links += mark[indices[f]]
        for e in range(indptr[v], indptr[v + 1]):
            mark[indices[e]] = 0
        out[i] = links / (d * (d - 1))
    return out


def structure(graph, sample: int) -> dict:
    n, src, dst, y = graph.num_nodes, graph.src, graph.dst, graph.labels
    deg = np.bincount(src, minlength=n)
    same = y[src] == y[dst]
    node_hom = np.bincount(src, weights=same, minlength=n)[deg > 0] / deg[deg > 0]
    a, b = deg[src].astype(np.float64), deg[dst].astype(np.float64)
    indptr, indices = csr(graph)
    nodes = np.random.default_rng(0).choice(n, min(sample, n), replace=False)
    pct = np.percentile(deg, [10, 50, 90, 99])
    return {"nodes": n, "undirected edges": graph.num_edges // 2, "mean degree": graph.num_edges / n,
            "degree p10 / p50 / p90 / p99 / max": " / ".join(f"{x:,.0f}" for x in (*pct, deg.max())),
            "nodes of degree <= 2": float((deg <= 2).mean()),
            "edge homophily": float(same.mean()), "node homophily": float(node_hom.mean()),
            "degree assortativity": float(np.corrcoef(a, b)[0, 1]),
            "mean clustering coefficient": float(_clustering(indptr, indices, nodes).mean())}


def halo_per_node(graph, assign) -> float:
    """Distinct (part, remote node) pairs over the nodes: the rows every part receives in one exchange."""
    cross = assign[graph.src] != assign[graph.dst]
    pairs = np.unique(assign[graph.dst[cross]].astype(np.int64) * graph.num_nodes + graph.src[cross])
    return pairs.shape[0] / graph.num_nodes


def cuts(graph, parts_list) -> tuple[dict, np.ndarray]:
    out, four = {}, None
    metis = metis_input(graph)
    for parts in parts_list:
        t0 = time.perf_counter()
        assign = metis_assign(metis, parts)
        out[f"edge cut, {parts} parts"] = float((assign[graph.src] != assign[graph.dst]).mean())
        out[f"halo per node, {parts} parts"] = halo_per_node(graph, assign)
        print(f"METIS {parts} parts: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if parts == 4:
            four = assign
    return out, four


def minibatches(graph, assign, batches: int) -> dict:
    import dgl
    import torch

    g = dgl.graph((torch.from_numpy(graph.src), torch.from_numpy(graph.dst)), num_nodes=graph.num_nodes)
    train = np.flatnonzero(graph.train_mask & (assign == 0))
    rng = np.random.default_rng(0)
    out = {}
    for name, fanouts in (("inputs of a minibatch, DGL [15,10,5]", [15, 10, 5]),
                          ("remote inputs of a minibatch, 4 parts, S++ (15,10,5)", [5, 10, 15])):
        sampler = dgl.dataloading.NeighborSampler(fanouts)
        counts = []
        for _ in range(batches):
            seeds = torch.from_numpy(rng.choice(train, min(1024, train.shape[0]), replace=False))
            inputs = sampler.sample_blocks(g, seeds)[0].numpy()
            counts.append(inputs.shape[0] if "remote" not in name else int((assign[inputs] != 0).sum()))
        out[name] = float(np.mean(counts)) / graph.num_nodes
    return out


def accuracy(graph, epochs: int) -> dict:
    """MLP and GraphSAGE test accuracy at the epoch of best validation accuracy, plain DGL and torch."""
    import dgl
    import dgl.nn as dglnn
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    g = dgl.graph((torch.from_numpy(graph.src), torch.from_numpy(graph.dst)), num_nodes=graph.num_nodes)
    x, y = torch.from_numpy(graph.features), torch.from_numpy(graph.labels)
    masks = [torch.from_numpy(np.flatnonzero(m)) for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
    c = graph.num_classes

    class SAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([dglnn.SAGEConv(x.shape[1], 256, "mean"),
                                               dglnn.SAGEConv(256, 256, "mean"), dglnn.SAGEConv(256, c, "mean")])

        def forward(self, blocks, h):
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                h = layer(block, h)
                if i < 2:
                    h = F.dropout(F.relu(h), 0.5, self.training)
            return h

        @torch.no_grad()
        def infer(self):  # layer by layer over the whole graph
            h = x
            for i, layer in enumerate(self.layers):
                h = layer(g, h)
                if i < 2:
                    h = F.relu(h)
            return h

    sage = SAGE()
    opt = torch.optim.Adam(sage.parameters(), lr=0.003)
    loader = dgl.dataloading.DataLoader(g, masks[0], dgl.dataloading.NeighborSampler([15, 10, 5]), batch_size=1024,
                                        shuffle=True, drop_last=False)
    scores = []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        sage.train()
        for _, out_nodes, blocks in loader:
            loss = F.cross_entropy(sage(blocks, x[blocks[0].srcdata[dgl.NID]]), y[out_nodes])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sage.eval()
        pred = sage.infer().argmax(1)
        val, test = ((pred[m] == y[m]).float().mean().item() for m in masks[1:])
        scores.append((val, test))
        print(f"SAGE epoch {epoch + 1}: loss {loss.item():.3f} val {val:.4f} test {test:.4f} "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    mlp = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                              torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                              torch.nn.Linear(256, c))
    opt = torch.optim.Adam(mlp.parameters(), lr=0.01)
    best_val, best_state = -1.0, None
    for step in range(100):  # full batch over the training nodes; validation every 10 steps, test once
        mlp.train()
        loss = F.cross_entropy(mlp(x[masks[0]]), y[masks[0]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 9:
            mlp.eval()
            with torch.no_grad():
                val = (mlp(x[masks[1]]).argmax(1) == y[masks[1]]).float().mean().item()
            if val > best_val:
                best_val, best_state = val, {k: v.clone() for k, v in mlp.state_dict().items()}
    mlp.load_state_dict(best_state)
    mlp.eval()
    with torch.no_grad():
        mlp_test = (mlp(x[masks[2]]).argmax(1) == y[masks[2]]).float().mean().item()
    print(f"MLP: val {best_val:.4f} test {mlp_test:.4f}", file=sys.stderr)
    return {"GraphSAGE test accuracy": max(scores)[1], "MLP test accuracy": mlp_test}


def _cell(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value > 1000):
        return f"{value:,.0f}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


FACTOR = {  # ours / published must lie within [1 / f, f]; why that f: in the README beside the table
    "nodes": 1.0001, "undirected edges": 1.0001, "mean degree": 1.001, "edge homophily": 1.05, "node homophily": 1.1,
    "mean clustering coefficient": 1.5, "halo per node, 10 parts": 1.5, "inputs of a minibatch, DGL [15,10,5]": 1.5,
    "remote inputs of a minibatch, 4 parts, S++ (15,10,5)": 2.0, "GraphSAGE test accuracy": 1.05,
    "MLP test accuracy": 1.1,
}


def table(ours: dict, scale: float) -> list[str]:
    lines = ["| statistic | ours | ogbn-products (source) | ours / published | within (bound) |",
             "| --- | --- | --- | --- | --- |"]
    for key, value in ours.items():
        pub, source = PUBLISHED.get(key, (None, "not published"))
        if pub is None or isinstance(value, str):
            lines.append(f"| {key} | {_cell(value)} | {source} | | |")
            continue
        ratio = value / pub
        bound = FACTOR.get(key)
        if key == "degree assortativity":
            verdict, bound_text = ("yes" if abs(value - pub) <= 0.05 else "no"), "|diff| <= 0.05"
            ratio_text = f"{value - pub:+.3f} (diff)"
        else:
            scaled = scale < 1 and key in ("nodes", "undirected edges")
            verdict = "scaled" if scaled else ("yes" if bound and 1 / bound <= ratio <= bound else "no")
            bound_text, ratio_text = (f"{bound:g}x" if bound else ""), f"{ratio:.2f}x"
        lines.append(f"| {key} | {_cell(value)} | {_cell(pub)} ({source}) | {ratio_text} | {verdict} ({bound_text}) |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="nodes as a share of ogbn-products' (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="the generator's seed")
    ap.add_argument("--clustering-sample", type=int, default=20_000, help="nodes whose clustering is averaged")
    ap.add_argument("--batches", type=int, default=8, help="minibatches sampled per fanout setting")
    ap.add_argument("--accuracy-epochs", type=int, default=4, help="GraphSAGE epochs (0: no accuracy rows)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE",
                    help="dataset knobs over the preset's (to calibrate: --set homophily=0.9 locality=0.8)")
    add_record_option(ap, "products-like")
    ap.add_argument("--topic", default="products-like", help="the record's topic (default: products-like)")
    args = ap.parse_args()

    knobs = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    graph, seconds, peak = generate(args.scale, args.seed, knobs)
    print(f"generated in {seconds:.1f} s, peak RSS {peak:.2f} GB", file=sys.stderr)
    ours = structure(graph, args.clustering_sample)
    cut, four = cuts(graph, (4, 8, 10))
    ours.update(cut)
    ours.update(minibatches(graph, four, args.batches))
    if args.accuracy_epochs:
        ours.update(accuracy(graph, args.accuracy_epochs))
    changed = "".join(f", {k} {v}" for k, v in knobs.items())
    head = (f"`preset: products`{changed} at scale {args.scale:g} (seed {args.seed}): {graph.num_nodes:,} nodes, "
            f"{graph.num_edges:,} directed edges, {graph.features.shape[1]} features, {graph.num_classes} classes; "
            f"generated in {seconds:.1f} s, peak RSS {peak:.2f} GB (this process, before measuring). Clustering "
            f"over {args.clustering_sample:,} random nodes; minibatches: {args.batches} of 1024 seeds from part 0's "
            f"training nodes; accuracy: {args.accuracy_epochs} epochs of GraphSAGE (best validation epoch).")
    publish("\n".join([head, "", *table(ours, args.scale)]), args.record and args.topic)


if __name__ == "__main__":
    main()
