"""One rank of ``sylvie train`` against plain single-process DGL: the same GraphSAGE on the same graph.

    python benchmarks/overhead.py                      # 200K nodes, 4M edges, 64 features, GraphSAGE 3 x 128
    python benchmarks/overhead.py --record

Plain DGL is what a user would write: ``dgl.graph`` of the whole graph, three ``SAGEConv(mean)`` layers with ReLU
and dropout between them, Adam, the mean cross-entropy over the training nodes. Sylvie is ``FullGraphTrainer`` on
the graph's one-part partition (the train stage on one rank, in this process: the per-epoch code path of
``sylvie train`` without its process start-up). Both train the same model from the same weights (same seed), no
self-loops, with the same threads; an epoch is forward, backward and optimiser step (no evaluation). Rounds
alternate (DGL, Sylvie, DGL, Sylvie ...); each round trains ``--epochs`` epochs and keeps the median of epochs 2
onward, and the table gives every round's median and the ratio of the medians over all rounds.
"""
import argparse
import statistics
import tempfile
import time
from pathlib import Path

import dgl
import torch
import torch.nn.functional as F
from common import add_record_option, publish, synthetic_partition, whole_graph

from sylvie.config import section
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import Context
from sylvie.train.fullgraph_trainer import FullGraphTrainer


def dgl_epochs(graph_dir: Path, model_cfg, epochs: int, lr: float) -> list[float]:
    """Plain DGL, whole graph in this process: seconds of each epoch."""
    w = whole_graph(graph_dir)
    dg, x, y, train = w.graph, w.x, w.y, w.train
    torch.manual_seed(0)
    convs = torch.nn.ModuleList(dgl.nn.SAGEConv(d_in, d_out, "mean") for d_in, d_out in
                                zip([x.shape[1]] + [model_cfg.hidden] * (model_cfg.layers - 1),
                                    [model_cfg.hidden] * (model_cfg.layers - 1) + [w.classes]))
    opt = torch.optim.Adam(convs.parameters(), lr=lr)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        h = x
        for i, conv in enumerate(convs):
            if i:
                h = F.dropout(F.relu(h), model_cfg.dropout, training=True)
            h = conv(dg, h)
        loss = F.cross_entropy(h[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def sylvie_epochs(part_dir: Path, model_cfg, epochs: int, lr: float) -> list[float]:
    """``FullGraphTrainer`` on one rank: seconds of each epoch's training step."""
    shard = read_shard(part_dir, 0)
    ctx = Context(0, 1, torch.device("cpu"), "gloo")
    trainer = FullGraphTrainer(ctx, shard, model_cfg, section("train", {"lr": lr, "weight_decay": 0.0}),
                               section("comm", {}), seed=0)
    return [trainer.epoch(e, evaluate=False).epoch_time for e in range(epochs)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=float, default=20.0, help="undirected; 20 gives 4M directed edges")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6, help="per round; the median of epochs 2 onward counts")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of each")
    ap.add_argument("--work", help="directory for the graph and its partition (default: a temporary one)")
    add_record_option(ap, "overhead")
    args = ap.parse_args()
    model_cfg = section("model", {"arch": "sage", "hidden": args.hidden, "layers": args.layers, "dropout": 0.5,
                                  "self_loop": False})
    with tempfile.TemporaryDirectory() as tmp:
        graph_dir, part_dir = synthetic_partition(Path(args.work or tmp), parts=1, nodes=args.nodes,
                                                  avg_degree=args.avg_degree, features=args.features, classes=16)
        medians = {"plain DGL": [], "sylvie, 1 rank": []}
        for _ in range(args.rounds):
            medians["plain DGL"].append(statistics.median(dgl_epochs(graph_dir, model_cfg, args.epochs, 0.01)[1:]))
            medians["sylvie, 1 rank"].append(
                statistics.median(sylvie_epochs(part_dir, model_cfg, args.epochs, 0.01)[1:]))
    base = statistics.median(medians["plain DGL"])
    lines = [f"{args.nodes:,} nodes, average degree {args.avg_degree:g} (synthetic), {args.features} features, "
             f"GraphSAGE {args.layers} x {args.hidden}, no self-loops, {torch.get_num_threads()} threads; seconds "
             f"per epoch, median of epochs 2-{args.epochs} in each of {args.rounds} alternating rounds:", "",
             "| | " + " | ".join(f"round {r + 1}" for r in range(args.rounds)) + " | vs plain DGL |",
             "| --- | " + " | ".join("---" for _ in range(args.rounds)) + " | --- |"]
    for name, m in medians.items():
        lines.append(f"| {name} | " + " | ".join(f"{s:.3f}" for s in m) +
                     f" | {statistics.median(m) / base:.2f}x |")
    publish("\n".join(lines), args.record and "overhead")


if __name__ == "__main__":
    main()
