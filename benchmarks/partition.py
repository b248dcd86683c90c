"""Seconds and peak memory to generate, METIS-partition and shard a synthetic graph (default: 10M edges).

    python benchmarks/partition.py [--nodes 500000] [--avg-degree 20] [--features 64] [--parts 4]

Prints one table row per phase; the random partitioner is measured in the same run as the baseline.
"""
import argparse
import resource
import tempfile
import time
from pathlib import Path

from common import provenance

from sylvie.config import section
from sylvie.data.generated import generate_from
from sylvie.data.graph import save_graph
from sylvie.partition.stage import partition_dataset


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--parts", type=int, default=4)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        g = generate_from(section("dataset", {"nodes": args.nodes, "avg_degree": args.avg_degree,
                                              "features": args.features, "classes": 16}))
        save_graph(g, Path(tmp) / "ds", source="synthetic")
        rows.append(("generate + save", time.perf_counter() - t, peak_rss_gb()))
        edges = g.num_edges
        del g
        for method in ("random", "metis"):
            t = time.perf_counter()
            m = partition_dataset(Path(tmp) / "ds", Path(tmp) / method, args.parts, method, progress=False)
            rows.append((f"partition+shard ({method})", time.perf_counter() - t, peak_rss_gb()))
            rows[-1] += (m["edge_cut"] / edges,)
    print(f"synthetic graph: {args.nodes:,} nodes, {edges:,} directed edges, {args.features} features, "
          f"{args.parts} parts")
    print(f"{'phase':<26} {'seconds':>9} {'peak RSS GB':>12} {'edge cut':>9}")
    for r in rows:
        cut = f"{100 * r[3]:.1f}%" if len(r) > 3 else ""
        print(f"{r[0]:<26} {r[1]:>9.1f} {r[2]:>12.2f} {cut:>9}")
    print(f"\n{provenance()}")


if __name__ == "__main__":
    main()
