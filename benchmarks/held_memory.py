"""A steady full-graph epoch with today's code and with a rank's memory managed three ways by this tree, side by
side in one run (``SYLVIE_CPU_MEMORY``, ``sylvie/runtime/held_memory.py``):

- **today** (``--before``, a revision checked out into a temporary worktree, as ``before_after.py`` does): every
  freed block of 1 MB or more went back to the system at once (glibc's mmap threshold fixed at 1 MB,
  ``freed_memory.py``), so every block of the part's size was faulted in afresh every epoch;
- **return**: the same in this tree (which also adds a layer's bias and applies its ReLU in place);
- **glibc**: glibc's own thresholds (blocks kept in its heap, which they fragment; above 32 MB still returned);
- **hold**: blocks of 1 MB or more planned per step and held across epochs (the default).

    python benchmarks/held_memory.py --before 3059992               # ~16 minutes on 2 cores
    python benchmarks/held_memory.py --before 3059992 --write benchmarks/README.md

The graph: the convergence graph of ``convergence.py`` and ``before_after.py`` (50,000 nodes, average degree 20, 64
features, 16 classes, 30% training, 10% validation), 4 METIS parts (made by today's code, whose format both read), 4
ranks on this machine (``python -m sylvie launch``, loopback). Models: GraphSAGE 3 x 64 and 3 x 256 (mean, no
self-loops), GCN 3 x 64, GAT 3 x (4 heads x 16); dropout 0.5, Adam lr 0.01; each fp32 synchronous and 1-bit
pipelined (``--bits 1 --pipeline``: every epoch but the first one epoch stale). Every run trains ``--epochs``
epochs, evaluating only after the last. A row's figures: the median epoch time of rank 0 over the steady epochs (all
but the first ``--skip``; ``epoch_time``: training only), the median minor page faults of a steady epoch (the mean
over the ranks; ``rank_minor_faults``, which today's code does not record), and each rank's peak RSS over the whole
run (the kernel's high-water mark, VmHWM, read every 0.2 s while the run lasts); with ``--repeats``, the medians over
the repeats. The four run one after another for each row and repeat, in an order that rotates, so that drift of the
machine hits each alike.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import psutil
from before_after import environ, version_env, worktrees
from common import publish, run, synthetic_partition

VARIANTS = ("today", "return", "glibc", "hold")
MODELS = {
    "GraphSAGE 3 x 64": ["--arch", "sage", "--hidden", "64", "--no-self-loop"],
    "GraphSAGE 3 x 256": ["--arch", "sage", "--hidden", "256", "--no-self-loop"],
    "GCN 3 x 64": ["--arch", "gcn", "--hidden", "64", "--self-loop"],
    "GAT 3 x (4 x 16)": ["--arch", "gat", "--hidden", "16", "--heads", "4", "--self-loop"],
}
COMMS = {"fp32 synchronous": ["--bits", "32", "--no-pipeline"], "1-bit pipelined": ["--bits", "1", "--pipeline"]}


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
                hwm = _vm_hwm(p.pid)
            except (psutil.Error, OSError):
                continue
            self.peaks[int(rank)] = max(self.peaks.get(int(rank), 0), hwm)
        return float(sum(self.peaks.values()))


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def one_run(partition: Path, out: Path, variant: str, checkout: Path, args: list, epochs: int, skip: int) -> dict:
    py = [sys.executable, "-m", "sylvie"]
    cmd = [*py, "launch", "--ranks", "4", "--", *py, "train", "--partition", partition, "--out", out, "--layers", "3",
           "--dropout", "0.5", "--lr", "0.01", "--epochs", epochs, "--eval-every", epochs, "--checkpoint-every", "0",
           "--no-progress", *args]
    env = version_env(checkout)
    if variant != "today":
        env["SYLVIE_CPU_MEMORY"] = variant
    peaks = RankPeaks()
    with environ(env):
        run(cmd, log=out.with_suffix(".log"), sample=peaks, sample_every_s=0.2)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steady = records[skip:]
    faults = [r.get("rank_minor_faults") for r in steady]
    return {"seconds": statistics.median(r["epoch_time"] for r in steady),
            "faults": statistics.median(statistics.mean(f) for f in faults) if all(faults) else None,
            "peak": [peaks.peaks.get(rank, 0) for rank in range(4)]}


def medians(runs: list[dict]) -> dict:
    """The median over repeated runs of the epoch time, the faults and each rank's peak."""
    faults = [r["faults"] for r in runs]
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "faults": statistics.median(faults) if all(f is not None for f in faults) else None,
            "peak": [statistics.median(r["peak"][rank] for r in runs) for rank in range(4)]}


def cell(got: dict) -> str:
    faults = "-" if got["faults"] is None else f"{got['faults']:,.0f}"
    return f"{got['seconds']:.3f} / {faults} / {'-'.join(str(round(p / 2**20)) for p in got['peak'])}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="today's revision (checked out in a temporary worktree)")
    ap.add_argument("--work", default="results/bench-held-memory", help="graph, partition and runs go here")
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--skip", type=int, default=4, help="epochs left out of the medians (start-up; a plan is made "
                    "in the second step of its kind and learns in the next)")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--repeats", type=int, default=1, help="runs of each variant per row; their medians are shown "
                    "(a rank's peak varies by 1-2 MB from run to run)")
    ap.add_argument("--write", help="a Markdown file whose table (between the markers) is replaced")
    ap.add_argument("--section", default="held-memory-table", help="the markers' name")
    args = ap.parse_args()
    work = Path(args.work)
    rows = []
    with worktrees() as add:
        checkouts = {"today": add(args.before), **{v: Path(__file__).resolve().parent.parent for v in VARIANTS[1:]}}
        with environ(version_env(checkouts["today"])):  # made by today's code: a format both versions read
            _, part = synthetic_partition(work, parts=4, nodes=args.nodes, avg_degree=20, features=64, classes=16,
                                          train_fraction=0.3, val_fraction=0.1)
        for i, (model, comm) in enumerate((m, c) for m in args.models for c in COMMS):
            runs = {v: [] for v in VARIANTS}
            for r in range(args.repeats):
                k = (i + r) % 4
                for variant in VARIANTS[k:] + VARIANTS[:k]:
                    name = f"{model}-{comm}-{variant}-{r}".replace(" ", "_")
                    runs[variant].append(one_run(part, work / "runs" / name, variant, checkouts[variant],
                                                 MODELS[model] + COMMS[comm], args.epochs, args.skip))
                    print(f"{model}, {comm}, {variant} ({r + 1}/{args.repeats}): {cell(runs[variant][-1])}", flush=True)
            rows.append((model, comm, {v: medians(runs[v]) for v in VARIANTS}))
    lines = [f"{args.nodes:,}-node convergence graph (average degree 20, 64 features, 16 classes), 4 METIS parts, "
             f"4 ranks on loopback; seconds of the median steady epoch (epochs {args.skip + 1}-{args.epochs}) / its "
             "minor page faults (mean over the ranks) / each rank's peak RSS, MB (ranks 0-3): today's code "
             f"({args.before}), and this tree with freed memory returned at once, kept by glibc, and held (new):",
             "",
             "| model | exchange | today | return | glibc | hold | hold vs today: speed-up / highest peak |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for model, comm, got in rows:
        speed = got["today"]["seconds"] / got["hold"]["seconds"]
        peak = max(got["hold"]["peak"]) / max(got["today"]["peak"])
        cells = " | ".join(cell(got[v]) for v in VARIANTS)
        lines.append(f"| {model} | {comm} | {cells} | {speed:.2f}x / {peak:.3f}x |")
    if args.repeats > 1:
        over = f"medians over {args.repeats} runs of each: seconds of the median"
        lines[0] = lines[0].replace("seconds of the median", over)
    publish("\n".join(lines), args.write, args.section)


if __name__ == "__main__":
    main()
