"""The partition stage beside METIS's own k-way call on the same input, at products scale, in one run: seconds and
peak memory of each, and their ratio (what the stage adds to METIS: reading the graph, METIS's input, the shards, the
topology and the checksums).

    python benchmarks/partition_scale.py                              # 2,449,029 nodes, nested communities
    python benchmarks/partition_scale.py --scale 0.25 --structure blocks
    python benchmarks/partition_scale.py --record

The graph: ogbn-products' shape (2,449,029 nodes at scale 1, average degree 50 asked, 100 features, 47 classes, 8%
training and 2% validation nodes), from the nested-communities generator (``structure: nested``, its default
community size, branching and locality; training nodes by score) or the block model (``structure: blocks``). The
commands, each a fresh process: ``sylvie partition`` (4 METIS parts balanced for full-graph training), a process that
writes METIS's input of the same graph (``metis_input``: the CSR and the three constraints) to .npy files, and for
every METIS library found (``sylvie.partition.metis_library``: the 32-bit one the stage calls where installed, the
64-bit one inside pymetis) a process that reads them and calls METIS (``metis_assign``, the stage's options) and
nothing else: its seconds are the call's own, its peak RSS that of METIS and its input. Peak memory: the process's
peak RSS from the kernel (each is one process). Every round cuts a first partition (the last round's is removed
before), so no round's stage pays for replacing the last.
"""
import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from common import BIN, REPO, add_record_option, publish, run
from scale import PRODUCTS_NODES, STAGE_TIMEOUT_S, measured

METIS_INPUT = ("xadj", "adjncy", "vweights")
DUMP = f"""
import sys, numpy as np
sys.path.insert(0, {str(REPO)!r})
from sylvie.data.graph import load_graph
from sylvie.partition.metis import metis_input
m = metis_input(load_graph(sys.argv[1], features=False))
for k in {METIS_INPUT!r}:
    np.save(f"{{sys.argv[2]}}/{{k}}.npy", getattr(m, k))
"""
METIS_ALONE = f"""
import sys, time, numpy as np
sys.path.insert(0, {str(REPO)!r})
from sylvie.partition.metis import MetisInput, metis_assign
from sylvie.partition.metis_library import libraries
lib = libraries()[int(sys.argv[3])]
m = MetisInput(*(np.load(f"{{sys.argv[1]}}/{{k}}.npy").astype(lib.idx) for k in {METIS_INPUT!r}), lib)
t = time.perf_counter()
metis_assign(m, int(sys.argv[2]))
print(f"metis call {{time.perf_counter() - t:.3f}} s")
"""
LIBRARIES = f"""
import sys, os
sys.path.insert(0, {str(REPO)!r})
from sylvie.partition.metis_library import libraries
for lib in libraries():
    print(os.path.basename(lib.path), lib.bits)
"""


def one_process(cmd: list, log: Path) -> tuple[float, float]:
    """(seconds, peak GB) of a command that is one process (threads at most): its peak RSS from the kernel, with no
    sampler reading its memory meanwhile (``scale.measured`` walks the process's page tables every 0.2 s, which
    slows a process that faults in memory on several threads more than one that does not)."""
    ran = run(cmd, log=log, timeout_s=STAGE_TIMEOUT_S)
    return ran.seconds, ran.max_rss_kib * 1024 / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of products' nodes (default: 1)")
    ap.add_argument("--structure", choices=["nested", "blocks"], default="nested", help="the generator's model")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--work", default="results/bench-partition-scale", help="graph, partition and logs go here")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every row (default: 3; the median is shown)")
    add_record_option(ap, "partition-scale")
    args = ap.parse_args()
    work = Path(args.work) / f"{args.structure}-x{args.scale:g}"
    work.mkdir(parents=True, exist_ok=True)
    nodes = int(round(PRODUCTS_NODES * args.scale))
    graph, part, metis_dir = work / "graph", work / f"metis-p{args.parts}", work / "metis-input"
    metis_dir.mkdir(exist_ok=True)
    gen = [BIN / "sylvie", "download", "synthetic", "--out", graph, "--nodes", nodes, "--avg-degree", "50",
           "--features", "100", "--classes", "47", "--train-fraction", "0.08", "--val-fraction", "0.02",
           "--structure", args.structure] + (["--split", "score"] if args.structure == "nested" else [])
    gen_s, gen_gb = measured(gen, work / "generate.log")
    measured([sys.executable, "-c", DUMP, graph, metis_dir], work / "dump.log")
    found = subprocess.run([sys.executable, "-c", LIBRARIES], capture_output=True, text=True, check=True).stdout
    libs = [(name, int(bits)) for name, bits in (line.split() for line in found.splitlines())]
    # rows: the stage, then METIS's call alone with every library found, narrowest (the stage's) first; each round
    # runs every row once, in that order, so that a slow spell of the machine falls on all of them
    runs = {row: [] for row in ["stage"] + libs}
    for _ in range(args.rounds):
        shutil.rmtree(part, ignore_errors=True)  # the last round's (this benchmark's own): a first partition
        runs["stage"].append(one_process([BIN / "sylvie", "partition", graph, "--out", part, "--parts", args.parts],
                                         work / "partition.log"))
        for i, (name, bits) in enumerate(libs):
            log = work / f"metis-{bits}.log"
            _, gb = one_process([sys.executable, "-c", METIS_ALONE, metis_dir, args.parts, i], log)
            runs[name, bits].append((float(re.search(r"metis call ([\d.]+) s", log.read_text()).group(1)), gb))
    summary = (work / "partition.log").read_text()
    cut = re.search(r"edge cut [\d,]+ \(([\d.]+)% of edges\)", summary).group(1)
    edges = int(re.search(r'"num_edges": (\d+)', (part / "manifest.json").read_text()).group(1))
    median = {row: (statistics.median(s for s, _ in rs), max(gb for _, gb in rs)) for row, rs in runs.items()}
    each = {row: " / ".join(f"{s:.1f}" for s, _ in rs) for row, rs in runs.items()}
    lines = [f"{args.structure} synthetic graph shaped like ogbn-products: {nodes:,} nodes, {edges:,} directed edges "
             f"(average degree {edges / nodes:.1f}), 100 features; generated in {gen_s:.1f} s, {gen_gb:.2f} GB peak; "
             f"{args.parts} METIS parts (edge cut {cut}%), 2 cores; {args.rounds} rounds, each running every row "
             f"once in this order: the median seconds (each round's), the largest peak:", "",
             "| what | seconds | peak RSS GB |", "| --- | --- | --- |",
             f"| `sylvie partition` (read, METIS, shards, topology, checksums, summary) | {median['stage'][0]:.1f} "
             f"({each['stage']}) | {median['stage'][1]:.2f} |"]
    for j, lib in enumerate(libs):
        role = "the stage's" if j == 0 else "pymetis's and DGL's width" if lib[1] == 64 else "another"
        lines.append(f"| METIS's own k-way call, {lib[1]}-bit `{lib[0]}` ({role}; the call alone, the process: "
                     f"METIS and its input) | {median[lib][0]:.1f} ({each[lib]}) | {median[lib][1]:.2f} |")
    for lib in libs:
        ratios = " / ".join(f"{a[0] / b[0]:.2f}" for a, b in zip(runs["stage"], runs[lib], strict=True))
        lines.append(f"| stage / METIS {lib[1]}-bit | {median['stage'][0] / median[lib][0]:.2f}x (each round: "
                     f"{ratios}) | {median['stage'][1] / median[lib][1]:.2f}x |")
    publish("\n".join(lines), args.record and "partition-scale")


if __name__ == "__main__":
    main()
