"""The citation2 preset (``preset: citation2``) beside ogbl-citation2's published statistics, in one table: size,
references per paper, the held-out pairs and their negatives, the degree distributions, and the test MRR of
untrained scores (what a link predictor can learn from: the features, the features averaged over a paper's
neighbours as one GNN layer does, popularity, common neighbours).

    python benchmarks/citation_like.py                          # ogbl-citation2's size: 2,927,963 papers
    python benchmarks/citation_like.py --scale 0.0342 --record  # 100,000 papers

Measured on the graph generated in this process (the generator's seconds and peak RSS printed):

- papers, citations (every split), references per paper, the validation and test pairs, their share of the
  citations, the evaluated papers' share of the papers, negatives per evaluated pair;
- the citations' in-degree (times cited) and out-degree (references) p50 / p90 / p99 / max, the share of papers never
  cited; the share of citations within the citing paper's topic (the generator's latent topics);
- the test pairs' MRR against their fixed negatives, as OGB's evaluator ranks (a tie counts half), for scores
  needing no training: random (expected), the dot product of the features, of the features averaged over a paper
  and its neighbours in the message graph (the training citations both ways), the candidate's degree there
  (popularity), and the common neighbours and Adamic-Adar index of the pair there.

Published (ogbl-citation2): [OGB] Hu et al., Open Graph Benchmark, NeurIPS 2020 (arXiv 2005.00687), and
../shared/REFERENCES.md: 2,927,963 papers, 30,561,187 citations, 128 features, 1,000 fixed negatives per evaluated
pair; [EX] OGB's example snap-stanford/ogb examples/linkproppred/citation2/gnn.py, which pairs 86,596 training
citations with the validation split's target_node_neg, one row per validation pair: 86,596 validation pairs, and as
many test pairs (one of each per source paper, REFERENCES.md). The degree quantiles of the real graph are not
published: shown as such, ours measured. The real graph's trained GNNs reach test MRR 0.80-0.85 (REFERENCES.md, OGB's
leaderboard); the untrained scores here have no published counterpart.
"""
import argparse
import resource
import sys
import time

import numpy as np
import scipy.sparse as sp
import yaml
from common import add_record_option, publish

from sylvie.config import section
from sylvie.data.citation_like import citations
from sylvie.data.generated import generate_from

PAPERS, CITATIONS, EVALUATED = 2_927_963, 30_561_187, 86_596
PUBLISHED = {
    "papers": (PAPERS, "OGB"), "citations (every split)": (CITATIONS, "OGB"),
    "references per paper": (CITATIONS / PAPERS, "OGB, derived"),
    "validation pairs": (EVALUATED, "EX"), "test pairs": (EVALUATED, "EX, one per source as validation"),
    "held-out share of the citations": (2 * EVALUATED / CITATIONS, "OGB, EX, derived"),
    "evaluated papers' share of the papers": (EVALUATED / PAPERS, "OGB, EX, derived"),
    "negatives per evaluated pair": (1000, "OGB"), "features": (128, "OGB"),
}
SCALED = {"papers", "citations (every split)", "validation pairs", "test pairs"}


def generate(scale: float, seed: int, knobs: dict):
    t0 = time.perf_counter()
    options = section("dataset", {"preset": "citation2", "nodes": max(1000, round(PAPERS * scale)), "seed": seed,
                                  **knobs})
    graph = generate_from(options, "synthetic-citation2")
    return graph, options, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _quantiles(name: str, values: np.ndarray) -> dict:
    q = np.percentile(values, [50, 90, 99])
    return {f"{name} p50": float(q[0]), f"{name} p90": float(q[1]), f"{name} p99": float(q[2]),
            f"{name} max": int(values.max())}


def shape(graph, options) -> dict:
    link, n = graph.link, graph.num_nodes
    counts = link.counts()
    c = citations(nodes=options.nodes, avg_degree=options.avg_degree, classes=options.classes,
                  homophily=options.homophily, degree_sigma=options.degree_sigma, val_fraction=options.val_fraction,
                  seed=options.seed)
    total = link.num_pairs
    return {
        "papers": n, "citations (every split)": total, "references per paper": total / n,
        "validation pairs": counts["val"], "test pairs": counts["test"],
        "held-out share of the citations": (counts["val"] + counts["test"]) / total,
        "evaluated papers' share of the papers": counts["test"] / n,
        "negatives per evaluated pair": int(link.negatives.shape[1]), "features": int(graph.features.shape[1]),
        **_quantiles("times cited", np.bincount(link.dst, minlength=n)),
        **_quantiles("references", np.bincount(link.src, minlength=n)),
        "share of papers never cited": float((np.bincount(link.dst, minlength=n) == 0).mean()),
        "share of citations within the citing paper's topic": float((c.topic[c.src] == c.topic[c.dst]).mean()),
        "message graph edges (training citations both ways)": graph.num_edges,
    }


def _mrr(pos: np.ndarray, neg: np.ndarray) -> float:
    """OGB's MRR: the positive's rank among its negatives, a tie counting half."""
    rank = 1 + (neg > pos[:, None]).sum(1) + 0.5 * (neg == pos[:, None]).sum(1)
    return float((1 / rank).mean())


def untrained_mrr(graph, rows: int = 256) -> dict:
    """The test pairs' MRR for the scores needing no training (module docstring)."""
    link, n = graph.link, graph.num_nodes
    test = link.indices("test")
    src, dst, neg = link.src[test], link.dst[test], link.negatives_of("test")
    cand = np.concatenate([dst[:, None], neg], axis=1)  # the positive first
    adj = sp.csr_matrix((np.ones(graph.num_edges, np.float32), (graph.src, graph.dst)), shape=(n, n))
    degree = np.asarray(adj.sum(1)).ravel()
    x = graph.features
    mean = (adj @ x + x) / (degree + 1)[:, None]
    out = {"test MRR: random (expected)": float(np.mean(1 / (1 + np.arange(cand.shape[1]))))}
    for name, h in (("features' dot product", x), ("dot product of features averaged over neighbours", mean)):
        scores = np.concatenate([np.einsum("rd,rkd->rk", h[src[i:i + rows]], h[cand[i:i + rows]])
                                 for i in range(0, src.shape[0], rows)])
        out[f"test MRR: {name}"] = _mrr(scores[:, 0], scores[:, 1:])
    out["test MRR: candidate's degree (popularity)"] = _mrr(degree[cand[:, 0]], degree[cand[:, 1:]])
    weight = np.where(degree > 1, 1 / np.log(np.maximum(degree, 2)), 0).astype(np.float32)
    for name, middle in (("common neighbours", None), ("Adamic-Adar", sp.diags(weight))):
        two_hop = adj[src] if middle is None else adj[src] @ middle
        two_hop = (two_hop @ adj).tocsr()
        scores = np.asarray(two_hop[np.repeat(np.arange(src.shape[0]), cand.shape[1]), cand.ravel()]).reshape(
            cand.shape)
        out[f"test MRR: {name}"] = _mrr(scores[:, 0], scores[:, 1:])
    return out


def _cell(value) -> str:
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    return f"{value:.4f}" if abs(value) < 100 else f"{value:,.1f}"


def table(ours: dict, scale: float) -> list[str]:
    lines = [f"| statistic | ours | ogbl-citation2{' x ' + format(scale, 'g') if scale != 1 else ''} (source) "
             "| ours / published |", "| --- | --- | --- | --- |"]
    for key, value in ours.items():
        pub, source = PUBLISHED.get(key, (None, "not published"))
        if pub is not None and key in SCALED:
            pub = round(pub * scale)
        ratio = f"{value / pub:.2f}" if pub else "-"
        lines.append(f"| {key} | {_cell(value)} | {'-' if pub is None else _cell(pub)} ({source}) | {ratio} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="papers as a share of ogbl-citation2's 2,927,963")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-mrr", action="store_true", help="leave out the untrained scores' MRR")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                    help="a dataset knob over the preset's (calibration), e.g. degree_sigma=2")
    add_record_option(ap, "citation-like")
    ap.add_argument("--topic", default="citation-like", help="the record's topic (default: citation-like)")
    args = ap.parse_args()
    knobs = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.knob)}
    graph, options, seconds, peak = generate(args.scale, args.seed, knobs)
    print(f"generated in {seconds:.1f} s, peak RSS {peak:.2f} GB", file=sys.stderr)
    ours = shape(graph, options)
    if not args.no_mrr:
        ours.update(untrained_mrr(graph))
    head = (f"The citation2 preset at {graph.num_nodes:,} papers ({args.scale:g} of ogbl-citation2; seed {args.seed}"
            f"{', ' + ', '.join(f'{k} {v:g}' for k, v in knobs.items()) if knobs else ''}); generated in "
            f"{seconds:.1f} s, peak RSS {peak:.2f} GB (this process, before measuring). Published counts scaled by "
            f"{args.scale:g}; OGB: Hu et al. 2020 and ../shared/REFERENCES.md; EX: OGB's citation2 example (gnn.py), "
            f"86,596 validation pairs.")
    publish("\n".join([head, "", *table(ours, args.scale)]), args.record and args.topic)


if __name__ == "__main__":
    main()
