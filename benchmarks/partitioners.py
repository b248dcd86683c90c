"""Our partition stage against DGL's `dgl.distributed.partition_graph` on the same graph: wall time, peak memory,
edge cut and size on disk, at several part counts.

    python benchmarks/partitioners.py                                 # 500K nodes / 10M edges; 4, 8 and 16 parts
    python benchmarks/partitioners.py --parts 4 --record

Both start from the same canonical graph on disk (`sylvie download synthetic`) and run in a fresh process each, so
a process's peak RSS (from `wait4`) is the tool's own. Ours: `sylvie partition` (METIS k-way, balancing nodes,
training nodes and in-edges; Arrow shards with a 1-hop halo, plus the replicated topology). DGL's: METIS with
`balance_ntypes` = the training mask and `balance_edges`, 1-hop halo, as its documentation has distributed
training set it up. The edge cut is the share of directed edges whose ends lie in different parts, computed the
same way for both (DGL's from its node map).
"""
import argparse
import json
import os
import sys
from pathlib import Path

from common import BIN, add_record_option, publish, run, synthetic_graph

DGL_CHILD = r"""
import json, sys
import numpy as np, torch, dgl
from sylvie.data.graph import load_graph
graph_dir, out, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
g = load_graph(graph_dir)
dg = dgl.graph((torch.from_numpy(g.src), torch.from_numpy(g.dst)), num_nodes=g.num_nodes)
dg.ndata["feat"] = torch.from_numpy(g.features)
dg.ndata["label"] = torch.from_numpy(g.labels)
for name, mask in (("train_mask", g.train_mask), ("val_mask", g.val_mask), ("test_mask", g.test_mask)):
    dg.ndata[name] = torch.from_numpy(mask)
orig_nids, _ = dgl.distributed.partition_graph(dg, "graph", parts, out, num_hops=1, part_method="metis",
                                               balance_ntypes=dg.ndata["train_mask"], balance_edges=True,
                                               return_mapping=True)
meta = json.load(open(f"{out}/graph.json"))
ranges = np.asarray(meta["node_map"]["_N"])  # per part: [first, last) of its new node ids
part_of_new = np.searchsorted(ranges[:, 1], np.arange(g.num_nodes), side="right")
part = np.empty(g.num_nodes, dtype=np.int64)
part[orig_nids.numpy()] = part_of_new
print(json.dumps({"cut": float((part[g.src] != part[g.dst]).mean()), "edges": int(g.num_edges)}))
"""


def measured(cmd: list) -> tuple[float, float, str]:
    """(seconds, peak RSS in GB, output) of one child process."""
    ran = run(cmd)
    return ran.seconds, ran.max_rss_kib / 2**20, ran.output


def last_json(output: str) -> dict:
    """The JSON line ``DGL_CHILD`` prints last (DGL's own messages may come around it)."""
    return json.loads(next(line for line in reversed(output.splitlines()) if line.startswith("{")))


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--parts", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--work", default="results/bench-partitioners")
    add_record_option(ap, "partitioners")
    args = ap.parse_args()
    work = Path(args.work)
    graph = synthetic_graph(work / "graph", nodes=args.nodes, avg_degree=args.avg_degree, features=args.features,
                            classes=16)
    rows = []
    for parts in args.parts:
        ours = work / f"sylvie-p{parts}"
        secs, rss, _ = measured([BIN / "sylvie", "partition", graph, "--out", ours, "--parts", parts])
        manifest = json.loads((ours / "manifest.json").read_text())
        rows.append((parts, "sylvie partition", secs, rss, manifest["edge_cut"] / manifest["num_edges"],
                     disk_mb(ours)))
        theirs = work / f"dgl-p{parts}"
        secs, rss, out = measured([sys.executable, "-c", DGL_CHILD, graph, theirs, parts])
        rows.append((parts, "dgl.distributed.partition_graph", secs, rss, last_json(out)["cut"], disk_mb(theirs)))
        for r in rows[-2:]:
            print(f"{r[0]} parts, {r[1]}: {r[2]:.1f} s, {r[3]:.2f} GB, cut {r[4]:.1%}, {r[5]:.0f} MB", file=sys.stderr)
    lines = [f"synthetic graph {args.nodes:,} nodes, ~{int(args.nodes * args.avg_degree):,} directed edges, "
             f"{args.features} features; one fresh process per run, on this machine ({os.cpu_count()} cores).", "",
             "| parts | tool | seconds | peak RSS GB | edge cut | on disk MB |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {p} | {tool} | {s:.1f} | {m:.2f} | {c:.1%} | {d:.0f} |" for p, tool, s, m, c, d in rows]
    publish("\n".join(lines), args.record and "partitioners")


if __name__ == "__main__":
    main()
