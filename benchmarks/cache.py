"""Remote rows fetched per epoch by sampled training (SALIENT++) under every cache policy and replication factor,
measured by running the trainer's sampler, with the VIP model's prediction beside it; and, on an emulated cluster
(root), epoch time without a cache, with a VIP cache and with every feature everywhere.

    python benchmarks/cache.py                          # 200K nodes, 8 parts, fanouts (15, 10, 5), batch 1024
    sudo python benchmarks/cache.py --cluster --rate 100mbit --write benchmarks/README.md

Fanouts are given as SALIENT++ does, the first next to the seeds: (15, 10, 5) is DGL's NeighborSampler([5, 10, 15]).
Each part's minibatches are what the trainer draws: its training vertices shuffled per epoch and cut evenly into
as many batches as the part with the most training vertices needs at the batch size. A vertex counts once per
minibatch that has it as an input and is owned by another part; a cached one costs nothing. The simulation policy
ranks by access counts of 2 pre-sampled epochs of another random stream than the 2 measured. VIP's prediction of
the same volume: minibatches x the sum of VIP over the remote vertices not cached (VIP for the effective batch
size). --write replaces the tables between the markers in the file.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np
from common import partition, publish, steady_medians, sylvie, synthetic_graph

from sylvie.features.cache_policy import cache_budget, select_cache
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.sampling.neighbor_sampler import (
    TRAINING,
    NeighborSampler,
    simulated_access_counts,
)
from sylvie.sampling.vip import iterations_per_epoch, vertex_inclusion_probability

ALPHAS = (0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0)
POLICIES = ("vip", "simulation", "degree", "halo", "random")


def prepare(work: Path, args, parts: int) -> Path:
    """The graph (``--graph``, or the synthetic one made once under ``work``) and its METIS partition in ``parts``."""
    graph = synthetic_graph(args.graph or work / "graph", check_params=not args.graph, nodes=args.graph_nodes,
                            avg_degree=args.avg_degree, features=args.features, classes=16,
                            train_fraction=args.train_fraction, val_fraction=0.1)
    return partition(graph, work / f"metis-p{parts}", parts=parts)


def volume_table(part_dir: Path, fanouts_from_seeds: list[int], batch: int, epochs: int) -> tuple[list[str], dict]:
    manifest = read_manifest(part_dir)
    topo = read_topology(part_dir, manifest)
    parts, n = manifest["num_parts"], topo.num_nodes
    trains = [topo.part_offsets[k] + np.flatnonzero(read_shard(part_dir, k, manifest).train) for k in range(parts)]
    iterations = iterations_per_epoch([len(t) for t in trains], batch)
    measured = {(p, a): 0 for p in POLICIES for a in ALPHAS}
    predicted = {a: 0.0 for a in ALPHAS}
    inputs_per_batch, flat = [], []
    t0 = time.time()
    for k in range(parts):
        sampler = NeighborSampler(topo.in_indptr, topo.in_src, fanouts_from_seeds[::-1], trains[k], iterations,
                                  0, k)
        counts = simulated_access_counts(sampler, epochs, n, TRAINING)  # integers: ties compare exactly
        presampled = simulated_access_counts(sampler, 2, n)
        vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, trains[k], len(trains[k]) / iterations,
                                           fanouts_from_seeds)
        remote = np.ones(n, dtype=bool)
        remote[topo.part_offsets[k]:topo.part_offsets[k + 1]] = False
        inputs_per_batch.append(counts.sum() / iterations / epochs)
        flat.append(float(np.quantile(vip[remote], 0.5)))
        for alpha in ALPHAS:
            budget = cache_budget(alpha, n, parts)
            for policy in POLICIES:
                cached = select_cache(policy if alpha > 0 else "none", k, topo.part_offsets, budget, vip=vip,
                                      access_counts=presampled, in_indptr=topo.in_indptr, in_src=topo.in_src,
                                      train_nodes=trains[k], seed=0)
                miss = remote.copy()
                miss[cached] = False
                measured[(policy, alpha)] += counts[miss].sum()
                if policy == "vip":
                    predicted[alpha] += iterations * epochs * vip[miss].sum()
        print(f"part {k}: {time.time() - t0:.0f} s", file=sys.stderr)
    none = measured[("vip", 0.0)]
    lines = [f"{manifest.get('dataset', 'graph')}: {n:,} nodes, {topo.in_src.shape[0]:,} directed edges, "
             f"{parts} METIS parts (edge cut {manifest['edge_cut'] / topo.in_src.shape[0]:.0%}), "
             f"fanouts {tuple(fanouts_from_seeds)} (first next to the seeds), batch {batch}, {iterations} minibatches "
             f"per part and epoch; remote rows per epoch, all parts together, measured over {epochs} epochs of the "
             f"sampler (in brackets: share of the no-cache volume). A minibatch's inputs are "
             f"{np.mean(inputs_per_batch):,.0f} vertices, {np.mean(inputs_per_batch) / n:.0%} of the graph; the "
             f"median VIP of a part's remote vertices is {np.mean(flat):.2f}.", "",
             "| alpha | cache rows/part | " + " | ".join(POLICIES) + " | VIP predicted (vip policy) |",
             "| --- | --- | " + " | ".join("---" for _ in POLICIES) + " | --- |"]
    for alpha in ALPHAS:  # per epoch
        cells = [f"{measured[(p, alpha)] / epochs:,.0f} ({measured[(p, alpha)] / none:.0%})" for p in POLICIES]
        lines.append(f"| {alpha:g} | {cache_budget(alpha, n, parts):,} | " + " | ".join(cells) +
                     f" | {predicted[alpha] / epochs:,.0f} |")
    return lines, {"measured": measured, "predicted": predicted, "none": none, "epochs": epochs}


def claims(result: dict) -> list[str]:
    m, none = result["measured"], result["none"]
    out = []
    for alpha in ALPHAS[1:]:
        vip = m[("vip", alpha)]
        worse = [p for p in POLICIES[1:] if vip > m[(p, alpha)] * (1.05 if p == "simulation" else 1.0)]
        verdict = f"policies fetching less: {', '.join(worse)}" if worse else \
            "no policy fetches less (simulation within 5%)"
        out.append(f"alpha {alpha:g}: vip {vip / result['epochs']:,.0f} per epoch; {verdict}")
    out.append(f"alpha 0.2: vip fetches {m[('vip', 0.2)] / none:.1%} of the no-cache volume (claim: <= 50%)")
    return out


# SALIENT++'s artifact README: remote vertex fetches per epoch on ogbn-products, 4 parts, fanouts (15, 10, 5), batch
# 1024 (REFERENCES.md); their policy beside ours: vip-analytical, vip-simulation, degree-reachable, halo-1hop.
SALIENT_PP = {"none": 1.67e7, 0.05: (1.29e7, 1.29e7, 1.50e7, 1.54e7), 0.2: (7.95e6, 8.01e6, 1.22e7, 1.16e7),
              0.5: (3.88e6, 4.06e6, 8.76e6, 6.50e6), 1.0: (1.34e6, 1.62e6, 4.69e6, 5.71e6)}


def beside_salient(result: dict) -> list[str]:
    """Ours beside SALIENT++'s published ogbn-products figures: the share of the no-cache volume each policy
    removes (the absolute volumes differ with the graph), and the volumes themselves."""
    m, none, epochs = result["measured"], result["none"], result["epochs"]
    ours = ("vip", "simulation", "degree", "halo")
    lines = ["| alpha | " + " | ".join(f"{p}: ours / SALIENT++" for p in ours) + " | random: ours |",
             "| --- | " + " | ".join("---" for _ in ours) + " | --- |",
             f"| 0 (remote rows per epoch) | {none / epochs:,.0f} / {SALIENT_PP['none']:,.0f} | | | | |"]
    for alpha in (0.05, 0.2, 0.5, 1.0):
        cells = [f"-{1 - m[(p, alpha)] / none:.0%} / -{1 - theirs / SALIENT_PP['none']:.0%}"
                 for p, theirs in zip(ours, SALIENT_PP[alpha])]
        lines.append(f"| {alpha:g} | " + " | ".join(cells) + f" | -{1 - m[('random', alpha)] / none:.0%} |")
    return lines


def cluster_table(work: Path, args) -> list[str]:
    from sylvie.bench.cluster_run import train_on_cluster

    part = prepare(work, args, args.nodes)
    fanouts = args.fanouts[::-1]
    vip = work / f"vip-p{args.nodes}"
    if not vip.exists():
        sylvie("vip", part, "--out", vip, "--fanouts", *fanouts, "--batch-size", args.batch)
    model = ["--mode", "sampled", "--arch", "sage", "--layers", str(len(fanouts)), "--hidden", str(args.hidden),
             "--no-self-loop", "--epochs", str(args.epochs), "--checkpoint-every", "0", "--log-every", "1",
             "--eval-every", str(args.epochs), "--fanouts", *map(str, fanouts), "--batch-size", str(args.batch),
             "--vip", str(vip)]
    configs = [("no cache", ["--alpha", "0"]), ("VIP cache, alpha 0.2", ["--alpha", "0.2", "--policy", "vip"]),
               ("every feature everywhere", ["--alpha", str(args.nodes)])]  # parts are not of equal size
    rows = []
    for name, flags in configs:
        out = work / "runs" / name.split(",")[0].replace(" ", "-")
        records = train_on_cluster(part, out, args.nodes, args.rate, model + flags, timeout_s=7200)
        med = steady_medians(records, ("epoch_time", "fetch_wait_time", "compute_time", "allreduce_time",
                                       "sample_time", "fetch_time", "remote_bytes", "rows_remote"))
        rows.append((name, med, records[-1].test_acc, records[-1].batches.cache_hit_rate))
        print(f"{name}: {med['epoch_time']:.2f} s/epoch", file=sys.stderr)
    base = rows[0][1]["epoch_time"]
    lines = [f"{args.nodes} emulated nodes at {args.rate}; the graph above cut into {args.nodes} parts; GraphSAGE "
             f"{len(fanouts)} layers, hidden {args.hidden}; fanouts {tuple(args.fanouts)}, batch {args.batch}, "
             f"prefetch 2; {args.epochs} epochs, medians over epochs 2-{args.epochs} (seconds per epoch, per rank "
             f"0; MB: all ranks).", "",
             "| configuration | s/epoch | speed-up | fetch waited s | sampling s | fetching s | compute s | "
             "all-reduce s | remote rows/epoch | remote MB/epoch | cache hits | final test acc |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, m, acc, hit in rows:
        lines.append(f"| {name} | {m['epoch_time']:.2f} | {base / m['epoch_time']:.2f}x | {m['fetch_wait_time']:.2f} | "
                     f"{m['sample_time']:.2f} | {m['fetch_time']:.2f} | {m['compute_time']:.2f} | "
                     f"{m['allreduce_time']:.2f} | {m['rows_remote']:,.0f} | {m['remote_bytes'] / 1e6:.1f} | "
                     f"{'–' if hit is None else f'{hit:.0%}'} | {acc:.2%} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", help="a canonical graph directory (`sylvie download`) instead of the synthetic one")
    ap.add_argument("--graph-nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--train-fraction", type=float, default=0.1,
                    help="training vertices (default 0.1; ogbn-products has 8%%, papers100M 1%%)")
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="first next to the seeds")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=2, help="measured epochs (cluster: trained epochs)")
    ap.add_argument("--cluster", action="store_true", help="also the emulated cluster table (root)")
    ap.add_argument("--nodes", type=int, default=4, help="emulated machines (default 4)")
    ap.add_argument("--rate", default="100mbit", help="every node's link, a tc rate (default 100mbit)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--work", default="results/bench-cache")
    ap.add_argument("--write", help="a Markdown file whose tables (between the markers) are replaced")
    ap.add_argument("--section", default="cache-volume-table", help="marker name of the volume table")
    args = ap.parse_args()
    work = Path(args.work)
    part = prepare(work, args, args.parts)
    lines, result = volume_table(part, args.fanouts, args.batch, max(2, args.epochs))
    text = "\n".join(lines) + "\n\n" + "\n".join(f"- {c}" for c in claims(result))
    if args.parts == 4 and args.fanouts == [15, 10, 5] and args.batch == 1024:
        text += ("\n\nBeside SALIENT++ on ogbn-products (same parts, fanouts and batch; their artifact's table), the "
                 "share of the no-cache volume each policy removes:\n\n" + "\n".join(beside_salient(result)))
    publish(text, args.write, args.section)
    if args.cluster:
        publish("\n".join(cluster_table(work, args)), args.write, "cache-cluster-table")


if __name__ == "__main__":
    main()
