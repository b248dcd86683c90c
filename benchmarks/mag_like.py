"""The mag preset (``preset: mag``) beside ogbn-mag's published statistics, in one table: nodes per type, edges per
relation, degrees per relation, the split, the citations' venue homophily, METIS's cut at 4 parts, and the test
accuracy of an MLP on the papers' features and of R-GCN (one process, full graph; ours, on the preset).

    python benchmarks/mag_like.py                                   # ogbn-mag's size: 1,939,743 nodes
    python benchmarks/mag_like.py --scale 0.1 --epochs 60
    python benchmarks/mag_like.py --scale 0.1 --record

Measured, on the graph generated in this process (the generator's seconds and peak RSS printed):

- nodes of each type, edges of each relation (without the reverses the preset adds), the mean per source and per
  destination node, and each relation's destinations' p50 / p99 / max in-degree;
- the split of the papers;
- the venue homophily of the citations (share of paper -> paper edges between papers of one venue), and of
  "co-authorship through a paper" (share of an author's writes edges into the venue that author writes most in);
- METIS (the stage's library, every node type's count balanced) at 4 parts: the share of edges cut, and the halo
  rows per node (a part's distinct remote neighbours, summed over the parts);
- test accuracy of an MLP 2 x 256 on the papers' features (full batch, Adam lr 0.01, dropout 0.5, the step of best
  validation accuracy, evaluated every 5 of 150 steps), and of R-GCN 2 x 64 (our model, one process, whole graph,
  authors, institutions and fields learnt as 64-wide embeddings, Adam lr 0.01, dropout 0.5, ``--epochs``, the
  epoch of best validation accuracy, evaluated every 5).

Published (ogbn-mag, OGB's release; [OGB] Hu et al., Open Graph Benchmark, NeurIPS 2020, arXiv 2005.00687, and
https://ogb.stanford.edu/docs/nodeprop/#ogbn-mag): the node and edge counts per type and relation, the split
(train before 2018: 629,571; validation 2018: 64,879; test 2019: 41,939), the MLP's 26.92% and full-batch R-GCN's
46.78% test accuracy (OGB's baselines; ``../shared/REFERENCES.md``: "about 47%"). The homophilies, degree tails
and METIS's cut of the real graph are not published: shown as "not published", ours measured.
"""
import argparse
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from common import add_record_option, publish

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.mag_like import MAG_EDGES, MAG_NODES, MAG_TOTAL
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gnn import GNN
from sylvie.partition.metis import metis_assign, metis_input

PUBLISHED = {
    **{f"nodes: {t}": (n, "OGB") for t, n in MAG_NODES.items()},
    **{f"edges: {r.name}": (m, "OGB") for r, m in MAG_EDGES.items()},
    "train papers": (629_571, "OGB"), "validation papers": (64_879, "OGB"), "test papers": (41_939, "OGB"),
    "MLP test accuracy": (0.2692, "OGB baseline"), "R-GCN test accuracy": (0.4678, "OGB baseline (full batch)"),
}
SCALED = {k for k in PUBLISHED if k.startswith(("nodes", "edges", "train", "valid", "test papers"))}


def generate(scale: float, seed: int, knobs: dict):
    t0 = time.perf_counter()
    graph = generate_from(section("dataset", {"preset": "mag", "nodes": max(2000, round(MAG_TOTAL * scale)),
                                              "seed": seed, **knobs}), "synthetic-mag")
    return graph, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def typed_shape(graph, per_relation) -> dict:
    """Nodes of each type; for each relation but the reverses: its edges, ``per_relation(r, rel, mine)``'s rows
    (``mine``: its edges' mask) and its destinations' in-degree tail."""
    out = {}
    for t, n in zip(graph.types.node_types, graph.node_counts, strict=True):
        out[f"nodes: {t}"] = n
    offsets = graph.type_offsets
    for r, rel in enumerate(graph.types.relations):
        if rel.name.startswith("rev-"):
            continue
        mine = graph.relation == r
        d = graph.types.ends(r)[1]
        out[f"edges: {rel.name}"] = int(mine.sum())
        out.update(per_relation(r, rel, mine))
        into = np.bincount(graph.dst[mine] - offsets[d], minlength=graph.node_counts[d])
        pct = np.percentile(into, [50, 99])
        out[f"{rel.name}: {rel.dst} in-degree p50 / p99 / max"] = f"{pct[0]:,.0f} / {pct[1]:,.0f} / {into.max():,}"
    return out


def shape(graph) -> dict:
    def per(r, rel, mine):
        s, d = graph.types.ends(r)
        m = int(mine.sum())
        return {f"{rel.name}: per {rel.src} / per {rel.dst}": f"{m / graph.node_counts[s]:.2f} / "
                                                               f"{m / graph.node_counts[d]:.2f}"}

    out = typed_shape(graph, per)
    out["train papers"], out["validation papers"], out["test papers"] = (int(m.sum()) for m in graph.masks.values())
    y = graph.labels
    cites = graph.relation == graph.types.relations.index(next(r for r in graph.types.relations if r.name == "cites"))
    out["citations within a venue"] = float((y[graph.src[cites]] == y[graph.dst[cites]]).mean())
    writes = graph.relation == graph.types.relations.index(next(r for r in graph.types.relations if r.name == "writes"))
    a, p = graph.src[writes], y[graph.dst[writes]]
    key = a * graph.num_classes + p
    counts = np.bincount(key - key.min())
    top = np.zeros(a.max() + 1, np.int64)
    np.maximum.at(top, (np.flatnonzero(counts) + key.min()) // graph.num_classes, counts[counts > 0])
    out["an author's papers in the author's top venue"] = float(top.sum() / a.shape[0])
    return out


def cut(graph) -> dict:
    t0 = time.perf_counter()
    assign = metis_assign(metis_input(graph), 4)
    cross = assign[graph.src] != assign[graph.dst]
    pairs = np.unique(assign[graph.dst[cross]].astype(np.int64) * graph.num_nodes + graph.src[cross])
    print(f"METIS 4 parts: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return {"edge cut, 4 parts": float(cross.mean()), "halo per node, 4 parts": pairs.shape[0] / graph.num_nodes}


def mlp_accuracy(graph, steps: int = 150, every: int = 5) -> float:
    papers = graph.node_counts[graph.types.target_index]
    x = torch.from_numpy(graph.type_features[graph.types.target_index])
    y = torch.from_numpy(graph.labels[:papers])
    masks = [torch.from_numpy(m[:papers]) for m in graph.masks.values()]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                                torch.nn.Linear(256, graph.num_classes))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    best = (-1.0, 0.0)
    for step in range(steps):
        model.train()
        loss = F.cross_entropy(model(x)[masks[0]], y[masks[0]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % every:
            continue
        model.eval()
        with torch.no_grad():
            pred = model(x).argmax(1)
        val, test = ((pred[m] == y[m]).float().mean().item() for m in masks[1:])
        best = max(best, (val, test))
    print(f"MLP: val {best[0]:.4f} test {best[1]:.4f}", file=sys.stderr)
    return best[1]


def rgcn_accuracy(graph, epochs: int, every: int = 5) -> float:
    counts = graph.node_counts
    tb = whole_graph_block(graph.src, graph.dst, counts, types=graph.types, relation=graph.relation)
    papers = counts[graph.types.target_index]
    y = torch.from_numpy(graph.labels[:papers])
    masks = [torch.from_numpy(m[:papers]) for m in graph.masks.values()]
    x = [None if f is None else torch.from_numpy(f) for f in graph.type_features]
    torch.manual_seed(0)
    model = GNN("rgcn", graph.feature_widths, 64, graph.num_classes, 2, 0.5, embedding_rows=counts,
                embedding_width=64, types=graph.types)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    best = (-1.0, 0.0)
    for epoch in range(epochs):
        t0 = time.perf_counter()
        model.train()
        loss = F.cross_entropy(model(tb, x)[masks[0]], y[masks[0]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (epoch + 1) % every and epoch + 1 != epochs:
            continue
        model.eval()
        with torch.no_grad():
            pred = model(tb, x).argmax(1)
        val, test = ((pred[m] == y[m]).float().mean().item() for m in masks[1:])
        best = max(best, (val, test))
        print(f"R-GCN epoch {epoch + 1}: loss {loss.item():.3f} val {val:.4f} test {test:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return best[1]


def _cell(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    return f"{value:.4f}"


def table(ours: dict, scale: float, published: dict = PUBLISHED, scaled: set = SCALED, real: str = "ogbn-mag",
          unpublished: dict | None = None) -> list[str]:
    """Ours beside ``published`` (key -> (value, source); the ``scaled`` keys' values times ``scale``); a key not
    published shows ``unpublished``'s note for it, or "not published"."""
    lines = [f"| statistic | ours | {real}{' x ' + format(scale, 'g') if scale != 1 else ''} (source) "
             "| ours / published |", "| --- | --- | --- | --- |"]
    for key, value in ours.items():
        pub, source = published.get(key, (None, (unpublished or {}).get(key, "not published")))
        if pub is not None and key in scaled:
            pub = round(pub * scale)
        ratio = f"{value / pub:.2f}" if pub and not isinstance(value, str) else "-"
        lines.append(f"| {key} | {_cell(value)} | {'-' if pub is None else _cell(pub)} ({source}) | {ratio} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="nodes as a share of ogbn-mag's 1,939,743")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=60, help="R-GCN's epochs (0: no accuracies)")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                    help="a dataset knob over the preset's (calibration), e.g. homophily=0.5")
    add_record_option(ap, "mag-like")
    ap.add_argument("--topic", default="mag-like", help="the record's topic (default: mag-like)")
    args = ap.parse_args()
    knobs = {k: float(v) for k, v in (kv.split("=", 1) for kv in args.knob)}
    graph, seconds, peak = generate(args.scale, args.seed, knobs)
    print(f"generated in {seconds:.1f} s, peak RSS {peak:.2f} GB", file=sys.stderr)
    ours = {**shape(graph), **cut(graph)}
    if args.epochs:
        ours["MLP test accuracy"] = mlp_accuracy(graph)
        ours["R-GCN test accuracy"] = rgcn_accuracy(graph, args.epochs)
    head = (f"The mag preset at {graph.num_nodes:,} nodes ({args.scale:g} of ogbn-mag; seed {args.seed}"
            f"{', ' + ', '.join(f'{k} {v:g}' for k, v in knobs.items()) if knobs else ''}); generated in "
            f"{seconds:.1f} s, peak {peak:.2f} GB. Published counts scaled by {args.scale:g}.")
    publish("\n".join([head, "", *table(ours, args.scale)]), args.record and args.topic)


if __name__ == "__main__":
    main()
