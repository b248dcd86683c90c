"""A full-graph rank's CPU memory allocator, side by side: our held-block allocator against the maintained
libraries PyTorch users preload, on the rows of the old ``held_memory.py`` and on the products preset.

    python benchmarks/allocators.py --ours ce3c77d                        # every graph: ~60 minutes on 2 cores
    python benchmarks/allocators.py --ours ce3c77d --graphs products-tenth --record
    python benchmarks/allocators.py --ours ce3c77d --variants ours now --graphs convergence   # before / after

Variants (each a ``sylvie launch`` of 4 ranks on this machine, loopback):

- **ours**: the held-block allocator (``held_blocks.cpp``, ``SYLVIE_CPU_MEMORY=hold``) of revision ``--ours``,
  checked out in a temporary worktree (it was removed after this comparison; that revision reads the partitions
  made here, format version 3);
- **glibc**: no allocator preloaded, glibc's own thresholds;
- **thp**: freed blocks of 1 MB or more returned to the system at once (glibc's mmap threshold fixed at 1 MB, what
  ranks did before ours) with PyTorch's transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``: blocks of 2 MB or more
  2 MB-aligned and ``madvise``d, so a block faults in 2 MB at a time);
- **tcmalloc**, **mimalloc**, **jemalloc**: the library in ``LD_PRELOAD`` of every rank (Debian's
  ``libtcmalloc-minimal4``, ``libmimalloc2.0``, ``libjemalloc2``); jemalloc with the settings PyTorch's own CPU
  launcher gives it (``torch.backends.xeon.run_cpu --enable-jemalloc``: ``oversize_threshold:1``, a background
  thread, decay after 9e9 ms, i.e. freed pages kept), which were its best here; **tcmalloc-decommit**: tcmalloc
  handing freed spans back to the system at once (``TCMALLOC_AGGRESSIVE_DECOMMIT=true``); **tcmalloc-release**:
  tcmalloc returning freed pages ten times its default rate (``TCMALLOC_RELEASE_RATE=10``); **jemalloc-kept**:
  jemalloc with PyTorch's settings but no oversize arena (``oversize_threshold:0``: PyTorch's ``oversize_threshold:1``
  puts every large block in an arena that returns its pages at once, whatever the decay);

The six run the code of ``--tree`` (default: ``--ours``'s revision), the library set by hand with ours turned off
(``SYLVIE_CPU_MEMORY=glibc``), so that only the allocator differs. A seventh, **now**, runs this checkout as
``sylvie launch`` sets its ranks up by default (``launch.allocator auto``: tcmalloc where installed, which replaced
ours): today's code against what replaced it.

Graphs: ``convergence`` (the 50,000-node graph of ``convergence.py``: average degree 20, 64 features, 16 classes;
GraphSAGE 3 x 64 and 3 x 256, GCN 3 x 64, GAT 3 x (4 x 16), each fp32 synchronous and 1-bit pipelined: the old
``held_memory.py``'s eight rows), ``products-tenth`` and ``products`` (the products preset at 244,903 and 2,449,029
nodes, 100 features, 47 classes; GraphSAGE 3 x 64 as ``config/products.yaml`` trains it, fp32 synchronous and 1-bit
pipelined; at full size fp32 only, 4 epochs). All in 4 METIS parts. A row's figures: the median epoch time of rank
0 over the steady epochs (``epoch_time``, all but the first ``skip``: ours records its plan in the second step and
learns in the next), the median minor page faults of a steady epoch (mean over the ranks) and each rank's peak RSS
over the run (VmHWM, read every 0.2 s). The variants run one after another in an order that rotates from row to
row, so that drift of the machine hits each alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import psutil
from before_after import environ, version_env, worktrees
from common import REPO, add_record_option, publish, run, synthetic_graph, synthetic_partition
from common import partition as partition_graph

from sylvie.launch.allocator import library_dirs

LIBRARIES = {"tcmalloc": "libtcmalloc_minimal.so.4", "mimalloc": "libmimalloc.so.2", "jemalloc": "libjemalloc.so.2"}
JEMALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:9000000000,"
                 "muzzy_decay_ms:9000000000")  # torch.backends.xeon.run_cpu's
JEMALLOC_KEPT_CONF = ("oversize_threshold:0,background_thread:true,metadata_thp:auto,dirty_decay_ms:9000000000,"
                      "muzzy_decay_ms:9000000000")  # the same, large blocks kept in the arenas (no oversize arena)
VARIANTS = ("ours", "glibc", "thp", "tcmalloc", "tcmalloc-decommit", "tcmalloc-release", "mimalloc", "jemalloc",
            "jemalloc-kept", "now")
SAGE64 = ["--arch", "sage", "--hidden", "64", "--no-self-loop"]
CONVERGENCE_MODELS = {
    "GraphSAGE 3 x 64": SAGE64,
    "GraphSAGE 3 x 256": ["--arch", "sage", "--hidden", "256", "--no-self-loop"],
    "GCN 3 x 64": ["--arch", "gcn", "--hidden", "64", "--self-loop"],
    "GAT 3 x (4 x 16)": ["--arch", "gat", "--hidden", "16", "--heads", "4", "--self-loop"],
}
COMMS = {"fp32 synchronous": ["--bits", "32", "--no-pipeline"], "1-bit pipelined": ["--bits", "1", "--pipeline"]}
GRAPHS = {  # name: (nodes, models, exchanges, epochs, skip)
    "convergence": (50_000, CONVERGENCE_MODELS, COMMS, 10, 4),
    "products-tenth": (244_903, {"GraphSAGE 3 x 64": SAGE64}, COMMS, 8, 3),
    "products": (2_449_029, {"GraphSAGE 3 x 64": SAGE64}, COMMS, 4, 2),
}
RESULTS = "results.jsonl"  # every run's figures, one line each, in --work: the table is made from all of them


def library(name: str) -> str:
    """The path of a library variant's shared object, looked for where ``sylvie launch`` looks for tcmalloc, or exit
    naming the package."""
    for d in library_dirs(dict(os.environ)):
        p = d / LIBRARIES[name]
        if p.exists():
            return str(p)
    raise SystemExit(f"{LIBRARIES[name]} not found: install it (make install installs tcmalloc; apt-get install "
                     "libtcmalloc-minimal4 libmimalloc2.0 libjemalloc2)")


def variant_env(variant: str, checkout: Path) -> dict:
    env = {k: v for k, v in version_env(checkout).items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    if variant == "now":
        return env
    if variant == "ours":
        return {**env, "SYLVIE_CPU_MEMORY": "hold"}
    env.update(SYLVIE_CPU_MEMORY="glibc")
    if variant == "thp":
        env.update(SYLVIE_CPU_MEMORY="return", THP_MEM_ALLOC_ENABLE="1", MALLOC_MMAP_THRESHOLD_="1048576",
                   MALLOC_TRIM_THRESHOLD_="1048576")
    elif variant == "tcmalloc-decommit":  # freed spans handed back to the system at once
        env.update(LD_PRELOAD=library("tcmalloc"), TCMALLOC_AGGRESSIVE_DECOMMIT="true")
    elif variant == "tcmalloc-release":  # freed spans handed back 10x faster than tcmalloc's default rate
        env.update(LD_PRELOAD=library("tcmalloc"), TCMALLOC_RELEASE_RATE="10")
    elif variant == "jemalloc-kept":
        env.update(LD_PRELOAD=library("jemalloc"), MALLOC_CONF=JEMALLOC_KEPT_CONF)
    elif variant in LIBRARIES:
        env["LD_PRELOAD"] = library(variant)
        if variant == "jemalloc":
            env["MALLOC_CONF"] = JEMALLOC_CONF
    return env


class RankPeaks:
    """The largest VmHWM seen of each rank (a process of the tree with ``RANK`` in its environment)."""

    def __init__(self):
        self.peaks: dict[int, int] = {}

    def __call__(self, pid: int) -> float:
        for p in psutil.Process(pid).children(recursive=True):
            try:
                env = p.environ()
                rank = env.get("RANK")
                if rank is None or "LOCAL_RANK" not in env:
                    continue
                hwm = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{p.pid}/status").read_text()
                           .splitlines() if line.startswith("VmHWM:"))
            except (psutil.Error, OSError, StopIteration):
                continue
            self.peaks[int(rank)] = max(self.peaks.get(int(rank), 0), hwm)
        return float(sum(self.peaks.values()))


def one_run(partition: Path, out: Path, env: dict, args: list, epochs: int, skip: int) -> dict:
    py = [sys.executable, "-m", "sylvie"]
    cmd = [*py, "launch", "--ranks", "4", "--", *py, "train", "--partition", partition, "--out", out, "--layers", "3",
           "--dropout", "0.5", "--lr", "0.01", "--epochs", epochs, "--eval-every", epochs, "--checkpoint-every", "0",
           "--no-progress", *args]
    peaks = RankPeaks()
    with environ(env):
        run(cmd, log=out.with_suffix(".log"), sample=peaks, sample_every_s=0.2)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steady = records[skip:]
    faults = [r.get("rank_minor_faults") for r in steady]
    return {"seconds": statistics.median(r["epoch_time"] for r in steady),
            "faults": statistics.median(statistics.mean(f) for f in faults) if all(faults) else None,
            "peak": [peaks.peaks.get(rank, 0) for rank in range(4)]}


def cell(got: dict) -> str:
    faults = "-" if got["faults"] is None else f"{got['faults']:,.0f}"
    return f"{got['seconds']:.3f} / {faults} / {'-'.join(str(round(p / 2**20)) for p in got['peak'])}"


def graph_partition(work: Path, name: str, nodes: int) -> Path:
    if name == "convergence":
        return synthetic_partition(work / name, parts=4, nodes=nodes, avg_degree=20, features=64, classes=16,
                                   train_fraction=0.3, val_fraction=0.1)[1]
    graph = synthetic_graph(work / name / "graph", preset="products", nodes=nodes)
    return partition_graph(graph, work / name / "metis-p4", parts=4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="a revision with the held-block allocator (checked out in a "
                    "temporary worktree), e.g. ce3c77d")
    ap.add_argument("--tree", help="the revision the libraries run (checked out in a temporary worktree); "
                    "default: --ours's")
    ap.add_argument("--work", default="results/bench-allocators", help="graphs, partitions and runs go here")
    ap.add_argument("--graphs", nargs="+", choices=list(GRAPHS), default=list(GRAPHS))
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--repeats", type=int, default=1, help="runs of each variant per row (a cell shows their "
                    "medians, with the runs of earlier invocations in the same --work)")
    ap.add_argument("--table-only", action="store_true", help="run nothing: the table of the runs in --work")
    add_record_option(ap, "allocators")
    ap.add_argument("--topic", default="allocators", help="the record's topic (default: allocators)")
    args = ap.parse_args()
    work = Path(args.work).resolve()
    if not args.table_only:
        measure(args, work)
    publish(table(work, args.graphs), args.record and args.topic)


def measure(args, work: Path) -> None:
    variants = list(args.variants)
    with worktrees() as add:
        ours = add(args.ours)
        tree = add(args.tree) if args.tree and args.tree != args.ours else ours
        checkouts = {v: (REPO if v == "now" else ours if v == "ours" else tree) for v in variants}
        i = 0
        for name in args.graphs:
            nodes, models, comms, epochs, skip = GRAPHS[name]
            part = graph_partition(work, name, nodes)
            for model in models:
                for comm in comms:
                    for r in range(args.repeats):
                        for variant in variants[i % len(variants):] + variants[:i % len(variants)]:
                            tag = f"{name}-{model}-{comm}-{variant}-{r}".replace(" ", "_")
                            got = one_run(part, work / "runs" / tag, variant_env(variant, checkouts[variant]),
                                          models[model] + comms[comm], epochs, skip)
                            with open(work / RESULTS, "a") as f:
                                f.write(json.dumps({"graph": name, "model": model, "comm": comm, "variant": variant,
                                                    **got}) + "\n")
                            print(f"{name}, {model}, {comm}, {variant}: {cell(got)}", flush=True)
                        i += 1


def table(work: Path, graphs: list[str]) -> str:
    """Medians over the runs of each cell, rows in GRAPHS' order; a column for each variant run in ``work``, and a
    variant not run for a row shows '-'."""
    runs = [json.loads(line) for line in (work / RESULTS).read_text().splitlines()] if (work / RESULTS).exists() \
        else []
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in runs)]
    lines = ["4 METIS parts, 4 ranks on this machine (loopback); each cell: seconds of the median steady epoch of "
             "rank 0 / its minor page faults (mean over the ranks) / each rank's peak RSS, MB (ranks 0-3), medians "
             "over the runs (n). Last columns: the fastest library's time and highest rank peak over ours's, and "
             "now's (this checkout's default) over ours's (above 1: ours faster or smaller).",
             "",
             f"| graph | model | exchange | steady epochs | {' | '.join(variants)} | fastest library / ours: time, "
             "peak | now / ours: time, peak |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in variants) + " | --- | --- |"]
    for name in graphs:
        nodes, models, comms, epochs, skip = GRAPHS[name]
        for model in models:
            for comm in comms:
                got = {}
                for v in variants:
                    mine = [r for r in runs if (r["graph"], r["model"], r["comm"], r["variant"])
                            == (name, model, comm, v)]
                    if mine:
                        got[v] = {**medians(mine), "n": len(mine)}
                if not got:
                    continue
                libs = [v for v in variants if v in got and v not in ("ours", "now")]
                versus = [_versus(got, min(libs, key=lambda v: got[v]["seconds"])) if libs else "-",
                          _versus(got, "now")]
                cells = " | ".join(f"{cell(got[v])} ({got[v]['n']})" if v in got else "-" for v in variants)
                lines.append(f"| {name} ({nodes:,} nodes) | {model} | {comm} | {skip + 1}-{epochs} | {cells} | "
                             f"{' | '.join(versus)} |")
    return "\n".join(lines)


def _versus(got: dict, variant: str) -> str:
    """``variant``'s time and highest rank peak over ours's ("-" where either was not run)."""
    if "ours" not in got or variant not in got:
        return "-"
    return (f"{variant} {got[variant]['seconds'] / got['ours']['seconds']:.2f}x / "
            f"{max(got[variant]['peak']) / max(got['ours']['peak']):.2f}x")


def medians(runs: list[dict]) -> dict:
    faults = [r["faults"] for r in runs]
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "faults": statistics.median(faults) if all(f is not None for f in faults) else None,
            "peak": [statistics.median(r["peak"][rank] for r in runs) for rank in range(4)]}


if __name__ == "__main__":
    main()
