"""The feature store's tiers on a GPU: rows per second served to sampled minibatches, for ``gpu_fraction`` 0, 0.5 and 1
and zero-copy on and off (``sylvie.features.tiered_rows.TieredRows``, as a sampled rank builds it).

    python benchmarks/feature_store.py                      # products-like graph at 200,000 nodes, on the GPU
    python benchmarks/feature_store.py --nodes 20000 --device cpu   # a smoke run where there is no GPU (CPU tier only)

The table is the graph's feature rows (100 fp32 features: 400-byte rows) in the order a rank stores them, hottest
first: by how often each vertex is an input of pre-sampled minibatches (the simulation the VIP cache policy runs),
so the first ``gpu_fraction`` of the rows are the ones minibatches ask for most, as in a rank's store. The
minibatches are our sampler's (fanouts 15/10/5, batch 1024, one epoch's first --batches), each asking for its input
rows; one round serves every minibatch once through every configuration (interleaved), and each figure is the
median over --rounds rounds after a warm-up round. "device share" is the share of requested rows served from GPU
memory.
"""
import argparse
import statistics
import time

import numpy as np
import torch
from common import add_record_option, publish
from gpu_epoch import in_edges

from sylvie.config import section
from sylvie.data.registry import load
from sylvie.features.tiered_rows import TieredRows
from sylvie.sampling.neighbor_sampler import NeighborSampler, simulated_access_counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000, help="nodes of the products-like graph (default 200,000)")
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="per layer, input layer first")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=8, help="minibatches served per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    add_record_option(ap, "feature-store")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible to torch (--device cpu for a smoke run)")
    device = torch.device(args.device)
    t0 = time.perf_counter()
    g = load("synthetic-products", section("dataset", {"source": "synthetic", "preset": "products",
                                                       "nodes": args.nodes}))
    indptr, src = in_edges(g.src, g.dst, g.num_nodes)
    train_ids = np.flatnonzero(g.train_mask)
    iterations = max(1, -(-len(train_ids) // args.batch_size))
    sampler = NeighborSampler(indptr, src, args.fanouts, train_ids, iterations, seed=0, rank=0)
    counts = simulated_access_counts(sampler, 1, g.num_nodes)
    order = np.argsort(-counts, kind="stable")  # store order: hottest first
    slot_of = np.empty(g.num_nodes, np.int64)
    slot_of[order] = np.arange(g.num_nodes)
    table = torch.from_numpy(np.ascontiguousarray(np.asarray(g.features, np.float32)[order]))
    seeds = sampler.epoch_seeds(0)
    batches = [torch.from_numpy(slot_of[sampler.sample(seeds[i], 0, i).input_nodes.numpy()])
               for i in range(min(args.batches, len(seeds)))]
    rows = sum(b.numel() for b in batches)
    print(f"graph: {g.num_nodes:,} nodes, {g.features.shape[1]} features ({table.shape[1] * 4} B rows); "
          f"{len(batches)} minibatches of {rows / len(batches):,.0f} input rows on average "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)

    configs = [(f, zc) for f in args.fractions for zc in ("on", "off")] if device.type == "cuda" else [(0.0, "off")]
    stores, outs = {}, {}
    for f, zc in configs:
        stores[f, zc] = TieredRows(table, gpu_fraction=f, zero_copy=zc, device=device)
    for b in batches:
        outs[b.numel()] = torch.empty((b.numel(), table.shape[1]), dtype=table.dtype, device=device)
    ats = {n: torch.arange(n, device=device) for n in outs}

    def serve(store) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for b in batches:
            store.gather_into(b, outs[b.numel()], ats[b.numel()])
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t

    times = {c: [] for c in configs}
    for r in range(args.rounds + 1):
        for c in configs:
            s = serve(stores[c])
            if r:
                times[c].append(s)
    reference = torch.cat([table[b] for b in batches])
    lines = [f"Feature store on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'the CPU'}: "
             f"products-like graph ({g.num_nodes:,} nodes, {table.shape[1] * 4}-byte rows, hottest first by "
             f"pre-sampled access counts); {len(batches)} minibatches of our sampler (fanouts {args.fanouts}, batch "
             f"{args.batch_size}), {rows / len(batches):,.0f} input rows each on average; medians of "
             f"{args.rounds} rounds.", "",
             "| gpu_fraction | zero-copy | device share | M rows/s | GB/s | ms per minibatch |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in configs:
        store = stores[c]
        got = torch.cat([_served(store, b, device) for b in batches]).cpu()
        if not torch.equal(got, reference):
            raise SystemExit(f"gpu_fraction {c[0]}, zero-copy {c[1]}: the rows served differ from the table's")
        dev_rows = sum(int((b < store.num_device).sum()) for b in batches)
        sec = statistics.median(times[c])
        lines.append(f"| {c[0]:g} | {c[1] if device.type == 'cuda' else 'n/a (CPU)'} | {dev_rows / rows:.0%} | "
                     f"{rows / sec / 1e6:.1f} | {rows * store.row_bytes / sec / 1e9:.1f} | "
                     f"{sec / len(batches) * 1e3:.2f} |")
    publish("\n".join(lines), args.record and "feature-store")


def _served(store: TieredRows, slots: torch.Tensor, device) -> torch.Tensor:
    out = torch.empty((slots.numel(), store.dim), dtype=store.table.dtype, device=device)
    store.gather_into(slots, out, torch.arange(slots.numel(), device=device))
    return out


if __name__ == "__main__":
    main()
