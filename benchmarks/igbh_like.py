"""The igbh preset (``preset: igbh``) beside IGBH-small's published statistics, in one table: nodes per type, edges
per relation, degrees per relation, feature widths, classes, the split, each relation's class homophily and METIS's
cut at 4 parts.

    python benchmarks/igbh_like.py                                  # 1/10 of IGBH-small: 313,127 nodes
    python benchmarks/igbh_like.py --scale 1                        # its size: 3,131,266 nodes (13 GB of features)
    python benchmarks/igbh_like.py --scale 0.1 --record

Measured, on the graph generated in this process (the generator's seconds and peak RSS printed):

- nodes of each type, edges of each relation (without the reverses the preset adds), the mean per source and per
  destination node, and each relation's destinations' p50 / p99 / max in-degree;
- every type's feature width, the classes, the split of the papers;
- each relation's homophily: the share of its edges whose two ends have one class (a paper's label, another node's
  home class: ``sylvie.data.igbh_like.node_classes``, drawn again from the graph's recorded parameters);
- METIS (the stage's library, every node type's count balanced) at 4 parts: the share of edges cut, and the halo
  rows per node (a part's distinct remote neighbours, summed over the parts).

Published (IGBH-small; [IGB] Khatua et al., KDD 2023, arXiv 2302.13522, https://github.com/IllinoisGraphBenchmark/
IGB-Datasets): the node counts per type and edge counts per relation that DGL's IGBH loader asserts on the
downloaded files (dmlc/dgl, examples/graphbolt/rgcn/download.py; the paper and author counts also in
graphlearn-for-pytorch's examples/igbh/dataset.py, MLPerf's reference), the degrees per relation derived from them,
1024 features on every type (the same loader asserts every type's (n, 1024)), 19 classes (IGB's loader's default;
2,983 the other label set), and the split IGB's loader makes (igb/dataloader.py, IGBHeteroDGLDataset: a random 60% /
20% / rest of the papers). Its homophilies, degree tails and METIS's cut are not published: shown as "not
published" (the homophily rows with the preset's assumed value), ours measured. No accuracy is compared: IGB's
published heterogeneous accuracies are not for IGBH-small with a model we run here.
"""
import argparse
import resource
import sys
import time

from common import add_record_option, publish
from mag_like import cut, table, typed_shape

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.igbh_like import IGBH_EDGES, IGBH_FEATURES, IGBH_NODES, IGBH_SPLIT, IGBH_TOTAL, node_classes

PAPERS = IGBH_NODES["paper"]
PUBLISHED = {
    **{f"nodes: {t}": (n, "IGB / DGL loader") for t, n in IGBH_NODES.items()},
    **{f"edges: {r.name}": (m, "IGB / DGL loader") for r, m in IGBH_EDGES.items()},
    **{f"{r.name}: per {r.src} (out)": (m / IGBH_NODES[r.src], "derived") for r, m in IGBH_EDGES.items()},
    **{f"{r.name}: per {r.dst} (in)": (m / IGBH_NODES[r.dst], "derived") for r, m in IGBH_EDGES.items()},
    **{f"features: {t}": (IGBH_FEATURES, "IGB / DGL loader") for t in IGBH_NODES},
    "classes": (19, "IGB loader default (or 2,983)"),
    "train papers": (int(PAPERS * IGBH_SPLIT[0]), "IGB loader"),
    "validation papers": (int(PAPERS * IGBH_SPLIT[1]), "IGB loader"),
    "test papers": (PAPERS - int(PAPERS * IGBH_SPLIT[0]) - int(PAPERS * IGBH_SPLIT[1]), "IGB loader"),
}
SCALED = {k for k in PUBLISHED if k.startswith(("nodes", "edges", "train", "valid", "test papers"))}


def generate(scale: float, seed: int, knobs: dict):
    t0 = time.perf_counter()
    options = section("dataset", {"preset": "igbh", "nodes": max(2000, round(IGBH_TOTAL * scale)), "seed": seed,
                                  **knobs})
    graph = generate_from(options, "synthetic-igbh")
    return options, graph, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def shape(graph, options) -> tuple[dict, dict]:
    """The statistics, and the source column of the homophily rows (the preset's assumed value)."""
    home = node_classes(graph)
    sources = {}

    def per(r, rel, mine):
        s, d = graph.types.ends(r)
        m = int(mine.sum())
        key = f"{rel.name}: edges within one class"
        target = options.relation_homophily.get(rel.name, options.homophily)
        sources[key] = f"not published; the preset assumes {target:g}"
        return {f"{rel.name}: per {rel.src} (out)": m / graph.node_counts[s],
                f"{rel.name}: per {rel.dst} (in)": m / graph.node_counts[d],
                key: float((home[graph.src[mine]] == home[graph.dst[mine]]).mean())}

    out = typed_shape(graph, per)
    for t, width in zip(graph.types.node_types, graph.feature_widths, strict=True):
        out[f"features: {t}"] = int(width or 0)
    out["classes"] = graph.num_classes
    out["train papers"], out["validation papers"], out["test papers"] = (int(m.sum()) for m in graph.masks.values())
    return out, sources


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1, help="nodes as a share of IGBH-small's 3,131,266")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cut", action="store_true", help="leave out METIS's cut (its minutes at full size)")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                    help="a dataset knob over the preset's, e.g. features=128")
    add_record_option(ap, "igbh-like")
    ap.add_argument("--topic", default="igbh-like", help="the record's topic (default: igbh-like)")
    args = ap.parse_args()
    knobs = {k: int(v) if v.isdigit() else float(v) for k, v in (kv.split("=", 1) for kv in args.knob)}
    options, graph, seconds, peak = generate(args.scale, args.seed, knobs)
    print(f"generated in {seconds:.1f} s, peak RSS {peak:.2f} GB", file=sys.stderr)
    ours, sources = shape(graph, options)
    if not args.no_cut:
        ours.update(cut(graph))
    head = (f"The igbh preset at {graph.num_nodes:,} nodes ({args.scale:g} of IGBH-small; seed {args.seed}"
            f"{', ' + ', '.join(f'{k} {v:g}' for k, v in knobs.items()) if knobs else ''}); generated in "
            f"{seconds:.1f} s, peak {peak:.2f} GB. Published counts scaled by {args.scale:g}.")
    lines = table(ours, args.scale, PUBLISHED, SCALED, "IGBH-small", sources)
    publish("\n".join([head, "", *lines]), args.record and args.topic)


if __name__ == "__main__":
    main()
