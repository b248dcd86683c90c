"""Every stage of the pipeline on a synthetic graph shaped like ogbn-products, at 1/4, 1/2 and full scale: wall
time and peak memory, and how they grow from 1/4 to full scale (linear would be 4x).

    python benchmarks/scale.py                          # 1/4, 1/2 and 1 x 2,449,029 nodes (~15 minutes on 2 cores)
    python benchmarks/scale.py --scales 0.25 --record

The graph: the products preset (``preset: products``: ogbn-products' shape, its statistics beside the published ones
in ``products_like.py``'s table; 2,449,029 nodes and 123.7M directed edges at full scale, 100 features, 47 classes,
8% of the nodes training by score; nested communities, log-normal degrees), with ``--nodes`` for the smaller
scales. Stages, each a fresh command as the pipeline runs it: ``sylvie download synthetic`` (generate),
``sylvie partition`` (4 METIS parts), ``sylvie vip`` (fanouts 15, 10, 5; batch 1024), one epoch of full-graph
training and one of sampled training (VIP cache, alpha 0.2) on 4 ranks (``sylvie launch``; GraphSAGE 3 x 64, the
size that trains products full-graph on this 2-core, 24 GB machine), partition-parallel evaluation of the
full-graph model (4 ranks), and whole-graph evaluation of it in one process (the reference path). Peak memory is
the largest sum of the proportional set sizes of a stage's processes (its process tree, sampled every 0.2 s:
memory-mapped shards and libraries the ranks share count once; for one process, its own peak RSS from the kernel if
larger). With ``--dgl``, the smallest scale's graph is also partitioned by ``dgl.distributed.partition_graph``
(METIS, 4 parts, 1-hop halo), as ``benchmarks/partitioners.py`` runs it, beside ``sylvie partition`` on the same
graph (the smallest: DGL's tool needs 6.5 GB at 1/4 scale, growing linearly, so it cannot partition the full graph on
a 24 GB machine).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import psutil
from common import BIN, add_record_option, publish, run
from partitioners import DGL_CHILD, disk_mb, last_json

PRODUCTS_NODES = 2_449_029
STAGE_TIMEOUT_S = 2 * 3600  # a bound per stage: at full scale the longest takes about 2 minutes on 2 cores
SAGE = ["--arch", "sage", "--layers", "3", "--hidden", "64", "--no-self-loop", "--epochs", "1", "--checkpoint-every",
        "0", "--no-progress"]
SAMPLING = ["--fanouts", "15", "10", "5", "--batch-size", "1024"]


def measured(cmd: list, log: Path) -> tuple[float, float]:
    """(seconds, peak GB) of one command: the largest summed PSS of its process tree, sampled every 0.2 s, or the
    command's own peak RSS from the kernel if larger (a one-process stage). Its output goes to ``log``."""
    ran = run(cmd, log=log, timeout_s=STAGE_TIMEOUT_S, sample=_tree_pss, sample_every_s=0.2)
    return ran.seconds, max(ran.peak_sample, ran.max_rss_kib * 1024) / 1e9


def _tree_pss(pid: int) -> int:
    """The summed PSS of process ``pid`` and its descendants (raises psutil.Error if one ends meanwhile)."""
    root = psutil.Process(pid)
    return sum(_pss(p) for p in [root] + root.children(recursive=True))


def _pss(p: psutil.Process) -> int:
    """A process's proportional set size: pages shared with others (the shards and topology every rank maps,
    the libraries) count once over all of them, not once per process as in the summed RSS."""
    try:
        return p.memory_full_info().pss
    except (psutil.AccessDenied, AttributeError):  # no smaps_rollup: its RSS
        return p.memory_info().rss


def launch(ranks: int, *cmd) -> list:
    return [BIN / "sylvie", "launch", "--ranks", ranks, "--threads", os.cpu_count(), "--", BIN / "sylvie", *cmd]


def stages(work: Path, nodes: int) -> dict:
    graph, part, vip = work / "graph", work / "metis-p4", work / "vip"
    full, sampled = work / "runs" / "full", work / "runs" / "sampled"
    return {
        "generate": [BIN / "sylvie", "download", "synthetic", "--out", graph, "--preset", "products", "--nodes", nodes],
        "partition (4 parts)": [BIN / "sylvie", "partition", graph, "--out", part, "--parts", "4"],
        "vip": [BIN / "sylvie", "vip", part, "--out", vip, *SAMPLING, "--no-progress"],
        "train full-graph, 1 epoch": launch(4, "train", "--partition", part, "--out", full, *SAGE),
        "train sampled, 1 epoch": launch(4, "train", "--partition", part, "--out", sampled, "--mode", "sampled",
                                         *SAMPLING, "--vip", vip, "--alpha", "0.2", *SAGE),
        "evaluate, partition-parallel": launch(4, "evaluate", "--partition", part, "--model", full / "model.pt",
                                               "--out", work / "eval.json"),
        # the reference path, for the node count above which the pipeline evaluates partition-parallel
        "evaluate, whole graph": [BIN / "sylvie", "evaluate", "--dataset", graph, "--model", full / "model.pt",
                                  "--out", work / "eval-whole.json"],
    }


def dgl_side_by_side(work: Path) -> list[tuple]:
    graph, ours, theirs = work / "graph", work / "metis-p4-again", work / "dgl-p4"
    secs, rss = measured([BIN / "sylvie", "partition", graph, "--out", ours, "--parts", "4"], work / "ours.log")
    manifest = json.loads((ours / "manifest.json").read_text())
    rows = [("sylvie partition", secs, rss, manifest["edge_cut"] / manifest["num_edges"], disk_mb(ours))]
    log = work / "dgl.log"
    secs, rss = measured([sys.executable, "-c", DGL_CHILD, graph, theirs, 4], log)
    cut = last_json(log.read_text())["cut"]
    rows.append(("dgl.distributed.partition_graph", secs, rss, cut, disk_mb(theirs)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=float, nargs="+", default=[0.25, 0.5, 1.0], help="fractions of products' nodes")
    ap.add_argument("--work", default="results/bench-scale", help="graphs, partitions, runs and logs go here")
    ap.add_argument("--dgl", action="store_true", help="also DGL's partitioner on the smallest scale's graph")
    add_record_option(ap, "scale")
    args = ap.parse_args()
    results = {}
    for scale in args.scales:
        work = Path(args.work) / f"x{scale:g}"
        (work / "logs").mkdir(parents=True, exist_ok=True)
        nodes = int(round(PRODUCTS_NODES * scale))
        results[scale] = {}
        for name, cmd in stages(work, nodes).items():
            log = work / "logs" / (name.split()[0] + ("-" + name.split()[1] if name.startswith("train") else "")
                                   + ".log").replace(",", "")
            results[scale][name] = measured(cmd, log)
            print(f"x{scale:g} ({nodes:,} nodes) {name}: {results[scale][name][0]:.1f} s, "
                  f"{results[scale][name][1]:.2f} GB", flush=True)
        accuracy = json.loads((work / "eval.json").read_text())["test_acc"]
        print(f"x{scale:g}: test accuracy after one full-graph epoch {accuracy:.3f}", flush=True)
    scales = sorted(results)
    lo, hi = scales[0], scales[-1]
    head = " | ".join(f"x{s:g} ({int(round(PRODUCTS_NODES * s)):,} nodes)" for s in scales)
    lines = ["the products preset (ogbn-products' shape: average degree 50.5, 100 features, 47 classes), 4 METIS "
             f"parts, GraphSAGE 3 x 64, {os.cpu_count()} cores; seconds / peak GB of each stage:", "",
             f"| stage | {head} | growth x{lo:g} -> x{hi:g} (time / memory) |",
             "| --- | " + " | ".join("---" for _ in scales) + " | --- |"]
    for name in results[lo]:
        cells = " | ".join(f"{results[s][name][0]:.1f} s / {results[s][name][1]:.2f} GB" for s in scales)
        growth = (f"{results[hi][name][0] / results[lo][name][0]:.2f}x / "
                  f"{results[hi][name][1] / results[lo][name][1]:.2f}x") if hi != lo else "-"
        lines.append(f"| {name} | {cells} | {growth} |")
    publish("\n".join(lines), args.record and "scale")
    if args.dgl:
        rows = dgl_side_by_side(Path(args.work) / f"x{lo:g}")
        dgl_lines = [f"Partitioners on the x{lo:g} graph, 4 parts:", "",
                     "| tool | seconds | peak RSS GB | edge cut | on disk MB |", "| --- | --- | --- | --- | --- |"]
        dgl_lines += [f"| {t} | {s:.1f} | {r:.2f} | {c:.1%} | {d:.0f} |" for t, s, r, c, d in rows]
        publish("\n".join(dgl_lines), args.record and "scale")


if __name__ == "__main__":
    main()
