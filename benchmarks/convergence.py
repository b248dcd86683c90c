"""How far full-graph training gets in 20 and 60 epochs, against PipeGCN's model trained on the whole graph in one
process (the baseline, in the same run): the accuracy a user who tries both sees.

    python benchmarks/convergence.py                    # 50K nodes, degree 20, 4 METIS parts, 3 seeds
    python benchmarks/convergence.py --record

Graph: ``sylvie download synthetic --nodes 50000 --avg-degree 20 --features 64 --classes 16 --train-fraction 0.3
--val-fraction 0.1`` (the regimes benchmark's), ``sylvie partition --parts 4`` (METIS). Model: GraphSAGE-mean 3 x 64,
dropout 0.5 between layers, self-loops, Adam lr 0.01, weight decay 5e-4, every epoch one full-graph step. Ours: ``sylvie
train`` on 4 ranks (``sylvie launch``), fp32 synchronous and 1-bit pipelined. The baseline: PipeGCN's layer
(``Linear(h_self) + Linear(mean of in-neighbours incl. the self-loop)``, both with bias, torch's default init), plain
torch and DGL on the whole graph, one process, the same seeds. Test accuracy is that of the model after the epoch
(evaluated without dropout); the first loss that of the first epoch (ln 16 = 2.77 for a model that knows nothing).
"""
import argparse
import statistics
import sys
from pathlib import Path

import dgl
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import BIN, add_record_option, publish, run, synthetic_partition

from sylvie.data.graph import load_graph
from sylvie.formats.epoch_record import read_metrics


class PipeGCNLayer(nn.Module):
    """PipeGCN's GraphSAGE layer: two torch ``Linear``s, both with bias, default init."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.self_fc, self.neigh_fc = nn.Linear(d_in, d_out), nn.Linear(d_in, d_out)

    def forward(self, g, h):
        return self.self_fc(h) + self.neigh_fc(dgl.ops.copy_u_mean(g, h))


def baseline(graph_dir: Path, seed: int, epochs: int, hidden: int, checkpoints: list[int]) -> dict:
    """PipeGCN's model on the whole graph, one process: first loss and test accuracy after each checkpoint epoch."""
    g = load_graph(graph_dir)
    graph = dgl.add_self_loop(dgl.graph((torch.from_numpy(g.src), torch.from_numpy(g.dst)), num_nodes=g.num_nodes))
    x, y = torch.from_numpy(g.features), torch.from_numpy(g.labels)
    train, test = torch.from_numpy(g.train_mask), torch.from_numpy(g.test_mask)
    torch.manual_seed(seed)
    dims = [x.shape[1], hidden, hidden, g.num_classes]
    layers = nn.ModuleList(PipeGCNLayer(a, b) for a, b in zip(dims, dims[1:]))
    opt = torch.optim.Adam(layers.parameters(), lr=0.01, weight_decay=5e-4)

    def forward(training: bool):
        h = x
        for i, layer in enumerate(layers):
            if i:
                h = F.dropout(F.relu(h), 0.5, training)
            h = layer(graph, h)
        return h

    out = {"first_loss": None}
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        loss = F.cross_entropy(forward(True)[train], y[train])
        loss.backward()
        opt.step()
        out["first_loss"] = out["first_loss"] or float(loss.detach())
        if epoch in checkpoints:
            with torch.no_grad():
                out[epoch] = float((forward(False)[test].argmax(1) == y[test]).float().mean())
    out["last_loss"] = float(loss.detach())
    return out


def ours(part: Path, out: Path, parts: int, seed: int, epochs: int, hidden: int, flags: list[str],
         checkpoints: list[int]) -> dict:
    """``sylvie train`` on ``parts`` ranks: first loss and test accuracy after each checkpoint epoch."""
    if not (out / "model.pt").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        train = ["sylvie", "train", "--partition", part, "--out", out, "--seed", seed, "--arch", "sage", "--layers", 3,
                 "--hidden", hidden, "--dropout", 0.5, "--epochs", epochs, "--lr", 0.01, "--weight-decay", 5e-4,
                 "--checkpoint-every", 0, "--no-progress", *flags]
        # the epoch lines, and any failure's, kept in the log
        run([BIN / "sylvie", "launch", "--ranks", parts, "--", *train], log=out.parent / f"{out.name}.log")
    records = read_metrics(out)
    return {"first_loss": records[0].loss, "last_loss": records[-1].loss,
            **{e: records[e - 1].test_acc for e in checkpoints}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph-nodes", type=int, default=50_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--checkpoint", type=int, default=20, help="the earlier epoch whose accuracy is shown too")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--work", default="results/bench-convergence", help="graph, partition and runs go here")
    add_record_option(ap, "convergence")
    args = ap.parse_args()

    work = Path(args.work)
    graph, part = synthetic_partition(work, parts=args.parts, method="metis", nodes=args.graph_nodes,
                                      avg_degree=args.avg_degree, features=64, classes=16, train_fraction=0.3,
                                      val_fraction=0.1)
    checkpoints = [args.checkpoint, args.epochs]
    configs = {
        "PipeGCN's model, whole graph, 1 process (baseline)": None,
        f"ours, fp32 synchronous, {args.parts} ranks": ["--bits", "32"],
        f"ours, 1-bit pipelined, {args.parts} ranks": ["--bits", "1", "--pipeline"],
    }
    results = {}
    for name, flags in configs.items():
        results[name] = []
        for seed in args.seeds:
            run = (baseline(graph, seed, args.epochs, args.hidden, checkpoints) if flags is None else
                   ours(part, work / "runs" / f"{'-'.join(flags).strip('-')}-seed{seed}", args.parts, seed,
                        args.epochs, args.hidden, flags, checkpoints))
            results[name].append(run)
            print(f"{name}, seed {seed}: {run}", file=sys.stderr)

    def cell(runs: list[dict], key) -> str:
        values = [r[key] for r in runs]
        each = " / ".join(f"{v:.2%}" if key in checkpoints else f"{v:.2f}" for v in values)
        mean = statistics.mean(values)
        return f"**{mean:.2%}** ({each})" if key in checkpoints else f"{mean:.2f} ({each})"

    lines = [f"Synthetic graph, {args.graph_nodes:,} nodes, average degree {args.avg_degree:g}, 64 features, 16 "
             f"classes; {args.parts} METIS parts; GraphSAGE 3 x {args.hidden}, dropout 0.5, Adam lr 0.01, weight "
             f"decay 5e-4; seeds {', '.join(map(str, args.seeds))} (mean, then each).", "",
             f"| run | first loss | test acc at epoch {args.checkpoint} | test acc at epoch {args.epochs} "
             f"| last loss |", "| --- | --- | --- | --- | --- |"]
    for name, runs in results.items():
        lines.append(f"| {name} | {cell(runs, 'first_loss')} | {cell(runs, args.checkpoint)} | "
                     f"{cell(runs, args.epochs)} | {cell(runs, 'last_loss')} |")
    publish("\n".join(lines), args.record and "convergence")


if __name__ == "__main__":
    main()
