"""The sampler against DGL's, side by side in one run on the same graph, seeds and thread count: sampled edges per
second of one hop (ours ``pick_neighbors`` against ``dgl.sampling.sample_neighbors``) and of whole minibatches
with their blocks (our ``NeighborSampler.sample`` against ``dgl.dataloading.NeighborSampler.sample_blocks``), at 1
and 2 threads; and one rank's sampled epoch (``sylvie train --mode sampled``'s trainer, in this process) against
plain DGL on the whole graph (``DataLoader`` + ``NeighborSampler``, at its best ``num_workers``).

    python benchmarks/sampled.py                       # products-like, 244,903 nodes, fanouts (15, 10, 5), batch 1024
    python benchmarks/sampled.py --write benchmarks/README.md

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
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import dgl
import numba
import numpy as np
import torch
from common import publish, synthetic_partition, whole_graph

from sylvie.config import section
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
    ap.add_argument("--work", default="results/bench-sampled")
    ap.add_argument("--write", help="a Markdown file whose table (between the markers) is replaced")
    args = ap.parse_args()
    if max(args.threads) > numba.config.NUMBA_NUM_THREADS:
        sys.exit(f"--threads {max(args.threads)} is more than numba's {numba.config.NUMBA_NUM_THREADS}: "
                 f"set NUMBA_NUM_THREADS={max(args.threads)}")

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
    frontier = ours.sample(seeds[0], 0, 0).blocks[1].srcdata[dgl.NID].numpy()  # the 2-hop frontier
    hop_fanout = args.fanouts[0]
    frontier_t = torch.from_numpy(frontier)

    rows = []
    for threads in args.threads:
        set_threads(threads)
        picked = int(pick_neighbors(indptr, src, frontier, hop_fanout, hop_key(1, 0))[1].shape[0])
        t_ours = timed(lambda: pick_neighbors(indptr, src, frontier, hop_fanout, hop_key(1, 0)), args.repeats)
        t_dgl = timed(lambda: dgl.sampling.sample_neighbors(g, frontier_t, hop_fanout), args.repeats)
        rows.append((f"one hop, fanout {hop_fanout}, {len(frontier):,} vertices", threads, picked, t_ours, t_dgl))
        edges = sum(b.num_edges() for i, s in enumerate(seeds) for b in ours.sample(s, 0, i).blocks)
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
    publish("\n".join(lines), args.write, "sampler-throughput")
    if args.epochs:
        epoch_table(args, dgl_order)


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
    publish("\n".join(lines), args.write, "sampled-epoch")


if __name__ == "__main__":
    main()
