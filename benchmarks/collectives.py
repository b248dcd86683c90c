"""The all-reduce of a training step on the CPU: gloo's own (`dist.all_reduce`, a ring) beside ours
(`sylvie.comm.collective.all_reduce_sum`, made of all-to-alls), the same tensors, interleaved, in one run.

    python benchmarks/collectives.py                 # 2 and 4 ranks on this machine (loopback)
    python benchmarks/collectives.py --ranks 4 --repeats 400

The tensors are the gradients (plus the step's loss and counts) of the models our users train: GCN 2 x 16 on Cora
(the default pipeline), GraphSAGE 3 x 256 and GAT 3 x (4 x 64) on the products preset (100 features, 47 classes),
the epoch's counters (a few numbers), and plain tensors of 64 KB to 1 MB (around the size where ours hands over to
gloo's ring, ``collective.ONE_STEP_BYTES``: above it "ours" is gloo's). Each cell is the median of --repeats calls
after a warm-up; gloo's and ours alternate call by call, so both see the same machine. Every rank checks that both
give the same sums (within float32 rounding: the order of the additions differs).
"""
import argparse
import os
import statistics
import time

from common import BIN, provenance, run


def gradient_sizes() -> list[tuple[str, int]]:
    """(what, number of float32) of each tensor measured."""
    from sylvie.config import section
    from sylvie.models.gnn import build_model

    def grads(in_feats, classes, **model):
        return sum(p.numel() for p in build_model(section("model", model), in_feats, classes).parameters()) + 8

    return [("epoch counters", 16),
            ("Cora GCN 2 x 16", grads(1433, 7, arch="gcn", hidden=16, layers=2)),
            ("products SAGE 3 x 256", grads(100, 47, arch="sage", hidden=256, layers=3)),
            ("products GAT 3 x (4 x 64)", grads(100, 47, arch="gat", hidden=64, heads=4, layers=3))] + [
            (f"{kb:,} KB of float32", kb * 256) for kb in (64, 128, 256, 1024)]


def rank_main(repeats: int) -> None:
    import torch
    import torch.distributed as dist

    from sylvie.comm.collective import all_reduce_sum

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for what, n in gradient_sizes():
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(n, generator=g)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a)
        all_reduce_sum(b)
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), what
        times = {"gloo": [], "ours": []}
        for r in range(repeats + 10):
            for name, op in (("gloo", dist.all_reduce), ("ours", all_reduce_sum)):
                t = x.clone()
                dist.barrier()
                t0 = time.perf_counter()
                op(t)
                if r >= 10:
                    times[name].append(time.perf_counter() - t0)
        if rank == 0:
            g_ms, o_ms = (1e3 * statistics.median(times[k]) for k in ("gloo", "ours"))
            print(f"| {world} | {what} | {n * 4 / 1024:,.1f} | {g_ms:.2f} | {o_ms:.2f} | {o_ms / g_ms:.2f}x |",
                  flush=True)
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4], help="rank counts to measure (default 2 4)")
    ap.add_argument("--repeats", type=int, default=200, help="timed calls per cell (default 200)")
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_main:
        return rank_main(args.repeats)
    print("| ranks | tensor | KB | gloo all_reduce ms | ours ms | ours/gloo |")
    print("|---|---|---|---|---|---|")
    os.environ["OMP_NUM_THREADS"] = "1"
    for world in args.ranks:
        ran = run([BIN / "torchrun", "--standalone", "--nproc-per-node", world, __file__, "--rank-main",
                   "--repeats", args.repeats], timeout_s=1800)
        print("".join(line + "\n" for line in ran.output.splitlines() if line.startswith("| ")), end="", flush=True)
    print(provenance())


if __name__ == "__main__":
    main()
