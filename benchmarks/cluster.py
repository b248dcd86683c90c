"""Pipelined, 1-bit training on an emulated bandwidth-limited cluster (as root): epoch time, communication
waited on (exposed) and hidden, and final test accuracy for six ways of exchanging halo data.

    sudo python benchmarks/cluster.py                 # 4 nodes at 1gbit, synthetic 200K nodes / 4M edges
    sudo python benchmarks/cluster.py --rate 200mbit --epochs 20 --write benchmarks/README.md

Each configuration trains GraphSAGE (3 layers, hidden 256) on the same METIS partition with
`sylvie bench cluster`: one torchrun node per network namespace, every link limited with tc tbf. Epoch
time is the median over epochs after the first (synchronous) one; the baseline (vanilla fp32
synchronous) is measured in the same run. Accuracy is evaluated once, after the last epoch, so no
evaluation traffic shares the links with the training exchanges. --write replaces the table between the markers in
the file.
"""
import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from markdown_section import write_section

from sylvie.bench.cluster_run import train_on_cluster

CONFIGS = [
    ("vanilla fp32 synchronous", ["--bits", "32"]),
    ("fp32 pipelined", ["--bits", "32", "--pipeline"]),
    ("1-bit synchronous", ["--bits", "1"]),
    ("1-bit pipelined", ["--bits", "1", "--pipeline"]),
    ("1-bit pipelined, K = 5", ["--bits", "1", "--pipeline", "--staleness", "5"]),
    ("1-bit adaptive, K = 5", ["--bits", "1", "--pipeline", "--staleness", "5", "--staleness-policy", "adaptive"]),
]


def sylvie(*args: str) -> None:
    subprocess.run([str(Path(sys.executable).parent / "sylvie"), *args], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4, help="emulated machines = partitions (default: 4)")
    ap.add_argument("--rate", default="1gbit", help="every node's link, a tc rate (default: 1gbit)")
    ap.add_argument("--graph-nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=float, default=20.0, help="directed edges per node (default: 20 -> 4M)")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--work", default="results/bench-cluster", help="graph, partition and runs go here")
    ap.add_argument("--write", help="a Markdown file whose table (between the markers) is replaced")
    ap.add_argument("--section", default="cluster-table",
                    help="marker name: the table goes between <!-- NAME:begin --> and <!-- NAME:end -->")
    args = ap.parse_args()

    work = Path(args.work)
    graph, part = work / "graph", work / f"metis-p{args.nodes}"
    if not graph.exists():
        sylvie("download", "synthetic", "--out", str(graph), "--nodes", str(args.graph_nodes), "--avg-degree",
               str(args.avg_degree), "--features", str(args.features), "--classes", "16")
    if not part.exists():
        sylvie("partition", str(graph), "--out", str(part), "--parts", str(args.nodes))
    model = ["--arch", "sage", "--layers", "3", "--hidden", "256", "--no-self-loop", "--epochs", str(args.epochs),
             "--checkpoint-every", "0", "--log-every", "1", "--eval-every", str(args.epochs)]
    rows = []
    for name, flags in CONFIGS:
        t0 = time.time()
        out = work / "runs" / name.replace(" ", "").replace(",", "-").replace("=", "")
        records = train_on_cluster(part, out, args.nodes, args.rate, model + flags, timeout_s=7200)
        steady = records[1:] or records
        row = {"name": name, "epoch": statistics.median(r["epoch_time"] for r in steady),
               "exposed": statistics.median(r["comm_time"] for r in steady),
               "hidden": statistics.median(r["hidden_comm_time"] for r in steady),
               "compute": statistics.median(r["compute_time"] for r in steady),
               "codec": statistics.median(r["codec_time"] for r in steady),
               "mb": statistics.median(r["bytes_sent"] for r in steady) / 1e6,
               "sync": f"{sum(r['staleness'] == 0 for r in records)}/{len(records)}", "acc": records[-1]["test_acc"]}
        rows.append(row)
        print(f"{name}: {row['epoch']:.3f} s/epoch ({time.time() - t0:.0f} s wall)", file=sys.stderr)
    base = rows[0]["epoch"]
    lines = [f"{args.nodes} emulated nodes at {args.rate}; synthetic graph {args.graph_nodes:,} nodes, "
             f"~{int(args.graph_nodes * args.avg_degree):,} directed edges, {args.features} features; GraphSAGE 3 "
             f"layers, hidden 256; {args.epochs} epochs; medians over epochs 2-{args.epochs}.", "",
             "| configuration | s/epoch | speed-up | comm waited s | comm hidden s | compute s | codec s "
             "| MB sent/epoch "
             "| sync epochs | final test acc |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['epoch']:.3f} | {base / r['epoch']:.2f}x | {r['exposed']:.3f} | "
                     f"{r['hidden']:.3f} | {r['compute']:.3f} | {r['codec']:.3f} | {r['mb']:.1f} | "
                     f"{r['sync']} | {r['acc']:.2%} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        write_section(args.write, args.section, table)


if __name__ == "__main__":
    main()
