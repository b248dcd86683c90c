"""The sampler against DGL's, side by side in one run on the same graph, seeds and thread count: sampled edges per
second of one hop (ours ``pick_neighbors`` against ``dgl.sampling.sample_neighbors``) and of whole minibatches
with their blocks (our ``NeighborSampler.sample`` against ``dgl.dataloading.NeighborSampler.sample_blocks``), at 1
and 2 threads; and one rank's sampled epoch (``sylvie train --mode sampled``'s trainer, in this process) against
plain DGL on the whole graph (``DataLoader`` + ``NeighborSampler``, at its best ``num_workers``).

    python benchmarks/sampled.py                       # products-like, 244,903 nodes, fanouts (15, 10, 5), batch 1024
    python benchmarks/sampled.py --record

The graph is the products-like preset (``preset: products``, ogbn-products' shape; see ``products_like.py``) at
``--graph-nodes`` nodes, cut into 4 METIS parts; the seeds are minibatches of part 0's training vertices. One hop
samples ``--fanouts``' first from every vertex of a 2-hop frontier (the largest a minibatch has). Both samplers
draw without replacement from the same CSC arrays; DGL's threads are its OpenMP threads
(``dgl.utils.set_num_threads``), ours numba's (``numba.set_num_threads``). Each figure is the median of
``--repeats`` timed runs after one warm-up.

The epoch table trains the same GraphSAGE (3 x ``--hidden``, mean, dropout 0.5, no self-loops, Adam lr 0.003) on
the same graph as one part, fanouts and batch as above, every training vertex once per epoch; an epoch is sampling,
gathering the input rows, forward, backward and step (no evaluation). Plain DGL is what a DGL user writes: the
whole graph in one process, ``dgl.dataloading.DataLoader(g, train_ids, NeighborSampler(fanouts), batch_size,
shuffle=True, num_workers=w)`` for each ``w`` in ``--dgl-workers``, the model on ``blocks`` with
``x[input_nodes]``. Ours is ``SampledTrainer`` on the one-part partition (prefetch 1: sampling and gathering in
the sampling thread, ahead of the model). Each is the median of epochs 2 onward of ``--epochs``.

Two tables train 4 ranks, one process per part (``sylvie train --mode sampled``), each the median over epochs 2
onward of ``--rank-epochs``, with prefetch 0 (each minibatch sampled and fetched when the model asks for it)
beside the pipelined path (``--prefetch`` minibatches ahead); "waited" is the model's wait for prepared minibatches:

    sudo python benchmarks/sampled.py --cluster 1gbit   # 4 emulated nodes (network namespaces) at that link rate
    python benchmarks/sampled.py --loopback             # 4 ranks on this machine, DistDGL's setting

``--cluster RATE``: the products-like graph, model, fanouts and batch above, on 4 emulated machines
(``sylvie bench cluster``) whose links are limited to RATE. ``--loopback``: DistDGL's setting from issue 30 (a
50K-node synthetic graph of degree 20 and 64 features in 4 METIS parts, GraphSAGE 3 x 64, fanouts (10, 10, 10),
256 seeds per rank per step), 4 ranks launched by ``sylvie launch`` on this machine, without a cache and with a VIP
cache at alpha 0.2. DistDGL itself is not run here: its figure is the one stated beside the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import dgl
import numba
import numpy as np
import torch
from common import (
    BIN,
    add_record_option,
    partition,
    publish,
    steady_medians,
    sylvie,
    synthetic_graph,
    synthetic_partition,
    whole_graph,
)

from sylvie.config import section
from sylvie.formats.epoch_record import EpochRecord, read_metrics
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.runtime.process_group import Context
from sylvie.sampling.neighbor_picks import hop_key, pick_neighbors
from sylvie.sampling.neighbor_sampler import NeighborSampler
from sylvie.train.sampled_trainer import SampledTrainer


def dgl_graph(indptr: np.ndarray, src: np.ndarray):
    """DGL's graph over the same in-edges (CSC), as DGL's users build it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return dgl.graph(("csc", (torch.from_numpy(np.asarray(indptr, np.int64)),
                                  torch.from_numpy(np.asarray(src, np.int64)), torch.empty(0, dtype=torch.int64))),
                         num_nodes=indptr.shape[0] - 1)


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def dgl_epochs(graph_dir: Path, fanouts: list[int], batch: int, hidden: int, epochs: int, workers: int) -> list[float]:
    """Plain DGL on the whole graph: seconds of each sampled epoch (sampling, features, forward, backward, step)."""
    import torch.nn.functional as F

    w = whole_graph(graph_dir)
    dg, x, y, train = w.graph, w.x, w.y, w.train
    torch.manual_seed(0)
    dims = [x.shape[1]] + [hidden] * 2 + [w.classes]
    convs = torch.nn.ModuleList(dgl.nn.SAGEConv(a, b, "mean") for a, b in zip(dims[:-1], dims[1:]))
    opt = torch.optim.Adam(convs.parameters(), lr=0.003)
    loader = dgl.dataloading.DataLoader(dg, train, dgl.dataloading.NeighborSampler(fanouts), batch_size=batch,
                                        shuffle=True, num_workers=workers, persistent_workers=workers > 0)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for input_nodes, seeds, blocks in loader:
            h = x[input_nodes]
            for i, (conv, block) in enumerate(zip(convs, blocks)):
                if i:
                    h = F.dropout(F.relu(h), 0.5, training=True)
                h = conv(block, h)
            loss = F.cross_entropy(h, y[seeds])
            opt.zero_grad()
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    return times


def sylvie_epochs(part_dir: Path, fanouts: list[int], batch: int, hidden: int, epochs: int) -> list[float]:
    """One rank of sampled training on the one-part partition: seconds of each epoch."""
    manifest = read_manifest(part_dir)
    model = section("model", {"arch": "sage", "hidden": hidden, "layers": 3, "dropout": 0.5, "self_loop": False})
    trainer = SampledTrainer(Context(0, 1, torch.device("cpu"), "gloo"), read_shard(part_dir, 0, manifest),
                             read_topology(part_dir, manifest), model,
                             section("train", {"mode": "sampled", "lr": 0.003, "weight_decay": 0.0}),
                             section("sampling", {"fanouts": fanouts, "batch_size": batch, "prefetch": 1}),
                             section("cache", {}), seed=0, vip=None, timeout=600)
    try:
        return [trainer.epoch(e, evaluate=False).epoch_time for e in range(epochs)]
    finally:
        trainer.close()


DISTDGL_GRAPH = {"nodes": 50_000, "avg_degree": 20.0, "features": 64}  # issue 30's comparison with DistDGL
DISTDGL_EPOCH_S = 3.00  # DistDGL 1.1.3's train_dist.py there, measured by the team (issue 30), not in this run
STEADY = ("epoch_time", "fetch_wait_time", "sample_time", "fetch_time", "compute_time", "allreduce_time",
          "remote_bytes")


def train_args(fanouts: list[int], batch: int, hidden: int, epochs: int, prefetch: int, *extra) -> list[str]:
    """``sylvie train`` flags of a sampled run (fanouts in DGL's order, the first next to the inputs)."""
    return ["--mode", "sampled", "--arch", "sage", "--layers", str(len(fanouts)), "--hidden", str(hidden),
            "--no-self-loop", "--epochs", str(epochs), "--eval-every", str(epochs), "--checkpoint-every", "0",
            "--log-every", "1", "--fanouts", *map(str, fanouts), "--batch-size", str(batch), "--prefetch",
            str(prefetch), *map(str, extra)]


def steady(records: list[EpochRecord]) -> dict:
    """Rank 0's medians over epochs 2 onward (every epoch if there is one), with the final test accuracy."""
    return {**steady_medians(records, STEADY), "test_acc": records[-1].test_acc,
            "hit": records[-1].batches.cache_hit_rate}


def ranks_table(rows: list[tuple[str, dict]], head: str) -> list[str]:
    lines = [head, "", "| configuration | s/epoch | model waited s | waited share | sampling s | fetching s | "
             "computing s | all-reduce s | remote MB/epoch | cache hits | test acc |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, m in rows:
        hit = "–" if m["hit"] is None else f"{m['hit']:.0%}"
        lines.append(f"| {name} | {m['epoch_time']:.2f} | {m['fetch_wait_time']:.2f} | "
                     f"{m['fetch_wait_time'] / m['epoch_time']:.0%} | {m['sample_time']:.2f} | {m['fetch_time']:.2f} | "
                     f"{m['compute_time']:.2f} | {m['allreduce_time']:.2f} | {m['remote_bytes'] / 1e6:.1f} | "
                     f"{hit} | {m['test_acc']:.2%} |")
    return lines


def cluster_table(args, dgl_order: list[int]) -> None:
    """(c): 4 emulated machines at ``--cluster``, prefetch 0 against the pipelined path."""
    from sylvie.bench.cluster_run import train_on_cluster

    _, part = synthetic_partition(Path(args.work), parts=4, nodes=args.graph_nodes, preset="products")
    rows = []
    for prefetch in (0, args.prefetch):
        out = Path(args.work) / "cluster" / f"prefetch-{prefetch}"
        flags = train_args(dgl_order, args.batch_size, args.hidden, args.rank_epochs, prefetch)
        rows.append((f"prefetch {prefetch}" + (" (pipelined)" if prefetch else " (in line)"),
                     steady(train_on_cluster(part, out, 4, args.cluster, flags, timeout_s=3600))))
        print(f"cluster, prefetch {prefetch}: {rows[-1][1]['epoch_time']:.2f} s/epoch", file=sys.stderr, flush=True)
    head = (f"4 emulated machines (network namespaces, `sylvie bench cluster`) at {args.cluster} each, sharing "
            f"{os.cpu_count()} cores; the products-like graph above ({args.graph_nodes:,} nodes) in 4 METIS parts; "
            f"GraphSAGE 3 x {args.hidden}, fanouts ({', '.join(map(str, args.fanouts))}), batch {args.batch_size} "
            f"per rank; no cache; rank 0's medians over epochs 2-{args.rank_epochs} (remote MB: all ranks).")
    publish("\n".join(ranks_table(rows, head)), args.record and "sampled")


def loopback_table(args) -> None:
    """DistDGL's setting: 4 ranks on this machine, without a cache and with a VIP cache."""
    work = Path(args.work) / "distdgl"
    graph = synthetic_graph(work / "graph", **DISTDGL_GRAPH)
    part = partition(graph, work / "metis-p4", parts=4)
    fanouts, batch, hidden = [10, 10, 10], 256, 64
    vip = work / "vip-p4"
    if not vip.exists():
        sylvie("vip", part, "--out", vip, "--fanouts", *fanouts, "--batch-size", batch)
    configs = [("no cache, prefetch 0 (in line)", 0, ["--alpha", 0]),
               (f"no cache, prefetch {args.prefetch}", args.prefetch, ["--alpha", 0]),
               (f"VIP cache alpha 0.2, prefetch {args.prefetch}", args.prefetch,
                ["--alpha", 0.2, "--policy", "vip", "--vip", vip])]
    rows = []
    for name, prefetch, extra in configs:
        out = work / "runs" / name.split(",")[0].replace(" ", "-") / f"prefetch-{prefetch}"
        sylvie("launch", "--ranks", 4, "--", BIN / "sylvie", "train", "--partition", part, "--out", out,
               "--no-progress", *train_args(fanouts, batch, hidden, args.rank_epochs, prefetch, *extra),
               log=out.parent / f"prefetch-{prefetch}.log", timeout_s=3600)
        rows.append((name, steady(read_metrics(out))))
        print(f"{name}: {rows[-1][1]['epoch_time']:.2f} s/epoch", file=sys.stderr, flush=True)
    head = (f"DistDGL's setting (issue 30): synthetic graph of {DISTDGL_GRAPH['nodes']:,} nodes, average degree "
            f"{DISTDGL_GRAPH['avg_degree']:g}, {DISTDGL_GRAPH['features']} features, 4 METIS parts; GraphSAGE 3 x "
            f"{hidden}, fanouts (10, 10, 10), {batch} seeds per rank per step; 4 ranks on this machine's "
            f"{os.cpu_count()} cores (`sylvie launch --ranks 4`, loopback); rank 0's medians over epochs "
            f"2-{args.rank_epochs}. DistDGL 1.1.3 (`train_dist.py`, one server and one trainer per part) on the same "
            f"graph, parts, model and cores: {DISTDGL_EPOCH_S:.2f} s/epoch, measured by the team, not in this run.")
    publish("\n".join(ranks_table(rows, head)), args.record and "sampled")


def set_threads(n: int) -> None:
    numba.set_num_threads(n)
    dgl.utils.set_num_threads(n)
    torch.set_num_threads(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph-nodes", type=int, default=244_903, help="nodes (default: a tenth of ogbn-products')")
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="first next to the seeds")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=8, help="minibatches per timed run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--hidden", type=int, default=256, help="the epoch table's GraphSAGE width")
    ap.add_argument("--epochs", type=int, default=3, help="the epoch table's epochs per run (median of 2 onward)")
    ap.add_argument("--dgl-workers", type=int, nargs="*", default=[0, 1, 2], help="DataLoader num_workers to try")
    ap.add_argument("--cluster", metavar="RATE", help="also (c) on 4 emulated machines at this tc rate (root)")
    ap.add_argument("--loopback", action="store_true", help="also 4 ranks on this machine in DistDGL's setting")
    ap.add_argument("--rank-epochs", type=int, default=8, help="epochs of each 4-rank run (median of 2 onward)")
    ap.add_argument("--prefetch", type=int, default=2, help="the pipelined runs' sampling.prefetch")
    ap.add_argument("--skip-one-rank", action="store_true", help="only the 4-rank tables")
    ap.add_argument("--work", default="results/bench-sampled")
    add_record_option(ap, "sampled")
    args = ap.parse_args()
    if max(args.threads) > numba.config.NUMBA_NUM_THREADS:
        sys.exit(f"--threads {max(args.threads)} is more than numba's {numba.config.NUMBA_NUM_THREADS}: "
                 f"set NUMBA_NUM_THREADS={max(args.threads)}")
    if args.cluster and os.geteuid() != 0:
        sys.exit("--cluster makes network namespaces: run as root (sudo)")
    if not args.skip_one_rank:
        throughput_table(args)
        if args.epochs:
            epoch_table(args, args.fanouts[::-1])
    if args.loopback:
        loopback_table(args)
    if args.cluster:
        cluster_table(args, args.fanouts[::-1])


def throughput_table(args) -> None:
    graph, part = synthetic_partition(Path(args.work), parts=4, nodes=args.graph_nodes, preset="products")
    manifest = read_manifest(part)
    topo = read_topology(part, manifest)
    indptr, src = np.asarray(topo.in_indptr, np.int64), topo.in_src
    g = dgl_graph(indptr, src)
    train = np.flatnonzero(read_shard(part, 0, manifest).train)
    rng = np.random.default_rng(0)
    seeds = [rng.choice(train, args.batch_size, replace=False) for _ in range(args.batches)]
    dgl_order = args.fanouts[::-1]
    ours = NeighborSampler(indptr, src, dgl_order, train, args.batches, seed=0, rank=0)
    theirs = dgl.dataloading.NeighborSampler(dgl_order)
    frontier = ours.sample(seeds[0], 0, 0).blocks[1].src_ids.numpy()  # the 2-hop frontier
    hop_fanout = args.fanouts[0]
    frontier_t = torch.from_numpy(frontier)

    rows = []
    for threads in args.threads:
        set_threads(threads)
        picked = int(pick_neighbors(indptr, src, frontier, hop_fanout, hop_key(1, 0))[1].shape[0])
        t_ours = timed(lambda: pick_neighbors(indptr, src, frontier, hop_fanout, hop_key(1, 0)), args.repeats)
        t_dgl = timed(lambda: dgl.sampling.sample_neighbors(g, frontier_t, hop_fanout), args.repeats)
        rows.append((f"one hop, fanout {hop_fanout}, {len(frontier):,} vertices", threads, picked, t_ours, t_dgl))
        edges = sum(b.num_edges for i, s in enumerate(seeds) for b in ours.sample(s, 0, i).blocks)
        t_ours = timed(lambda: [ours.sample(s, 0, i) for i, s in enumerate(seeds)], args.repeats)
        t_dgl = timed(lambda: [theirs.sample_blocks(g, torch.from_numpy(s)) for s in seeds], args.repeats)
        rows.append((f"{args.batches} minibatches with their blocks", threads, edges, t_ours, t_dgl))
        print(f"{threads} thread(s) done", file=sys.stderr, flush=True)

    lines = [f"products-like graph (preset: products): {topo.num_nodes:,} nodes, {src.shape[0]:,} directed edges, "
             f"{manifest['num_parts']} METIS parts; fanouts ({', '.join(map(str, args.fanouts))}) (first next to the "
             f"seeds), batch {args.batch_size} of part 0's training vertices; medians of {args.repeats} runs. "
             f"Sampled edges per second (millions); ours / DGL > 1 means ours is faster.", "",
             "| work | threads | sampled edges | ours s | DGL s | ours Medges/s | DGL Medges/s | ours / DGL |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for work, threads, edges, t_ours, t_dgl in rows:
        lines.append(f"| {work} | {threads} | {edges:,} | {t_ours:.4f} | {t_dgl:.4f} | {edges / t_ours / 1e6:.1f} | "
                     f"{edges / t_dgl / 1e6:.1f} | {t_dgl / t_ours:.2f}x |")
    publish("\n".join(lines), args.record and "sampled")


def epoch_table(args, dgl_order: list[int]) -> None:
    set_threads(max(args.threads))
    graph, part = synthetic_partition(Path(args.work), parts=1, nodes=args.graph_nodes, preset="products",
                                      part_name="metis-p1")
    rows = {f"plain DGL, num_workers {w}": float(np.median(
        dgl_epochs(graph, dgl_order, args.batch_size, args.hidden, args.epochs, w)[1:])) for w in args.dgl_workers}
    best = min(rows, key=rows.get)
    ours = float(np.median(sylvie_epochs(part, dgl_order, args.batch_size, args.hidden, args.epochs)[1:]))
    lines = [f"One rank, the whole products-like graph ({args.graph_nodes:,} nodes) as one part; GraphSAGE 3 x "
             f"{args.hidden}, fanouts ({', '.join(map(str, args.fanouts))}) (first next to the seeds), batch "
             f"{args.batch_size}, {max(args.threads)} threads; seconds per epoch (median of epochs 2-{args.epochs}).",
             "", "| | s/epoch | vs plain DGL's best |", "| --- | --- | --- |"]
    for name, s in {**rows, "sylvie, 1 rank (prefetch 1)": ours}.items():
        lines.append(f"| {name} | {s:.2f} | {s / rows[best]:.2f}x |")
    publish("\n".join(lines), args.record and "sampled")


if __name__ == "__main__":
    main()
