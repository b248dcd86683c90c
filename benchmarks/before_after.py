"""The same epochs timed with two versions of the code, side by side in one run: ``--before`` (a git revision,
checked out into a temporary worktree, removed afterwards) and ``--after`` (by default this working tree, as it is
now; or a directory holding a checkout, or another revision). Every run is ``python -m sylvie ...`` of this
environment with ``PYTHONPATH`` at the version's checkout and ``PYTHONSAFEPATH=1`` (no current directory on
``sys.path``), so ``import sylvie`` resolves there in the run and in every rank torchrun starts (checked before the
first run of each version, directly and under ``sylvie launch``). The runs alternate (before, after, after, before,
before, after, ...) so that the drift of a shared machine hits both versions alike.

    python benchmarks/before_after.py --before f88f2bb                      # ~12-15 minutes on 2 cores
    python benchmarks/before_after.py --before f88f2bb --record
    python benchmarks/before_after.py --before f88f2bb --after f88f2bb \\
        --sampled-nodes 20000 --sampled-epochs 3 --full-nodes 5000 --full-epochs 4 --repeats 1   # smoke test

The measurements, each a ``sylvie train`` of each version whose epoch times (``epoch_time`` in ``metrics.jsonl``:
training only, evaluation excluded) are read after it ends:

- **sampled**: one rank's sampled epoch in the setting of ``sampled.py``'s epoch table: the products-like graph
  (``preset: products``, ``--sampled-nodes``) as one METIS part, GraphSAGE 3 x 256 (mean, dropout 0.5, no
  self-loops, Adam lr 0.003, no weight decay), fanouts (15, 10, 5) (first next to the seeds), batch 1024,
  prefetch 1, no cache, ``--threads`` threads; ``sylvie train --mode sampled`` in one process.
- **full-graph**: the convergence graph of ``convergence.py`` (``--full-nodes`` nodes, average degree 20, 64
  features, 16 classes, 30% training, 10% validation; 4 METIS parts), GraphSAGE 3 x 64 (and GCN 3 x 64 unless
  ``--no-gcn``), dropout 0.5, self-loops, Adam lr 0.01, weight decay 5e-4, fp32 synchronous; 4 ranks on this
  machine (``sylvie launch --ranks 4``, loopback), rank 0's epoch times.

- **typed** (``--no-typed`` leaves them out): R-GCN 2 x 64 (dropout 0.5, Adam lr 0.01, no weight decay) on the
  mag-like graph (``preset: mag``, ``--typed-nodes``): full-graph on 2 METIS parts (2 ranks, loopback, fp32
  synchronous), and sampled on one part (fanouts (10, 10), batch 1024, prefetch 1, no cache).

A version's figure is the median over the steady epochs (all but the first ``--skip-*``) of all its runs together;
beside it, in brackets, the lowest and highest of its runs' medians. The graphs and partitions are made once in
``--work`` (with the before version's code) and read by both versions; the runs' directories and logs stay under
``--work``/runs.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import REPO, add_record_option, publish, run, synthetic_partition

INTRO = ("The sampled epoch of `sampled.py` (one rank, the products-like graph) and the full-graph epoch of the "
         "convergence graph (4 ranks, loopback) timed with two versions of the code in one run, the runs "
         "alternating: the before revision in a temporary git worktree, the after one this working tree "
         "(`before_after.py`'s docstring has the settings).")
PRODUCTS_FANOUTS = [5, 10, 15]  # sampled.py's (15, 10, 5), in DGL's order (the first next to the inputs)


@dataclass
class Version:
    label: str  # before / after
    name: str  # what the table says it is: a revision, or a working tree at its commit
    checkout: Path
    env: dict = field(default_factory=dict)


@dataclass
class Measurement:
    key: str
    title: str  # the table's first column
    graph: str  # the table's second column
    skip: int
    commands: object  # (version, out) -> the command line
    times: dict = field(default_factory=lambda: {"before": [], "after": []})  # label -> per run, steady epochs
    peak_kib: dict = field(default_factory=lambda: {"before": [], "after": []})  # label -> per run, largest process


def git(*args: str, cwd: Path = REPO) -> str:
    p = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {p.stderr.strip()}")
    return p.stdout.strip()


def version_env(checkout: Path) -> dict:
    """This environment with ``import sylvie`` resolving in ``checkout`` (also in torchrun's ranks: they inherit
    it). PYTHONSAFEPATH keeps ``python -m``'s current directory off ``sys.path``, where another checkout may be."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "PYTHONPATH": str(checkout), "PYTHONSAFEPATH": "1"}


@contextlib.contextmanager
def environ(env: dict):
    """``os.environ`` replaced by ``env`` inside (common.run passes ``os.environ`` to its commands)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def worktrees():
    """Yields ``add(rev) -> Path``: a detached worktree of ``rev`` in a temporary directory; every one added is
    removed on the way out (also after a failure, Ctrl-C or SIGTERM), and the temporary directory with them."""
    tmp = Path(tempfile.mkdtemp(prefix="sylvie-before-after-"))
    added: list[Path] = []

    def add(rev: str) -> Path:
        path = tmp / f"{len(added)}-{rev.replace('/', '_')}"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(path), rev],
                       check=True)
        added.append(path)
        return path

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield add
    finally:
        signal.signal(signal.SIGTERM, previous)
        for path in added:  # --force: the runs leave numba's caches (__pycache__) there
            p = subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                               capture_output=True, text=True)
            if p.returncode:
                print(f"could not remove the worktree {path}: {p.stderr.strip()}; remove it with `git worktree "
                      f"remove --force {path}`", file=sys.stderr)
        with contextlib.suppress(OSError):
            tmp.rmdir()  # empty once its worktrees are gone; left (and named above) otherwise


def resolve(spec: str, label: str, add) -> Version:
    """A revision (checked out into a worktree) or a directory holding a checkout (used as it is)."""
    path = Path(spec)
    if path.is_dir() and (path / "sylvie" / "__init__.py").exists():
        path = path.resolve()
        head = git("rev-parse", "--short", "HEAD", cwd=path)
        dirty = git("--no-optional-locks", "status", "--porcelain", "--untracked-files=no", cwd=path)
        name = f"working tree {path} at {head}{'+dirty' if dirty else ''}"
        return Version(label, name, path, version_env(path))
    sha = git("rev-parse", "--verify", "--short", f"{spec}^{{commit}}")
    checkout = add(sha)
    return Version(label, f"{sha} ({spec})" if spec != sha else sha, checkout, version_env(checkout))


def check_imports(v: Version, work: Path) -> None:
    """``sylvie.__file__`` in a process of this version and in a rank under its ``sylvie launch``: both must be in
    the version's checkout."""
    probe = "import sylvie; print('SYLVIE_FILE', sylvie.__file__)"
    want = (v.checkout / "sylvie" / "__init__.py").resolve()
    with environ(v.env):
        direct = run([sys.executable, "-c", probe]).output
        ranked = run([sys.executable, "-m", "sylvie", "launch", "--ranks", 1, "--", sys.executable, "-c", probe],
                     log=work / f"probe-{v.label}.log", timeout_s=300).output
    for where, output in (("directly", direct), ("under sylvie launch", ranked)):
        found = [line.split("SYLVIE_FILE", 1)[1].strip() for line in output.splitlines() if "SYLVIE_FILE" in line]
        if not found or any(Path(f).resolve() != want for f in found):
            raise SystemExit(f"{v.label}: `import sylvie` {where} resolved to {found or 'nothing'}, not {want}")
        print(f"{v.label}: sylvie {where} from {found[0]}", file=sys.stderr, flush=True)


def epoch_times(out: Path) -> list[float]:
    """Rank 0's ``epoch_time`` of every epoch in ``out/metrics.jsonl``, in epoch order (read as plain JSON, so that
    either version's format is read the same way)."""
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [float(r["epoch_time"]) for r in sorted(lines, key=lambda r: r["epoch"])]


def graph_text(graph: Path, part: Path, what: str) -> str:
    meta = json.loads((graph / "meta.json").read_text())
    manifest = json.loads((part / "manifest.json").read_text())
    nodes = meta.get("num_nodes", manifest.get("num_nodes"))
    edges = meta.get("num_edges", manifest.get("num_edges"))
    parts = manifest["num_parts"]
    return (f"{what}: {nodes:,} nodes, {edges:,} directed edges, "
            f"{parts} {manifest.get('method', '').upper()} part{'s' if parts > 1 else ''}".replace("  ", " "))


def sampled_measurement(args, work: Path) -> Measurement:
    graph, part = synthetic_partition(work / "sampled", parts=1, nodes=args.sampled_nodes, preset="products",
                                      part_name="metis-p1")
    flags = ["--mode", "sampled", "--arch", "sage", "--layers", 3, "--hidden", 256, "--dropout", 0.5,
             "--no-self-loop", "--lr", 0.003, "--weight-decay", 0, "--seed", 0, "--epochs", args.sampled_epochs,
             "--eval-every", args.sampled_epochs, "--checkpoint-every", 0, "--log-every", 1, "--no-progress",
             "--fanouts", *PRODUCTS_FANOUTS, "--batch-size", 1024, "--prefetch", 1, "--alpha", 0]

    def command(v: Version, out: Path) -> list:
        return [sys.executable, "-m", "sylvie", "train", "--partition", part, "--out", out, *flags]

    title = (f"sampled epoch, 1 rank: GraphSAGE 3 x 256, fanouts (15, 10, 5), batch 1024, prefetch 1, "
             f"{args.threads} threads")
    return Measurement("sampled", title, graph_text(graph, part, "products-like"), args.skip_sampled, command)


def full_measurements(args, work: Path) -> list[Measurement]:
    graph, part = synthetic_partition(work / "full", parts=4, method="metis", nodes=args.full_nodes, avg_degree=20.0,
                                      features=64, classes=16, train_fraction=0.3, val_fraction=0.1)
    text = graph_text(graph, part, "synthetic (convergence.py's)")
    out = []
    for arch, name in [("sage", "GraphSAGE")] + ([] if args.no_gcn else [("gcn", "GCN")]):
        flags = ["--arch", arch, "--layers", 3, "--hidden", 64, "--dropout", 0.5, "--lr", 0.01, "--weight-decay",
                 5e-4, "--seed", 0, "--bits", 32, "--no-pipeline", "--epochs", args.full_epochs, "--eval-every",
                 args.full_epochs, "--checkpoint-every", 0, "--log-every", 1, "--no-progress"]

        def command(v: Version, out_dir: Path, flags=flags) -> list:
            return [sys.executable, "-m", "sylvie", "launch", "--ranks", 4, "--", sys.executable, "-m", "sylvie",
                    "train", "--partition", part, "--out", out_dir, *flags]

        out.append(Measurement(f"full-{arch}", f"full-graph epoch, 4 ranks (loopback): {name} 3 x 64, fp32 "
                                               "synchronous", text, args.skip_full, command))
    return out


def typed_measurements(args, work: Path) -> list[Measurement]:
    """R-GCN on the mag preset (four node types, three learnt as embeddings): full-graph on 2 ranks, and sampled on
    one."""
    model = ["--arch", "rgcn", "--layers", 2, "--hidden", 64, "--dropout", 0.5, "--lr", 0.01, "--weight-decay", 0,
             "--seed", 0, "--checkpoint-every", 0, "--log-every", 1, "--no-progress"]
    out = []
    if args.only in (None, "typed", "full"):
        graph, part = synthetic_partition(work / "typed", parts=2, method="metis", nodes=args.typed_nodes,
                                          preset="mag")
        flags = [*model, "--bits", 32, "--no-pipeline", "--epochs", args.full_epochs, "--eval-every",
                 args.full_epochs]

        def full(v: Version, out_dir: Path, flags=flags, part=part) -> list:
            return [sys.executable, "-m", "sylvie", "launch", "--ranks", 2, "--", sys.executable, "-m", "sylvie",
                    "train", "--partition", part, "--out", out_dir, *flags]

        out.append(Measurement("typed-full", "full-graph epoch, 2 ranks (loopback): R-GCN 2 x 64, fp32 synchronous",
                               graph_text(graph, part, "mag-like (4 node types, 8 relations)"), args.skip_full, full))
    if args.only in (None, "typed", "sampled"):
        graph, part = synthetic_partition(work / "typed", parts=1, nodes=args.typed_nodes, preset="mag",
                                          part_name="metis-p1")
        flags = [*model, "--mode", "sampled", "--epochs", args.sampled_epochs, "--eval-every", args.sampled_epochs,
                 "--fanouts", 10, 10, "--batch-size", 1024, "--prefetch", 1, "--alpha", 0]

        def sampled(v: Version, out_dir: Path, flags=flags, part=part) -> list:
            return [sys.executable, "-m", "sylvie", "train", "--partition", part, "--out", out_dir, *flags]

        out.append(Measurement("typed-sampled", f"sampled epoch, 1 rank: R-GCN 2 x 64, fanouts (10, 10), batch 1024, "
                                                f"prefetch 1, {args.threads} threads",
                               graph_text(graph, part, "mag-like (4 node types, 8 relations)"), args.skip_sampled,
                               sampled))
    return out


def measure(m: Measurement, versions: dict, repeats: int, runs: Path, threads: int) -> None:
    """``repeats`` runs of each version, alternating: before, after, after, before, before, after, ..."""
    thread_env = {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
    for i in range(repeats):
        for label in ("before", "after") if i % 2 == 0 else ("after", "before"):
            v = versions[label]
            out = runs / m.key / f"{i}-{label}"
            out.parent.mkdir(parents=True, exist_ok=True)
            env = {**v.env, **(thread_env if m.key.endswith("sampled") else {})}
            with environ(env):
                ran = run(m.commands(v, out), log=out.parent / f"{i}-{label}.log", timeout_s=3600)
            times = epoch_times(out)
            steady = times[m.skip:] or times[-1:]
            m.times[label].append(steady)
            m.peak_kib[label].append(ran.max_rss_kib)
            print(f"{m.key} {label} run {i + 1}/{repeats}: {statistics.median(steady):.3f} s/epoch (epochs "
                  f"{', '.join(f'{t:.3f}' for t in times)}), {ran.seconds:.0f} s in all", file=sys.stderr, flush=True)


def cell(runs: list[list[float]]) -> tuple[float, str]:
    pooled = statistics.median(t for r in runs for t in r)
    medians = [statistics.median(r) for r in runs]
    spread = f" ({min(medians):.3f}-{max(medians):.3f})" if len(runs) > 1 else ""
    return pooled, f"{pooled:.3f}{spread}"


def table(measurements: list[Measurement], versions: dict, args) -> str:
    counts = sorted({(m.key.endswith("sampled"), len(m.times["before"])) for m in measurements}, reverse=True)
    runs = " and ".join(f"{n} ({'sampled' if sampled else 'full-graph'})" for sampled, n in counts)
    steady = []
    if any(m.key.endswith("sampled") for m in measurements):
        steady.append(f"sampled: epochs {args.skip_sampled + 1}-{args.sampled_epochs} of each run")
    if any(not m.key.endswith("sampled") for m in measurements):
        steady.append(f"full-graph: epochs {args.skip_full + 1}-{args.full_epochs} of each run, rank 0's")
    lines = [f"Before: {versions['before'].name}. After: {versions['after'].name}. Runs of each version per "
             f"measurement: {runs}, alternating (before, after, after, before, ...); each figure the median of the "
             f"steady epochs of all the version's runs ({'; '.join(steady)}), in brackets the lowest and highest "
             f"run's median; after / before below 1 means the after version is faster. 1-minute load average "
             f"when the benchmark started (other work on the machine's {os.cpu_count()} cores): "
             f"{args.load_start:.2f}. Whole run: {time.perf_counter() - args.t0:.0f} s.",
             "Peak memory: the largest process's peak RSS (a rank's: the kernel's ru_maxrss of the run's process "
             "tree), the highest over the version's runs.",
             "", "| measurement | graph | before s/epoch | after s/epoch | after / before | before peak MB | "
                 "after peak MB |",
             "| --- | --- | --- | --- | --- | ---: | ---: |"]
    for m in measurements:
        before, before_text = cell(m.times["before"])
        after, after_text = cell(m.times["after"])
        peaks = [max(m.peak_kib[label]) / 1024 for label in ("before", "after")]
        lines.append(f"| {m.title} | {m.graph} | {before_text} | {after_text} | {after / before:.2f}x | "
                     f"{peaks[0]:,.0f} | {peaks[1]:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    try:
        measure_and_publish()
    except KeyboardInterrupt as e:  # the worktrees are gone, the runs stopped (common.run)
        sys.exit(f"before_after.py: interrupted ({e or 'Ctrl-C'}); the worktrees it made are removed")


def measure_and_publish() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the revision before the change (checked out in a worktree)")
    ap.add_argument("--after", default=str(REPO),
                    help="a directory holding a checkout (used as it is), or a revision (default: this working tree)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each version per measurement")
    ap.add_argument("--full-repeats", type=int, default=None, help="runs per version of the full-graph measurements "
                                                                    "(default: --repeats + 1: they are short)")
    ap.add_argument("--sampled-nodes", type=int, default=244_903, help="products-like graph's nodes (sampled.py's)")
    ap.add_argument("--sampled-epochs", type=int, default=4, help="epochs of each sampled run")
    ap.add_argument("--skip-sampled", type=int, default=1, help="first epochs of a sampled run left out")
    ap.add_argument("--full-nodes", type=int, default=50_000, help="convergence graph's nodes (convergence.py's)")
    ap.add_argument("--full-epochs", type=int, default=20, help="epochs of each full-graph run")
    ap.add_argument("--skip-full", type=int, default=2, help="first epochs of a full-graph run left out")
    ap.add_argument("--no-gcn", action="store_true", help="full-graph GraphSAGE only")
    ap.add_argument("--typed-nodes", type=int, default=48_494, help="mag-like graph's nodes (config/mag-tenth.yaml's)")
    ap.add_argument("--no-typed", action="store_true", help="without the typed graph's measurements")
    ap.add_argument("--only", choices=["sampled", "full", "typed"],
                    help="the sampled ones, the full-graph ones, or the typed graph's")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="the sampled run's torch/numba threads")
    ap.add_argument("--work", default="results/bench-before-after", help="graphs, partitions and runs go here")
    add_record_option(ap, "before-after")
    args = ap.parse_args()
    if args.sampled_epochs <= args.skip_sampled or args.full_epochs <= args.skip_full:
        ap.error("every run needs more epochs than it skips")
    args.full_repeats = args.full_repeats or args.repeats + 1

    args.t0, args.load_start = time.perf_counter(), os.getloadavg()[0]
    if args.load_start > 0.5:
        print(f"warning: the 1-minute load average is {args.load_start:.2f}: other work is running on this "
              f"machine's {os.cpu_count()} cores, and it moves epochs of the same code by tens of percent",
              file=sys.stderr, flush=True)
    work = Path(args.work).resolve()
    runs = work / "runs" / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    with worktrees() as add:
        versions = {"before": resolve(args.before, "before", add), "after": resolve(args.after, "after", add)}
        for v in versions.values():
            check_imports(v, runs)
        measurements = []
        with environ(versions["before"].env):  # the graphs and partitions: made once, by the before version
            if args.only in (None, "sampled"):
                measurements.append(sampled_measurement(args, work))
            if args.only in (None, "full"):
                measurements += full_measurements(args, work)
            if not args.no_typed:
                measurements += typed_measurements(args, work)
        for m in measurements:
            measure(m, versions, args.repeats if m.key.endswith("sampled") else args.full_repeats, runs, args.threads)
    publish(table(measurements, versions, args), args.record and "before-after", intro=INTRO)


if __name__ == "__main__":
    main()
