"""Does a balanced partition make full-graph training faster? The same graph cut into the same number of parts two
ways, each trained on the emulated cluster (as root) with the same model, link rate and epochs: the edges each part
stores, and every rank's compute and wait time per epoch, before and after.

    sudo .venv/bin/python benchmarks/partition_pace.py        # synthetic 100K nodes, degree 16, 4 parts, 1gbit
    sudo .venv/bin/python benchmarks/partition_pace.py --record
    sudo .venv/bin/python benchmarks/partition_pace.py --cpu-share 0   # the ranks share the cores freely

- before: the pymetis call sylvie made before (``old`` of benchmarks/partition_balance.py): the three balance
  constraints per node (1, is-train, in-degree) flattened into ``vweights``, which pymetis hands METIS as one weight
  per vertex: balanced on nothing in particular, so one part can store far more edges than another.
- after: ``sylvie.partition.metis.metis_assign``, METIS's multi-constraint k-way on the same three constraints, each
  within its default tolerance (1.03) of the mean: what ``sylvie partition`` does.

Both assignments are written as partitions by ``write_shards``, as ``sylvie partition`` writes them, and trained
with ``sylvie bench cluster`` (one network namespace per part joined by a bridge, every link limited with tc tbf,
one torchrun node per namespace; it removes every namespace and link afterwards). The runs alternate (before, after,
before, after, ...) so that a drift of the machine hits both alike; every repeat has its own row.

Per run, over the epochs after the warm-up (epoch 0, whose halo exchange also sends the layer-0 features, and the
next ones): the median epoch time (rank 0's), every rank's mean compute time (rank k trains part k: its edges over
the mean part's are in the table beside it), the slowest rank (largest mean compute) and its compute over the mean
rank's, and every rank's mean wait on its peers (halo exchange and gradient all-reduce). In a synchronous epoch
every rank waits for the slowest one, so the slowest rank's compute sets the pace.

Cores: on a machine with fewer cores than ranks, ranks that share the cores freely hand the time they spend waiting
to the ranks still computing, so a part with more edges gets more CPU and the imbalance hides (a real cluster has
no such exchange). By default every emulated node is therefore held to an equal share of the machine's cores (cores
/ parts, a CPU cgroup per network namespace with a CFS quota, removed afterwards), like machines of equal speed;
``--cpu-share 0`` turns that off, ``--cpu-share X`` gives every node X cores.

The graph and both partitions are made once in ``--work`` and reused (a graph there made with other parameters is
refused); the runs go to ``--work``/runs. A full run with the defaults takes about 3.5 minutes on 2 cores.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
from common import BIN, add_record_option, run, synthetic_graph
from common import publish as publish_table
from partition_balance import old

PARTITIONS = ("before", "after")
METHOD = {"before": "pymetis-flattened-weights", "after": "metis"}  # the manifest's method
LABEL = {"before": "before (pymetis, flattened weights)", "after": "after (metis_assign)"}
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")  # the cpu controller's hierarchy (cgroup v1)
CGROUP_V2 = Path("/sys/fs/cgroup")  # the unified hierarchy (cgroup v2)
PERIOD_US = 100_000


def width(bits: int) -> str:
    """An exchange width as the tables name it."""
    return "fp32" if bits == 32 else f"{bits}-bit"


def make_partitions(graph_dir: Path, work: Path, parts: int, seed: int) -> dict[str, Path]:
    """WORK/before-pPARTS-sSEED and WORK/after-pPARTS-sSEED, each written once (one there of another graph is
    refused)."""
    from sylvie.data.graph import load_graph
    from sylvie.partition.metis import metis_assign, metis_input
    from sylvie.partition.shard_writer import write_shards

    out = {name: work / f"{name}-p{parts}-s{seed}" for name in PARTITIONS}
    fingerprint = json.loads((graph_dir / "meta.json").read_text())["fingerprint"]
    todo = []
    for name, path in out.items():
        manifest = path / "manifest.json"
        if not manifest.exists():
            todo.append(name)
            continue
        m = json.loads(manifest.read_text())
        if (m.get("dataset_fingerprint"), m.get("num_parts"), m.get("method"), m.get("seed")) != (
                fingerprint, parts, METHOD[name], seed):
            raise SystemExit(f"{path} holds a partition of another graph than {graph_dir} (or not in {parts} parts "
                             f"by {METHOD[name]} with seed {seed}): remove it, or give another work directory")
    if todo:
        graph = load_graph(graph_dir)
        metis = metis_input(graph)
        for name in todo:
            t0 = time.perf_counter()
            assign = old(metis, parts, seed) if name == "before" else metis_assign(metis, parts, seed)
            empty = sorted(set(range(parts)) - set(np.unique(assign).tolist()))
            if empty:
                raise SystemExit(f"the {name} partitioner left part(s) {empty} empty; use fewer parts")
            write_shards(graph, assign, out[name], METHOD[name], seed, graph.info["fingerprint"], progress=False)
            print(f"partition {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


class NodeCpuShares:
    """While a ``sylvie bench cluster`` runs: every process of it in a network namespace of its own (an emulated
    node) goes into that namespace's CPU cgroup, whose CFS quota is ``cores`` cores; the cgroups go afterwards.
    :meth:`sample` is called with the cluster command's pid every few tenths of a second (``common.run``'s
    ``sample``): the torchrun agent is caught before it starts its worker, which inherits the cgroup."""

    def __init__(self, cores: float, name: str, nodes: int):
        self.quota_us = max(1000, int(cores * PERIOD_US))
        v2_enabled = CGROUP_V2 / "cgroup.subtree_control"  # the controllers the top's child cgroups get
        if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
            self.root, self.v2 = CGROUP_V1 / name, False
        elif v2_enabled.exists() and "cpu" in v2_enabled.read_text().split():
            self.root, self.v2 = CGROUP_V2 / name, True
        else:
            raise SystemExit("no CPU cgroup controller here (neither /sys/fs/cgroup/cpu nor cgroup v2 with cpu "
                             "enabled under /sys/fs/cgroup): give --cpu-share 0 to let the ranks share the cores "
                             "freely")
        self.nodes = nodes
        self.groups: dict[int, Path] = {}  # network namespace inode -> its cgroup
        self.placed: dict[int, set[int]] = {}  # namespace inode -> pids moved into its cgroup
        self.workers: set[int] = set()  # namespace inodes where a `sylvie train` process was placed
        self.host_netns = os.stat("/proc/self/ns/net").st_ino

    def __enter__(self):
        self.root.mkdir()
        if self.v2:
            (self.root / "cgroup.subtree_control").write_text("+cpu")
        return self

    def sample(self, pid: int) -> float:
        if len(self.workers) == self.nodes:  # every node's worker is placed; its threads stay with it
            return 0.0
        for p in _descendants(pid):
            try:
                ns = os.stat(f"/proc/{p}/ns/net").st_ino
            except OSError:
                continue
            if ns == self.host_netns or p in self.placed.get(ns, ()):
                continue
            group = self.groups.get(ns)
            if group is None:
                group = self.groups[ns] = self.root / f"node{len(self.groups)}"
                group.mkdir()
                if self.v2:
                    (group / "cpu.max").write_text(f"{self.quota_us} {PERIOD_US}")
                else:
                    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                    (group / "cpu.cfs_quota_us").write_text(str(self.quota_us))
            try:
                (group / "cgroup.procs").write_text(str(p))
                cmdline = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            except OSError:  # it ended meanwhile
                continue
            self.placed.setdefault(ns, set()).add(p)
            if cmdline[1:4] == [b"-m", b"sylvie", b"train"]:  # the worker itself, not its torchrun agent
                self.workers.add(ns)
        return 0.0

    def __exit__(self, *exc):
        top = self.root.parent / "cgroup.procs"
        for group in [*self.groups.values(), self.root]:
            for _ in range(50):
                try:
                    left = (group / "cgroup.procs").read_text().split()
                except OSError:
                    break
                for p in left:  # nothing of the run should be left; should something be, it goes back to the top
                    try:
                        top.write_text(p)
                    except OSError:
                        pass
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _interrupted(*_) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one would cut the clean-up short
    raise KeyboardInterrupt("terminated")


def measure_run(records, warmup: int) -> dict:
    """Over the epochs after the first ``warmup``: median epoch time, every rank's mean compute and wait, the
    slowest rank (largest mean compute) and its compute over the mean rank's."""
    steady = records[warmup:]
    if not steady:
        raise SystemExit(f"the run has {len(records)} epochs, none after the {warmup} of warm-up: give more --epochs")
    if any(r.rank_compute_time is None or r.rank_wait_time is None for r in steady):
        raise SystemExit("metrics.jsonl has no rank_compute_time / rank_wait_time: this sylvie does not record them")
    compute = np.mean([r.rank_compute_time for r in steady], axis=0)
    wait = np.mean([r.rank_wait_time for r in steady], axis=0)
    slowest = int(np.argmax(compute))
    return {"epoch": statistics.median(r.epoch_time for r in steady), "compute": compute, "wait": wait,
            "slowest": slowest, "over_mean": float(compute[slowest] / compute.mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph-nodes", type=int, default=100_000, help="synthetic graph's nodes (default: 100000)")
    ap.add_argument("--avg-degree", type=float, default=16.0, help="its average degree (default: 16)")
    ap.add_argument("--homophily", type=float, default=0.5, help="share of edges inside a block (default: 0.5)")
    ap.add_argument("--features", type=int, default=100, help="feature dimension (default: 100)")
    ap.add_argument("--classes", type=int, default=16, help="classes = blocks (default: 16)")
    ap.add_argument("--parts", type=int, default=4, help="parts = ranks = emulated machines (default: 4)")
    ap.add_argument("--seed", type=int, default=0, help="partitioner seed, both partitioners (default: 0)")
    ap.add_argument("--rate", default="1gbit", help="every node's link, a tc rate (default: 1gbit)")
    ap.add_argument("--cpu-share", type=float, default=None,
                    help="cores every emulated node may use (a CPU cgroup quota per node); 0: no limit, the ranks "
                         "share the cores freely (default: cores / parts)")
    ap.add_argument("--arch", default="gcn", choices=("gcn", "sage", "gat"), help="model (default: gcn)")
    ap.add_argument("--layers", type=int, default=2, help="model layers (default: 2)")
    ap.add_argument("--hidden", type=int, default=128, help="hidden units (default: 128)")
    ap.add_argument("--bits", type=int, nargs="+", default=[32, 1], choices=(1, 2, 4, 8, 32),
                    help="halo exchange widths, each synchronous, each its own runs (default: 32 1: fp32, where "
                         "the exchange takes most of the epoch, and 1 bit, where compute does)")
    ap.add_argument("--epochs", type=int, default=15, help="epochs per run (default: 15)")
    ap.add_argument("--warmup", type=int, default=3, help="first epochs left out of every measure (default: 3: "
                                                          "epoch 0 and the next two)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each partition, alternating (default: 2)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one cluster run may take (default: 1800)")
    ap.add_argument("--work", default="results/bench-partition-pace", help="graph, partitions and runs go here")
    add_record_option(ap, "partition-pace")
    ap.add_argument("--topic", default="partition-pace", help="the record's topic (default: partition-pace)")
    args = ap.parse_args()
    if args.epochs <= args.warmup:
        ap.error(f"--epochs {args.epochs} leaves nothing after --warmup {args.warmup}")
    cores = os.cpu_count() or 1
    share = cores / args.parts if args.cpu_share is None else args.cpu_share
    if share < 0:
        ap.error("--cpu-share must be >= 0")
    if os.geteuid() != 0:
        raise SystemExit("the emulated cluster makes network namespaces (and CPU cgroups): run this as root (sudo)")
    signal.signal(signal.SIGTERM, _interrupted)  # kill unwinds like Ctrl-C: the cluster run stops, the cgroups go
    from sylvie.formats.epoch_record import read_metrics
    from sylvie.partition.quality import predicted_cost, quality

    t_start = time.perf_counter()
    load = os.getloadavg()[0]
    work = Path(args.work)
    graph_dir = synthetic_graph(work / "graph", nodes=args.graph_nodes, avg_degree=args.avg_degree,
                                homophily=args.homophily, features=args.features, classes=args.classes)
    parts = make_partitions(graph_dir, work, args.parts, args.seed)
    manifests = {name: json.loads((p / "manifest.json").read_text()) for name, p in parts.items()}
    stats = {name: quality(m) for name, m in manifests.items()}
    part_edges = {name: np.array([p["edges"] for p in m["parts"]], dtype=float) for name, m in manifests.items()}
    exchange = {name: float(predicted_cost(m)["exchange"].max()) for name, m in manifests.items()}
    params = json.loads((graph_dir / "meta.json").read_text()).get("params", {})

    model = ["--arch", args.arch, "--layers", str(args.layers), "--hidden", str(args.hidden), "--epochs",
             str(args.epochs), "--checkpoint-every", "0", "--log-every", "5", "--eval-every", str(args.epochs)]
    rows = []
    for bits in args.bits:
        for rep in range(1, args.repeats + 1):
            for name in PARTITIONS:
                run_name = f"{name}-{bits}bit-{rep}"
                out = work / "runs" / run_name
                if out.exists():
                    shutil.rmtree(out)
                cmd = [BIN / "sylvie", "bench", "cluster", "--partition", parts[name], "--out", out, "--nodes",
                       args.parts, "--rate", args.rate, "--timeout", args.timeout, "--", *model, "--bits", bits]
                log = work / "runs" / f"{run_name}.log"
                t0 = time.perf_counter()
                if share > 0:
                    with NodeCpuShares(share, f"sylvie-pace-{os.getpid()}-{run_name}", args.parts) as shares:
                        run(cmd, log=log, timeout_s=args.timeout + 120, sample=shares.sample, sample_every_s=0.1)
                    if len(shares.workers) != args.parts:
                        raise SystemExit(f"{run_name}: the CPU share was put on {len(shares.workers)} of the "
                                         f"{args.parts} nodes' `sylvie train` only (see {log}); give --cpu-share 0 "
                                         "to run without it")
                else:
                    run(cmd, log=log, timeout_s=args.timeout + 120)
                r = {"name": name, "bits": bits, "rep": rep, **measure_run(read_metrics(out), args.warmup)}
                rows.append(r)
                print(f"{width(bits)}, {name}, run {rep}: {r['epoch']:.3f} s/epoch, slowest rank {r['slowest']} "
                      f"computes {r['compute'][r['slowest']]:.3f} s ({r['over_mean']:.2f}x mean), ranks wait "
                      f"{r['wait'].min():.3f}-{r['wait'].max():.3f} s ({time.perf_counter() - t0:.0f} s wall)",
                      file=sys.stderr, flush=True)

    m0 = manifests["after"]
    cpus = (f"every node held to {share:g} of the machine's {cores} cores (a CPU cgroup quota)" if share > 0 else
            f"the ranks sharing the machine's {cores} cores freely")
    caption = (f"Synthetic graph: {m0['num_nodes']:,} nodes, {m0['num_edges']:,} directed edges (average degree "
               f"{args.avg_degree:g}), homophily {args.homophily:g}, {args.features} features, {args.classes} "
               f"classes, {m0['num_train']:,} training nodes ({params.get('train_fraction', '?')} train, "
               f"{params.get('val_fraction', '?')} validation, feature noise {params.get('feature_noise', '?')}, "
               f"label noise {params.get('label_noise', '?')}, generator seed {params.get('seed', '?')}); "
               f"{args.parts} parts, partitioner seed {args.seed}. max/mean: the largest part over the mean part; "
               "edges: the in-edges a part stores (its aggregation's work); cut: the share of edges whose source "
               "lies in another part; halo rows: the rows a part receives and sends in each layer's exchange.")
    lines = [caption, "",
             "| partition | nodes max/mean | train max/mean | edges max/mean | edge cut | part edges / mean "
             "(0/1/2/...) | halo rows in+out max/mean |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in PARTITIONS:
        q, e = stats[name], part_edges[name]
        lines.append(f"| {LABEL[name]} | {q['imbalance_nodes']:.2f} | {q['imbalance_train']:.2f} | "
                     f"{q['imbalance_edges']:.2f} | {q['edge_cut_fraction']:.1%} | "
                     + " / ".join(f"{x:.2f}" for x in e / e.mean()) + f" | {exchange[name]:.2f} |")
    lines += ["", f"{args.parts} emulated nodes at {args.rate}, {cpus}; {args.arch.upper()} {args.layers} layers x "
              f"{args.hidden}, synchronous exchange, {args.epochs} epochs per run, measured over epochs "
              f"{args.warmup + 1}-{args.epochs} (the first {args.warmup} are warm-up); runs alternate before/after, "
              f"{args.repeats} of each per exchange width. Rank k trains part k; its compute and its wait (on the "
              "halo exchange and the all-reduce) are means over the measured epochs; the slowest rank computes "
              "longest.", "",
              "| exchange | partition | run | s/epoch (median) | rank compute s (0/1/2/...) | slowest rank: compute s "
              "(x mean) | rank wait s (0/1/2/...) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {width(r['bits'])} | {r['name']} | {r['rep']} | {r['epoch']:.3f} | "
                     + " / ".join(f"{c:.3f}" for c in r["compute"]) + " | "
                     f"rank {r['slowest']}: {r['compute'][r['slowest']]:.3f} ({r['over_mean']:.2f}x) | "
                     + " / ".join(f"{w:.3f}" for w in r["wait"]) + " |")

    def mean(bits, name, value):
        return statistics.mean(value(r) for r in rows if r["name"] == name and r["bits"] == bits)

    headline = [f"Same graph, same links, same model; the mean of the {args.repeats} "
                f"run{'s' if args.repeats > 1 else ''} of each:"]
    for bits in args.bits:
        pace = {n: mean(bits, n, lambda r: r["compute"][r["slowest"]]) for n in PARTITIONS}
        epoch = {n: mean(bits, n, lambda r: r["epoch"]) for n in PARTITIONS}
        wait = {n: (mean(bits, n, lambda r: r["wait"].min()), mean(bits, n, lambda r: r["wait"].max()))
                for n in PARTITIONS}
        headline.append(
            f"**{width(bits)} exchange: the slowest rank computes {pace['before']:.3f} s before, {pace['after']:.3f} "
            f"s after ({pace['before'] / pace['after']:.2f}x); an epoch takes {epoch['before']:.3f} s before, "
            f"{epoch['after']:.3f} s after ({epoch['before'] / epoch['after']:.2f}x).** The ranks wait "
            f"{wait['before'][0]:.3f}-{wait['before'][1]:.3f} s per epoch before, {wait['after'][0]:.3f}-"
            f"{wait['after'][1]:.3f} s after (least to most waiting rank).")
    headline.append(f"1-minute load average when the benchmark started: {load:.2f}. Whole run: "
                    f"{time.perf_counter() - t_start:.0f} s.")
    if load > 0.5:
        print(f"warning: the machine was busy when the benchmark started (1-minute load average {load:.2f}): other "
              "work shares the cores with the ranks and blurs the times", file=sys.stderr)
    table = "\n".join(lines) + "\n\n" + " ".join(headline)
    intro = ("The same graph cut two ways, each trained on the emulated cluster with the same model and links: "
             "the pymetis call sylvie made before (three balance constraints flattened into one list: "
             "balanced on nothing in particular) and `metis_assign` (every constraint within 1.03 of its "
             "mean). In a synchronous epoch every rank waits for the one that computes longest; a rank's "
             "compute grows with the edges its part stores and with its rows (its own and its halo's).")
    publish_table(table, args.record and args.topic, intro=textwrap.fill(intro, 118, break_on_hyphens=False))


if __name__ == "__main__":
    main()
