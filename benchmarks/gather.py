"""Gathering feature rows, ``out[i] = table[idx[i]]``, from a table of several GB: the feature store's paths.

    python benchmarks/gather.py                       # CPU: 4 GB table, rows of 400, 512 and 1,536 bytes
    python benchmarks/gather.py --record

CPU: the numba gather (``sylvie/comm/gather_cpu.py``) against ``torch.index_select`` and against a memory
copy of the same number of bytes (contiguous rows: the bandwidth bound). GPU (when torch sees one): the zero-copy
kernel (``gather_cuda.py``) reading the pinned table aligned and unaligned, the conventional path (CPU gather into
a pinned buffer + host-to-device copy), an all-in-GPU ``index_select`` (the upper bound, the table resident on the
GPU when it fits) and, on a CUDA build of DGL, ``dgl.utils.gather_pinned_tensor_rows``; each as GB/s of gathered
rows and as a share of the pinned host-to-device bandwidth measured in the same run. Every number is the median
of interleaved rounds (each round runs every method once; ratios are medians of per-round ratios).
"""
import argparse
import statistics
import time

import numpy as np
import torch
from common import add_record_option, publish

from sylvie.comm.gather_cpu import gather_rows
from sylvie.features.host_memory import huge_page_table


def timed(fn, r: int) -> float:
    t0 = time.perf_counter()
    fn(r)
    return time.perf_counter() - t0


def interleaved(methods: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds of ``fn(r)`` for rounds r = 1..rounds, every method once per round; round 0 warms up (compilation,
    page faults of the output)."""
    times = {name: [] for name in methods}
    for fn in methods.values():
        fn(0)
    for r in range(1, rounds + 1):
        for name, fn in methods.items():
            times[name].append(timed(fn, r))
    return times


def cpu_rows(table: np.ndarray, counts, rounds: int, rng) -> list[dict]:
    return [cpu_case(table, n, rounds, rng) for n in counts]


def cpu_case(table: np.ndarray, n: int, rounds: int, rng) -> dict:
    """Every method gets fresh random indices (or blocks, for the copy) of its own in every round: none reads rows
    that an earlier round, or the method before it, left in the caches (480 MB of L3 on the development machine).
    With few indices a round repeats the call ``reps`` times over different ones, so that each timing covers at
    least 100K rows instead of a fraction of a millisecond."""
    reps = max(1, 100_000 // n)
    t = torch.from_numpy(table)

    def draws(high):
        return [[rng.integers(0, high, n if high == table.shape[0] else None) for _ in range(reps)]
                for _ in range(rounds + 1)]

    starts, idx, t_idx = draws(table.shape[0] - n), draws(table.shape[0]), draws(table.shape[0])
    t_idx = [[torch.from_numpy(i) for i in r] for r in t_idx]
    out = np.empty((n, table.shape[1]), table.dtype)
    t_out = torch.from_numpy(np.empty_like(out))

    def copy(r):
        for s in starts[r]:
            np.copyto(out, table[s:s + n])

    def numba(r):
        for i in idx[r]:
            gather_rows(table, i, out)

    def index_select(r):
        for i in t_idx[r]:
            torch.index_select(t, 0, i, out=t_out)

    times = interleaved({"copy": copy, "numba": numba, "torch": index_select}, rounds)
    gb = reps * out.nbytes / 1e9
    return {"width": table.shape[1] * table.itemsize, "n": n,
            **{k: gb / statistics.median(v) for k, v in times.items()},
            "vs_copy": statistics.median(a / b for a, b in zip(times["copy"], times["numba"])),
            "vs_torch": statistics.median(a / b for a, b in zip(times["torch"], times["numba"]))}


def gpu_rows(table: np.ndarray, counts, rounds: int, rng) -> list[dict]:
    from sylvie.numba_cuda import cuda

    dev = torch.device("cuda")
    pinned = torch.from_numpy(table).pin_memory()  # a pinned copy, as the feature store keeps its host tier
    flat = pinned.reshape(-1)
    mapped = cuda.from_cuda_array_interface({"shape": (flat.numel(),), "typestr": "<f4",
                                             "data": (flat.data_ptr(), False), "version": 3}, owner=flat, sync=False)
    stream = torch.cuda.current_stream()
    ext = cuda.external_stream(stream.cuda_stream)
    free, _ = torch.cuda.mem_get_info()
    resident = pinned.to(dev) if pinned.nbytes < 0.8 * free else None
    try:
        import dgl.utils
        dgl_gather = dgl.utils.gather_pinned_tensor_rows
        dgl_pinned = dgl.utils.pin_memory_inplace(pinned)  # noqa: F841 - keeps the registration alive
    except Exception:  # noqa: BLE001 - DGL's CPU build, or no DGL on this machine
        dgl_gather = None
    env = (pinned, mapped, ext, resident, dgl_gather, dev)
    return [gpu_case(table, env, n, rounds, rng) for n in counts]


def gpu_case(table: np.ndarray, env, n: int, rounds: int, rng) -> dict:
    from sylvie.features.gather_cuda import launch_gather
    from sylvie.numba_cuda import cuda

    pinned, mapped, ext, resident, dgl_gather, dev = env
    idx = torch.from_numpy(rng.integers(0, table.shape[0], n))
    idx_dev = idx.to(dev)
    out = torch.empty((n, table.shape[1]), dtype=pinned.dtype, device=dev)
    staging = torch.empty((n, table.shape[1]), dtype=pinned.dtype).pin_memory()
    src = pinned[(table.shape[0] - n) // 2:][:n]

    def sync(fn):
        def run(_round):
            fn()
            torch.cuda.synchronize()
        return run

    methods = {
        "h2d": sync(lambda: out.copy_(src, non_blocking=True)),
        "aligned": sync(lambda: launch_gather(mapped, cuda.as_cuda_array(idx_dev), cuda.as_cuda_array(out),
                                              aligned=True, stream=ext)),
        "unaligned": sync(lambda: launch_gather(mapped, cuda.as_cuda_array(idx_dev), cuda.as_cuda_array(out),
                                                aligned=False, stream=ext)),
        "conventional": sync(lambda: out.copy_(torch.from_numpy(
            gather_rows(table, idx.numpy(), staging.numpy())), non_blocking=True)),
    }
    if resident is not None:
        methods["gpu index_select"] = sync(lambda: torch.index_select(resident, 0, idx_dev, out=out))
    if dgl_gather is not None:
        methods["dgl"] = sync(lambda: out.copy_(dgl_gather(pinned, idx_dev)))
    times = interleaved(methods, rounds)
    gb = n * table.shape[1] * table.itemsize / 1e9
    row = {"width": table.shape[1] * table.itemsize, "n": n}
    for k, v in times.items():
        row[k] = gb / statistics.median(v)
        row[f"{k}/h2d"] = statistics.median(h / t for h, t in zip(times["h2d"], v))
    row["aligned/conventional"] = statistics.median(c / a for c, a in zip(times["conventional"], times["aligned"]))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table-gb", type=float, default=4.0, help="table size in GB (default 4)")
    ap.add_argument("--widths", type=int, nargs="+", default=[400, 512, 1536], help="row bytes (fp32)")
    ap.add_argument("--counts", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--pages", choices=("huge", "4k"), default="huge",
                    help="the table's pages: huge (advised, as the feature store allocates its host tier) or 4k")
    add_record_option(ap, "gather")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cpu, gpu = [], []
    for width in args.widths:
        rows = int(args.table_gb * 1e9) // width
        if rows < max(args.counts):
            ap.error(f"a {args.table_gb:g} GB table holds {rows:,} rows of {width} bytes, fewer than the "
                     f"{max(args.counts):,} indices the memory copy needs; give a larger --table-gb")
        shape = (rows, width // 4)
        table = huge_page_table(shape, torch.float32) if args.pages == "huge" else torch.empty(shape)
        table = table.uniform_().numpy()  # touches every page (torch fills in parallel)
        cpu += cpu_rows(table, args.counts, args.rounds, rng)
        if torch.cuda.is_available():
            gpu += gpu_rows(table, args.counts, args.rounds, rng)
        del table
    threads = torch.get_num_threads()
    pages = "huge pages (advised)" if args.pages == "huge" else "4 KB pages"
    lines = [f"CPU, {args.table_gb:g} GB table of fp32 rows on {pages}, fresh random indices for every method and "
             f"round, {threads} threads, medians of {args.rounds} interleaved rounds of at least 100K rows each "
             "(GB/s of gathered rows):", "",
             "| row bytes | indices | memory copy GB/s | numba gather GB/s | torch.index_select GB/s | "
             "numba / copy | numba / index_select |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in cpu:
        lines.append(f"| {r['width']} | {r['n']:,} | {r['copy']:.2f} | {r['numba']:.2f} | {r['torch']:.2f} | "
                     f"{r['vs_copy']:.0%} | {r['vs_torch']:.2f}x |")
    if gpu:
        names = [k for k in gpu[0] if k not in ("width", "n") and "/" not in k]
        lines += ["", f"GPU ({torch.cuda.get_device_name()}), pinned table, GB/s (share of pinned host-to-device):",
                  "", "| row bytes | indices | " + " | ".join(names) + " | aligned / conventional |",
                  "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |"]
        for r in gpu:
            cells = [f"{r[k]:.2f} ({r[f'{k}/h2d']:.0%})" for k in names]
            lines.append(f"| {r['width']} | {r['n']:,} | " + " | ".join(cells) +
                         f" | {r['aligned/conventional']:.2f}x |")
    else:
        lines += ["", "No GPU visible: the zero-copy rows are not measured here."]
    publish("\n".join(lines), args.record and "gather")


if __name__ == "__main__":
    main()
