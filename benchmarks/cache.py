"""Remote rows fetched per epoch by sampled training (SALIENT++) under every cache policy and replication factor,
measured by running the trainer's sampler, with the VIP model's prediction beside it; and, on an emulated cluster
(root), epoch time without a cache, with a VIP cache and with every feature everywhere.

    python benchmarks/cache.py                          # 200K nodes, 8 parts, fanouts (15, 10, 5), batch 1024
    python benchmarks/cache.py --preset igbh --graph-nodes 1000000 --parts 4 --topic cache-igbh
    sudo python benchmarks/cache.py --cluster --rate 100mbit --record

Fanouts are given as SALIENT++ does, the first next to the seeds: (15, 10, 5) is DGL's NeighborSampler([5, 10, 15]).
Each part's minibatches are what the trainer draws: its training vertices shuffled per epoch and cut evenly into
as many batches as the part with the most training vertices needs at the batch size. A vertex counts once per
minibatch that has it as an input and is owned by another part; a cached one costs nothing. The simulation policy
ranks by access counts of 2 pre-sampled epochs of another random stream than the 2 measured. VIP's prediction of
the same volume: minibatches x the sum of VIP over the remote vertices not cached (VIP for the effective batch
size). --record also writes the tables to a new dated record under benchmarks/records/.

A typed graph (``--preset igbh``, or a typed ``--graph``) is sampled as the trainer samples it, each fanout per
relation, and its cache budget is bytes, as the trainer's: alpha x the bytes of every node's feature row / parts,
filled across node types by score per byte (``cache_budget_bytes``, ``select_cache(row_bytes=...)``). Its columns:
our VIP; the vip policy on SALIENT++'s published recurrence (``salient_vip``); degree; random; and the bound, the
best static cache of that budget for the measured epochs (the simulation policy ranking by the very access counts
it is measured on, per byte). Its cells give rows and GB per epoch, shares of the no-cache bytes; under the table,
VIP's distance from the bound in points of those, and what VIP caches of each node type at alpha 0.2.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np
from common import add_record_option, partition, publish, steady_medians, sylvie, synthetic_graph

from sylvie.features.cache_policy import cache_budget, cache_budget_bytes, select_cache
from sylvie.formats.partition_manifest import graph_layout, read_manifest
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.sampling.fanouts import resolve_fanouts
from sylvie.sampling.neighbor_sampler import (
    TRAINING,
    NeighborSampler,
    simulated_access_counts,
)
from sylvie.sampling.vip import iterations_per_epoch, reverse_edges, salient_vip, vertex_inclusion_probability

ALPHAS = (0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0)
POLICIES = ("vip", "simulation", "degree", "halo", "random")
# a typed graph's columns: salient is the vip policy on SALIENT++'s published recurrence, bound the best static cache
TYPED_ALPHAS = (0.0, 0.1, 0.2, 0.5)
TYPED_POLICIES = ("vip", "salient", "degree", "random", "bound")
POLICY_TITLES = {"vip": "vip (our VIP)", "salient": "vip (SALIENT++'s recurrence)",
                 "bound": "bound (best static cache of the measured epochs)"}
ROW_DTYPE = np.dtype(np.float32)  # the shards' features


def prepare(work: Path, args, parts: int) -> Path:
    """The graph (``--graph``, or the synthetic one made once under ``work``: ``--preset``'s if given) and its METIS
    partition in ``parts``."""
    if args.preset:  # the preset's own degrees, classes and split; only its size and feature width asked
        graph = synthetic_graph(args.graph or work / f"{args.preset}-graph", check_params=not args.graph,
                                preset=args.preset, nodes=args.graph_nodes,
                                **({"features": args.features} if args.features else {}))
        return partition(graph, work / f"{args.preset}-metis-p{parts}", parts=parts)
    graph = synthetic_graph(args.graph or work / "graph", check_params=not args.graph, nodes=args.graph_nodes,
                            avg_degree=args.avg_degree, features=args.features or 64, classes=16,
                            train_fraction=args.train_fraction, val_fraction=0.1)
    return partition(graph, work / f"metis-p{parts}", parts=parts)


def row_bytes_of(manifest: dict, topo) -> np.ndarray | None:
    """A typed graph's bytes of each vertex's feature row (float32, its type's width), as the sampled trainer budgets
    its cache; None for a homogeneous graph (the budget in rows)."""
    if topo.types.homogeneous:
        return None
    widths = graph_layout(manifest)["feature_widths"]
    if any(w is None for w in widths):
        raise SystemExit("a node type without features (learnt embeddings) is not sampled: no cache to size")
    return (np.asarray(widths, np.int64) * ROW_DTYPE.itemsize)[topo.node_type(np.arange(topo.num_nodes))]


def cached_by(policy: str, k: int, topo, budget: int, scores: dict, trains, row_bytes) -> np.ndarray:
    """Part ``k``'s cache under a column's ``policy``: one of cache_policy's, or ``salient`` (the vip policy on
    SALIENT++'s published recurrence) or ``bound`` (the simulation policy on the measured epochs' own counts: the
    best static cache of that budget for those epochs)."""
    name = {"salient": "vip", "bound": "simulation"}.get(policy, policy)
    return select_cache(name, k, topo.part_offsets, budget,
                        vip=scores.get("salient" if policy == "salient" else "vip"),
                        access_counts=scores.get("measured" if policy == "bound" else "presampled"),
                        in_indptr=topo.in_indptr, in_src=topo.in_src, train_nodes=trains[k], seed=0,
                        row_bytes=row_bytes)


def volume_table(part_dir: Path, fanouts_from_seeds: list[int], batch: int, epochs: int) -> tuple[list[str], dict]:
    """Remote rows per epoch for every policy (a column) and alpha (a row). A typed graph's budget is bytes (alpha
    times every node's row bytes over the parts, one ranking across node types by score per byte, as the trainer's)
    and its cells give the bytes too, shares of the no-cache bytes; a homogeneous graph's is rows."""
    manifest = read_manifest(part_dir)
    topo = read_topology(part_dir, manifest)
    parts, n = manifest["num_parts"], topo.num_nodes
    types = topo.types
    row_bytes = row_bytes_of(manifest, topo)
    policies, alphas = (POLICIES, ALPHAS) if row_bytes is None else (TYPED_POLICIES, TYPED_ALPHAS)
    unit = np.ones(n, np.int64) if row_bytes is None else row_bytes  # for the bytes, rows by width
    widths = graph_layout(manifest)["feature_widths"]
    fanouts = resolve_fanouts(list(fanouts_from_seeds[::-1]), types)  # DGL's order, a fanout per relation
    reverse = reverse_edges(topo.in_indptr, topo.in_src, topo.in_relation, types.reverse_index())
    node_type = topo.node_type(np.arange(n))
    trains = [topo.part_offsets[k] + np.flatnonzero(read_shard(part_dir, k, manifest).train) for k in range(parts)]
    iterations = iterations_per_epoch([len(t) for t in trains], batch)

    def budget_of(alpha):
        return cache_budget(alpha, n, parts) if row_bytes is None else \
            cache_budget_bytes(alpha, float(row_bytes.sum()), parts)

    measured = {(p, a): 0 for p in policies for a in alphas}  # rows, all parts and epochs together
    measured_bytes = {(p, a): 0 for p in policies for a in alphas}
    predicted = {a: 0.0 for a in alphas}
    cached_types = {(p, a): np.zeros(len(types.node_types), np.int64) for p in policies for a in alphas}
    inputs_per_batch, flat, always = [], [], []
    t0 = time.time()
    for k in range(parts):
        sampler = NeighborSampler(topo.in_indptr, topo.in_src, fanouts, trains[k], iterations, 0, k, types=types,
                                  in_relation=topo.in_relation)
        scores = {"measured": simulated_access_counts(sampler, epochs, n, TRAINING)}  # integers: ties compare exactly
        if "simulation" in policies:
            scores["presampled"] = simulated_access_counts(sampler, 2, n)
        vip_batch = len(trains[k]) / iterations
        scores["vip"] = vertex_inclusion_probability(topo.in_indptr, topo.in_src, trains[k], vip_batch, fanouts[::-1],
                                                     topo.in_relation, reverse=reverse)
        if "salient" in policies:
            scores["salient"] = salient_vip(topo.in_indptr, topo.in_src, trains[k], vip_batch, fanouts[::-1],
                                            topo.in_relation)
        counts, vip = scores["measured"], scores["vip"]
        remote = np.ones(n, dtype=bool)
        remote[topo.part_offsets[k]:topo.part_offsets[k + 1]] = False
        inputs_per_batch.append(counts.sum() / iterations / epochs)
        always.append(int((counts[remote] == iterations * epochs).sum()))
        flat.append(float(np.quantile(vip[remote], 0.5)))
        for alpha in alphas:
            for policy in policies:
                cached = cached_by(policy if alpha > 0 else "none", k, topo, budget_of(alpha), scores, trains,
                                   row_bytes)
                cached_types[(policy, alpha)] += np.bincount(node_type[cached], minlength=len(types.node_types))
                miss = remote.copy()
                miss[cached] = False
                measured[(policy, alpha)] += counts[miss].sum()
                measured_bytes[(policy, alpha)] += counts[miss] @ unit[miss]
                if policy == "vip":
                    predicted[alpha] += iterations * epochs * vip[miss].sum()
        print(f"part {k}: {time.time() - t0:.0f} s", file=sys.stderr)
    typed = row_bytes is not None
    none, none_bytes = measured[(policies[0], 0.0)], measured_bytes[(policies[0], 0.0)]
    what = f"{len(types.node_types)} node types, {len(types.relations)} relations, " if typed else ""
    volume = (f"cache budget per part alpha x the bytes of every node's row / {parts} ({', '.join(map(str, widths))} "
              f"float32 features by type), filled by score per byte across node types; remote rows and GB per epoch"
              ) if typed else "remote rows per epoch"
    lines = [f"{manifest.get('dataset', 'graph')}: {n:,} nodes, {what}{topo.in_src.shape[0]:,} directed edges, "
             f"{parts} METIS parts (edge cut {manifest['edge_cut'] / topo.in_src.shape[0]:.0%}), "
             f"fanouts {tuple(fanouts_from_seeds)} (first next to the seeds{', each relation' if typed else ''}), "
             f"batch {batch}, {iterations} minibatches per part and epoch; {volume}, all parts together, measured "
             f"over {epochs} epochs of the sampler (in brackets: share of the no-cache "
             f"{'bytes' if typed else 'volume'}). A minibatch's inputs are {np.mean(inputs_per_batch):,.0f} "
             f"vertices, {np.mean(inputs_per_batch) / n:.0%} of the graph; the median VIP of a part's remote vertices "
             f"is {np.mean(flat):.2f}.", ""]
    if typed:
        heads = [POLICY_TITLES.get(p, p) for p in policies]
        lines += ["| alpha | cache MB/part | " + " | ".join(heads) + " | VIP predicted (vip policy) |",
                  "| --- | --- | " + " | ".join("---" for _ in policies) + " | --- |"]
        for alpha in alphas:
            cells = [f"{measured[(p, alpha)] / epochs:,.0f} rows, {measured_bytes[(p, alpha)] / epochs / 1e9:,.1f} GB "
                     f"({measured_bytes[(p, alpha)] / none_bytes:.1%})" for p in policies]
            lines.append(f"| {alpha:g} | {budget_of(alpha) / 1e6:,.1f} | " + " | ".join(cells) +
                         f" | {predicted[alpha] / epochs:,.0f} rows |")
    else:
        lines += ["| alpha | cache rows/part | " + " | ".join(policies) + " | VIP predicted (vip policy) |",
                  "| --- | --- | " + " | ".join("---" for _ in policies) + " | --- |"]
        for alpha in alphas:  # per epoch
            cells = [f"{measured[(p, alpha)] / epochs:,.0f} ({measured[(p, alpha)] / none:.0%})" for p in policies]
            lines.append(f"| {alpha:g} | {budget_of(alpha):,} | " + " | ".join(cells) +
                         f" | {predicted[alpha] / epochs:,.0f} |")
    return lines, {"measured": measured, "bytes": measured_bytes, "predicted": predicted, "none": none,
                   "none_bytes": none_bytes, "epochs": epochs, "alphas": alphas, "policies": policies,
                   "cached_types": cached_types, "type_names": types.node_types,
                   "always": always, "budget_rows": {a: budget_of(a) / float(unit.mean()) for a in alphas},
                   "type_bytes": None if row_bytes is None else np.asarray(widths, np.int64) * ROW_DTYPE.itemsize}


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


def typed_claims(result: dict) -> list[str]:
    """A typed graph's: per alpha, VIP's distance to the bound in points of the no-cache bytes (SALIENT++'s recurrence,
    degree and random beside it), VIP's prediction against what it fetched, and what VIP caches of each node type at
    alpha 0.2 (the bound's beside it)."""
    b, none = result["bytes"], result["none_bytes"]
    out = []
    for alpha in result["alphas"][1:]:
        share = {p: b[(p, alpha)] / none for p in result["policies"]}
        gap = 100 * (share["vip"] - share["bound"])
        others = ", ".join(f"{p} {100 * (share[p] - share['bound']):.2f}" for p in result["policies"]
                           if p not in ("vip", "bound"))
        pred = result["predicted"][alpha] / max(1, result["measured"][("vip", alpha)]) - 1
        out.append(f"alpha {alpha:g}: VIP within {gap:.2f} points of the bound ({share['vip']:.1%} of the no-cache "
                   f"bytes against {share['bound']:.1%}; {'within' if gap <= 2 else 'NOT within'} 2 points); from the "
                   f"bound: {others} points; VIP's prediction of its own rows {pred:+.2%} off the measured")
    out.append(f"Remote vertices that are an input of every measured minibatch of their part: "
               f"{np.mean(result['always']):,.0f} per part (mean), against budgets of "
               + ", ".join(f"{result['budget_rows'][a]:,.0f}" for a in result["alphas"][1:])
               + " rows per part (mean row) at alpha " + ", ".join(f"{a:g}" for a in result["alphas"][1:])
               + ": where a budget is smaller than that set, the bound is any choice within it.")
    if 0.2 in result["alphas"]:
        def per_type(policy):
            rows = result["cached_types"][(policy, 0.2)]
            total = float(rows @ result["type_bytes"])
            return ", ".join(f"{name} {r:,} rows / {r * w / 1e6:,.0f} MB ({r * w / total:.0%})" for name, r, w in
                             zip(result["type_names"], rows, result["type_bytes"], strict=True) if r)
        out.append(f"What VIP caches at alpha 0.2, all parts together: {per_type('vip')}; the bound: "
                   f"{per_type('bound')}.")
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
    ap.add_argument("--preset", choices=("igbh", "mag", "products"),
                    help="the synthetic graph of this preset (its own degrees, classes and split; --graph-nodes and "
                         "--features set its size)")
    ap.add_argument("--features", type=int, help="feature width (default 64; a preset's own)")
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
    add_record_option(ap, "cache")
    ap.add_argument("--topic", default="cache", help="the record's topic (default: cache)")
    args = ap.parse_args()
    if args.cluster and args.preset:
        ap.error("--cluster trains GraphSAGE on the homogeneous synthetic graph: no --preset")
    work = Path(args.work)
    part = prepare(work, args, args.parts)
    lines, result = volume_table(part, args.fanouts, args.batch, max(2, args.epochs))
    typed = result["type_bytes"] is not None
    text = "\n".join(lines) + "\n\n" + "\n".join(f"- {c}" for c in (typed_claims if typed else claims)(result))
    if not typed and args.parts == 4 and args.fanouts == [15, 10, 5] and args.batch == 1024:
        text += ("\n\nBeside SALIENT++ on ogbn-products (same parts, fanouts and batch; their artifact's table), the "
                 "share of the no-cache volume each policy removes:\n\n" + "\n".join(beside_salient(result)))
    publish(text, args.record and args.topic)
    if args.cluster:
        publish("\n".join(cluster_table(work, args)), args.record and args.topic)


if __name__ == "__main__":
    main()
