"""Pipelined, 1-bit training on an emulated bandwidth-limited cluster (as root): epoch time, communication
waited on (exposed) and hidden, and final test accuracy for six ways of exchanging halo data.

    sudo python benchmarks/cluster.py                 # 4 nodes at 1gbit, synthetic 200K nodes / 4M edges
    sudo python benchmarks/cluster.py --rate 200mbit --epochs 20 --record

Each configuration trains GraphSAGE (3 layers, hidden 256) on the same METIS partition with
`sylvie bench cluster`: one torchrun node per network namespace, every link limited with tc tbf. Epoch
time is the median over epochs after the first (synchronous) one; the baseline (vanilla fp32
synchronous) is measured in the same run. Accuracy is evaluated once, after the last epoch, so no
evaluation traffic shares the links with the training exchanges. --record also writes the table to a new dated
record under benchmarks/records/.

--bns instead trains boundary-node sampling (BNS-GCN, train.boundary_sampling) at p = 0.1, 0.5 and 1.0, each fp32
synchronous and 1-bit pipelined, GraphSAGE 3 layers x 64, dropout 0.5, lr 0.01, weight decay 5e-4, on a synthetic
graph of 50,000 nodes (degree 20, 64 features, 16 classes, 30% train, 10% validation) cut in METIS parts:

    sudo python benchmarks/cluster.py --bns --rate 100mbit --epochs 60 --record
    sudo python benchmarks/cluster.py --bns --partition /tmp/g50/p4 ...   # an existing partition of that graph

--typed instead trains R-GCN 2 x 64 and R-GAT 2 x (4 x 16) (full-graph; authors, institutions and fields of study
learnt as embeddings, their halo rows exchanged with the hidden layers') on the mag preset at --graph-nodes nodes
in 4 METIS parts (every node type's count balanced), each fp32 synchronous and 1-bit pipelined:

    sudo python benchmarks/cluster.py --typed --rate 100mbit --graph-nodes 193974 --epochs 10 --record
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

from common import add_record_option, partition, publish, synthetic_graph, synthetic_partition

from sylvie.bench.cluster_run import train_on_cluster

BNS_SHARES = (0.1, 0.5, 1.0)
BNS_EXCHANGES = [("fp32 synchronous", ["--bits", "32"]), ("1-bit pipelined", ["--bits", "1", "--pipeline"])]
BNS_MODEL = ["--arch", "sage", "--layers", "3", "--hidden", "64", "--dropout", "0.5", "--self-loop", "--lr", "0.01",
             "--weight-decay", "0.0005"]

CONFIGS = [
    ("vanilla fp32 synchronous", ["--bits", "32"]),
    ("fp32 pipelined", ["--bits", "32", "--pipeline"]),
    ("1-bit synchronous", ["--bits", "1"]),
    ("1-bit pipelined", ["--bits", "1", "--pipeline"]),
    ("1-bit pipelined, K = 5", ["--bits", "1", "--pipeline", "--staleness", "5"]),
    ("1-bit adaptive, K = 5", ["--bits", "1", "--pipeline", "--staleness", "5", "--staleness-policy", "adaptive"]),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4, help="emulated machines = partitions (default: 4)")
    ap.add_argument("--rate", default="1gbit", help="every node's link, a tc rate (default: 1gbit)")
    ap.add_argument("--graph-nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=float, default=20.0, help="directed edges per node (default: 20 -> 4M)")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--work", default="results/bench-cluster", help="graph, partition and runs go here")
    add_record_option(ap, "cluster")
    ap.add_argument("--topic", default=None,
                    help="the record's topic (default: cluster, with --bns cluster-bns, with --typed cluster-typed)")
    ap.add_argument("--bns", action="store_true", help="boundary-node sampling at p = 0.1, 0.5, 1 (see above)")
    ap.add_argument("--partition", help="--bns: an existing partition of the BNS graph (else made under --work)")
    ap.add_argument("--typed", action="store_true", help="R-GCN and R-GAT on the mag preset (see above)")
    args = ap.parse_args()
    if args.bns:
        return bns(args)
    if args.typed:
        return typed(args)

    work = Path(args.work)
    _, part = synthetic_partition(work, parts=args.nodes, nodes=args.graph_nodes, avg_degree=args.avg_degree,
                                  features=args.features, classes=16)
    model = ["--arch", "sage", "--layers", "3", "--hidden", "256", "--no-self-loop", "--epochs", str(args.epochs),
             "--checkpoint-every", "0", "--log-every", "1", "--eval-every", str(args.epochs)]
    rows = []
    for name, flags in CONFIGS:
        t0 = time.time()
        out = work / "runs" / name.replace(" ", "").replace(",", "-").replace("=", "")
        records = train_on_cluster(part, out, args.nodes, args.rate, model + flags, timeout_s=7200)
        steady = records[1:] or records
        row = {"name": name, "epoch": statistics.median(r.epoch_time for r in steady),
               "exposed": statistics.median(r.comm_time for r in steady),
               "hidden": statistics.median(r.hidden_comm_time for r in steady),
               "compute": statistics.median(r.compute_time for r in steady),
               "codec": statistics.median(r.codec_time for r in steady),
               "mb": statistics.median(r.bytes_sent for r in steady) / 1e6,
               "sync": f"{sum(r.halo.staleness == 0 for r in records)}/{len(records)}", "acc": records[-1].test_acc}
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
    publish("\n".join(lines), args.record and (args.topic or "cluster"))


def bns(args) -> None:
    """Boundary-node sampling on the emulated cluster: per p and exchange, rank 0's median epoch time (epochs 2 on),
    halo bytes per epoch (all ranks), the sampling's own time and the test accuracy after the last epoch."""
    work = Path(args.work)
    part = Path(args.partition) if args.partition else work / f"bns-metis-p{args.nodes}"
    if not (part / "manifest.json").exists():
        graph = synthetic_graph(work / "bns-graph", nodes=50000, avg_degree=20, features=64, classes=16,
                                train_fraction=0.3, val_fraction=0.1)
        partition(graph, part, parts=args.nodes)
    common = BNS_MODEL + ["--epochs", str(args.epochs), "--checkpoint-every", "0", "--log-every", "10",
                          "--eval-every", str(args.epochs)]
    rows = []
    for share in BNS_SHARES:
        for exchange, flags in BNS_EXCHANGES:
            t0 = time.time()
            out = work / "runs-bns" / f"p{share:g}-{exchange.replace(' ', '-')}"
            records = train_on_cluster(part, out, args.nodes, args.rate,
                                       common + flags + ["--boundary-sampling", str(share)], timeout_s=7200)
            steady = records[1:] or records
            rows.append({"p": share, "exchange": exchange,
                         "epoch": statistics.median(r.epoch_time for r in steady),
                         "exposed": statistics.median(r.comm_time for r in steady),
                         "mb": statistics.median(r.bytes_sent for r in steady) / 1e6,
                         "sample_ms": 1e3 * statistics.median(r.sample_time for r in steady),
                         "acc": records[-1].test_acc})
            print(f"p = {share:g}, {exchange}: {rows[-1]['epoch']:.3f} s/epoch, test {rows[-1]['acc']:.2%} "
                  f"({time.time() - t0:.0f} s wall)", file=sys.stderr)
    base = next(r["epoch"] for r in rows if r["p"] == 1.0 and r["exchange"] == BNS_EXCHANGES[0][0])
    lines = [f"{args.nodes} emulated nodes at {args.rate}; synthetic graph 50,000 nodes, ~1,000,000 directed edges, "
             f"64 features, 16 classes ({part.name}); GraphSAGE 3 layers x 64, dropout 0.5, lr 0.01, weight decay "
             f"5e-4; {args.epochs} epochs; medians over epochs 2-{args.epochs}, rank 0's epoch time.", "",
             "| p (boundary_sampling) | exchange | s/epoch | speed-up | comm waited s | halo MB/epoch (all ranks) "
             "| sampling ms/epoch | test acc after the last epoch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['p']:g} | {r['exchange']} | {r['epoch']:.3f} | {base / r['epoch']:.2f}x | "
                     f"{r['exposed']:.3f} | {r['mb']:.1f} | {r['sample_ms']:.1f} | {r['acc']:.2%} |")
    publish("\n".join(lines), args.record and (args.topic or "cluster-bns"))


TYPED_MODELS = [("R-GCN 2 x 64", ["--arch", "rgcn", "--hidden", "64"]),
                ("R-GAT 2 x (4 x 16)", ["--arch", "rgat", "--hidden", "16", "--heads", "4"])]


def typed(args) -> None:
    """R-GCN and R-GAT on the mag preset on the emulated cluster: per model and exchange, rank 0's median epoch time
    (epochs 2 on), the halo bytes per epoch (all ranks), the test accuracy after the last epoch, and 1-bit pipelined's
    epoch over fp32 synchronous's."""
    work = Path(args.work)
    part = work / f"typed-mag-{args.graph_nodes}-p{args.nodes}"
    if not (part / "manifest.json").exists():
        graph = synthetic_graph(work / f"typed-mag-{args.graph_nodes}", check_params=False, preset="mag",
                                nodes=args.graph_nodes)
        partition(graph, part, parts=args.nodes)
    common = ["--layers", "2", "--dropout", "0.5", "--lr", "0.01", "--epochs", str(args.epochs),
              "--checkpoint-every", "0", "--log-every", "1", "--eval-every", str(args.epochs)]
    rows = []
    for model, model_flags in TYPED_MODELS:
        for exchange, flags in BNS_EXCHANGES:
            t0 = time.time()
            out = work / "runs-typed" / f"{model.split()[0]}-{exchange.replace(' ', '-')}"
            records = train_on_cluster(part, out, args.nodes, args.rate, common + model_flags + flags,
                                       timeout_s=7200)
            steady = records[1:] or records
            rows.append({"model": model, "exchange": exchange,
                         "epoch": statistics.median(r.epoch_time for r in steady),
                         "exposed": statistics.median(r.comm_time for r in steady),
                         "mb": statistics.median(r.bytes_sent for r in steady) / 1e6, "acc": records[-1].test_acc})
            print(f"{model}, {exchange}: {rows[-1]['epoch']:.3f} s/epoch, test {rows[-1]['acc']:.2%} "
                  f"({time.time() - t0:.0f} s wall)", file=sys.stderr)
    lines = [f"{args.nodes} emulated nodes at {args.rate}; the mag preset at {args.graph_nodes:,} nodes ({part.name}; "
             f"4 node types, 8 relations with the reverses, 128 features on papers, 349 venues); dropout 0.5, lr "
             f"0.01; {args.epochs} epochs; medians over epochs 2-{args.epochs}, rank 0's epoch time.", "",
             "| model | exchange | s/epoch | 1-bit pipelined / fp32 synchronous | comm waited s | halo MB/epoch "
             "(all ranks) | test acc after the last epoch |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        base = next(b["epoch"] for b in rows if b["model"] == r["model"] and b["exchange"] == BNS_EXCHANGES[0][0])
        lines.append(f"| {r['model']} | {r['exchange']} | {r['epoch']:.3f} | {r['epoch'] / base:.2f}x | "
                     f"{r['exposed']:.3f} | {r['mb']:.1f} | {r['acc']:.2%} |")
    publish("\n".join(lines), args.record and (args.topic or "cluster-typed"))


if __name__ == "__main__":
    main()
