"""The two regimes head to head on the emulated cluster (as root): the same GraphSAGE on the same synthetic graph,
trained full-graph (fp32 synchronous, and Sylvie's 1-bit pipelined exchange) and on sampled minibatches (no cache,
and SALIENT++'s VIP cache), with validation accuracy against wall-clock time and the time each needs to reach a
common target accuracy.

    python benchmarks/regimes.py                       # 4 nodes at 100mbit, products-like, 244,903 nodes
    python benchmarks/regimes.py --record
    python benchmarks/regimes.py --preset none --graph-nodes 50000 --avg-degree 20 --fanouts 10 10 10 --batch-size 256

Every configuration runs on the same 4-part METIS partition with ``sylvie bench cluster`` (one torchrun node per
network namespace, links limited with tc tbf) and evaluates every epoch; wall-clock is the sum of the epochs'
training times (evaluation excluded, as in the report). The graph is the products-like preset (``preset:
products``: ogbn-products' shape, validated in ``products_like.py``) at ``--graph-nodes`` nodes, or with ``--preset
none`` the block model at the generator's defaults for label and feature noise. Sampled training's minibatch
(``--fanouts``, first next to the seeds, ``--batch-size`` per rank) is sized so that it touches a small share of
the graph, as on ogbn-products; the table states that share (the trainer's sampler over part 0's training
nodes). The target is 98% of the lowest best validation accuracy of the four, so every configuration reaches it;
target, times and plot are the report's own (``sylvie/report/time_to_accuracy.py``, ``plots.py``). The plot goes
to ``--plot``.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
from common import add_record_option, publish, sylvie, synthetic_partition

from sylvie.bench.cluster_run import train_on_cluster
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.report.plots import plot_accuracy_over_time
from sylvie.report.run_output import RunOutput
from sylvie.report.time_to_accuracy import accuracy_over_time, accuracy_target, time_to_accuracy
from sylvie.sampling.neighbor_sampler import NeighborSampler


def inputs_share(part: Path, args, batches: int = 20) -> float:
    """The mean share of the graph's nodes that are the inputs of one of part 0's minibatches (the trainer's
    sampler, fanouts and batch size, over the partition's topology)."""
    manifest = read_manifest(part)
    topo = read_topology(part, manifest)
    train = np.flatnonzero(read_shard(part, 0, manifest).train)
    sampler = NeighborSampler(topo.in_indptr, topo.in_src, args.fanouts[::-1], train, batches, 0, 0)
    rng = np.random.default_rng(0)
    counts = [sampler.sample(rng.choice(train, args.batch_size, replace=False), 0, i).input_nodes.shape[0]
              for i in range(batches)]
    return float(np.mean(counts)) / topo.num_nodes


def _graph_words(args, meta: dict) -> str:
    p = meta.get("params", {})
    shape = "products-like (preset: products)" if args.preset == "products" else "block model"
    return (f"synthetic graph, {shape}: {meta['num_nodes']:,} nodes, {meta['num_edges']:,} directed edges "
            f"(average degree {p.get('avg_degree')}), {p.get('features')} features, {p.get('classes')} classes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4, help="emulated machines = partitions (default: 4)")
    ap.add_argument("--rate", default="100mbit", help="every node's link, a tc rate (default: 100mbit)")
    ap.add_argument("--preset", choices=["products", "none"], default="products", help="the graph's shape")
    ap.add_argument("--graph-nodes", type=int, default=244_903, help="nodes (default: a tenth of ogbn-products')")
    ap.add_argument("--avg-degree", type=float, help="average degree (default: the preset's, or 20)")
    ap.add_argument("--features", type=int, help="features (default: the preset's, or 64)")
    ap.add_argument("--fanouts", type=int, nargs="+", default=[5, 5, 5], help="sampled: first next to the seeds")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--full-epochs", type=int, default=60, help="epochs of full-graph training (one step each)")
    ap.add_argument("--sampled-epochs", type=int, default=8, help="epochs of sampled training (one pass each)")
    ap.add_argument("--batch-size", type=int, default=128, help="sampled: seeds per rank and minibatch")
    ap.add_argument("--work", default="results/bench-regimes", help="graph, partition, VIP and runs go here")
    ap.add_argument("--plot", default="benchmarks/regimes.png", help="the time-to-accuracy plot (PNG)")
    add_record_option(ap, "regimes")
    args = ap.parse_args()

    work = Path(args.work)
    vip = work / f"vip-b{args.batch_size}"
    sampling = ["--mode", "sampled", "--fanouts", *map(str, args.fanouts), "--batch-size", str(args.batch_size)]
    if args.preset == "products":
        shape = {"preset": "products", **({"avg_degree": args.avg_degree} if args.avg_degree else {}),
                 **({"features": args.features} if args.features else {})}
    else:
        shape = {"avg_degree": args.avg_degree or 20.0, "features": args.features or 64, "classes": 16,
                 "train_fraction": 0.3, "val_fraction": 0.1}
    graph, part = synthetic_partition(work, parts=args.nodes, nodes=args.graph_nodes, **shape)
    if not vip.exists():
        sylvie("vip", part, "--out", vip, *sampling[2:], "--no-progress")
    model = ["--arch", "sage", "--layers", "3", "--hidden", str(args.hidden), "--no-self-loop", "--checkpoint-every",
             "0", "--log-every", "10", "--eval-every", "1"]
    full, sampled = ["--epochs", str(args.full_epochs)], ["--epochs", str(args.sampled_epochs)]
    configs = [
        ("full-graph, fp32 synchronous", full + ["--bits", "32"]),
        ("full-graph, 1-bit pipelined (Sylvie)", full + ["--bits", "1", "--pipeline"]),
        ("sampled, no cache", sampled + sampling + ["--alpha", "0"]),
        ("sampled, VIP cache alpha 0.2 (SALIENT++)", sampled + sampling + ["--vip", str(vip), "--alpha", "0.2"]),
    ]
    runs = {}  # as the report sees runs: one seed each
    for name, flags in configs:
        out = work / "runs" / name.split(" (")[0].replace(" ", "").replace(",", "-")
        records = train_on_cluster(part, out, args.nodes, args.rate, model + flags, timeout_s=7200)
        runs[name] = [RunOutput(name, 0, records, {})]
        seconds, val = accuracy_over_time(runs[name])
        print(f"{name}: {len(records)} epochs, {seconds[-1]:.1f} s of training, best val {np.nanmax(val):.2%}",
              file=sys.stderr)
    target = accuracy_target(runs)
    meta = json.loads((graph / "meta.json").read_text())
    lines = [f"{args.nodes} emulated nodes at {args.rate}; {_graph_words(args, meta)}; GraphSAGE 3 x {args.hidden}; "
             f"full-graph {args.full_epochs} epochs, sampled {args.sampled_epochs} epochs (fanouts "
             f"{', '.join(map(str, args.fanouts))}, first next to the seeds, batch {args.batch_size} per rank: "
             f"{inputs_share(part, args):.1%} of the nodes are a minibatch's inputs, mean of 20 minibatches); "
             f"target: {target:.2%} validation accuracy (98% of the lowest best).", "",
             "| configuration | s/epoch | seconds to target | epochs to target | best val acc | test acc at best val "
             "| MB sent/epoch |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, outputs in runs.items():
        records = outputs[0].metrics
        seconds, val = accuracy_over_time(outputs)
        to_target, best = time_to_accuracy(outputs, target), int(np.nanargmax(val))
        test = outputs[0].series("test_acc")[best]
        per_epoch = float(np.median([r.epoch_time for r in records[1:] or records]))
        mb = float(np.median([r.bytes_sent for r in records])) / 1e6
        reached = (f"{to_target:.1f} | {int(np.searchsorted(seconds, to_target)) + 1}" if not np.isnan(to_target)
                   else "not reached | -")
        lines.append(f"| {name} | {per_epoch:.2f} | {reached} | {val[best]:.2%} | {test:.2%} | {mb:.1f} |")
    plot_accuracy_over_time(runs, args.plot,
                            xlabel=f"seconds of training on {args.nodes} emulated nodes at {args.rate}")
    publish("\n".join(lines), args.record and "regimes")


if __name__ == "__main__":
    main()
