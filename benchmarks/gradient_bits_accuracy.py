"""Typed graphs with learnt embeddings under 1-bit pipelined full-graph training: where the accuracy goes, and what
the feature gradients' own bit width (``comm.gradient_bits``) gives back. Seed by seed, on 4 METIS parts: fp32
synchronous (the reference), 1-bit pipelined (features and gradients at 1 bit), and 1-bit pipelined with the
gradients at ``--gradient-bits`` (4); the test accuracy at the best validation epoch (the run's own pick).

Graphs (each a paper type with features, and featureless types learnt as embeddings whose edges METIS mostly cuts):

- ``mag``: the mag preset (``sylvie download`` synthetic, preset mag) at 48,494 nodes, as config/mag-tenth.yaml.
- ``cora-words``: Cora as papers and words (tests/support/graphs.py's ``write_papers_and_words``: 2,708 papers with
  their word bags as features, 1,433 words without features, each linked to every paper that has it; citations
  undirected), read by ``sylvie download`` from those files.

Models as config/mag.yaml: R-GCN 2 x 64 (dropout 0.5) and R-GAT 2 x (4 x 16) (dropout 0.2), Adam lr 0.01, no weight
decay. The graph's statistics (node types, edges, the share METIS cuts, halo rows against inner rows) head its table.

    python benchmarks/gradient_bits_accuracy.py [--graphs mag cora-words] [--archs rgcn rgat] [--epochs 60]
        [--seeds 0 1 2 3 4] [--gradient-bits 4] [--record]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import REPO, add_record_option, embedded_cora, partition, publish, sylvie, synthetic_graph

sys.path.insert(0, str(REPO / "tests"))
from support.graphs import write_papers_and_words  # noqa: E402  (the tests' writer: one copy of the export)

from sylvie.config import section  # noqa: E402
from sylvie.data.registry import download  # noqa: E402
from sylvie.formats.model_file import load_model  # noqa: E402

PARTS = 4
ARCHS = {"rgcn": ["--arch", "rgcn", "--hidden", "64", "--dropout", "0.5"],
         "rgat": ["--arch", "rgat", "--hidden", "16", "--heads", "4", "--dropout", "0.2"]}
GRAPHS = ("mag", "cora-words")


def variants(gradient_bits: int) -> dict[str, list[str]]:
    return {"fp32 synchronous": ["--bits", "32", "--no-pipeline"],
            "1-bit pipelined": ["--bits", "1", "--pipeline"],
            f"1-bit pipelined, gradients {gradient_bits}-bit": ["--bits", "1", "--pipeline", "--gradient-bits",
                                                                str(gradient_bits)]}


def build(name: str, work: Path) -> Path:
    """The graph ``name``'s canonical directory under ``work``."""
    target = work / name
    if (target / "meta.json").exists():
        return target
    if name == "mag":
        return synthetic_graph(target, preset="mag", nodes=48494)
    options = write_papers_and_words(embedded_cora(work), work / "cora-words-files")
    download("cora-words", target, section("dataset", options))
    return target


def statistics_line(name: str, manifest: dict) -> str:
    types = manifest["types"]
    widths = manifest["feature_widths"]
    counts = ", ".join(f"{n:,} {t}" + ("" if w else " (learnt)") for t, n, w in
                       zip(types["node_types"], manifest["type_counts"], widths, strict=True))
    parts = manifest["parts"]
    inner, halo = sum(p["inner_nodes"] for p in parts), sum(p["halo_nodes"] for p in parts)
    return (f"**{name}**: {counts}; {manifest['num_edges']:,} edges in {len(types['relations'])} relations (reverses "
            f"included); METIS at {PARTS} parts cuts {manifest['edge_cut'] / manifest['num_edges']:.0%} of them; "
            f"halo rows {halo:,} against {inner:,} inner rows ({halo / inner:.2f}x).")


def train(part: Path, out: Path, arch: str, seed: int, epochs: int, flags: list[str]) -> float:
    if not (out / "model.pt").exists():
        sylvie("launch", "--ranks", PARTS, "--", "sylvie", "train", "--partition", part, "--out", out, "--seed", seed,
               *ARCHS[arch], "--layers", "2", "--epochs", epochs, "--lr", "0.01", "--weight-decay", "0",
               "--checkpoint-every", "0", "--log-every", epochs, "--no-progress", *flags,
               log=out.with_suffix(".log"), timeout_s=3600)
    return load_model(out / "model.pt").summary["test_acc_at_best_val"]  # the epoch the run kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", choices=GRAPHS, default=list(GRAPHS))
    ap.add_argument("--archs", nargs="+", choices=sorted(ARCHS), default=sorted(ARCHS))
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--gradient-bits", type=int, choices=[2, 4, 8, 32], default=4)
    ap.add_argument("--work", default="results/bench-gradient-bits", help="graphs, partitions and runs go here "
                    "(runs already there with a model.pt are read, not trained again)")
    add_record_option(ap, "gradient-bits-accuracy[-ARCHS][-GRAPHS]")
    args = ap.parse_args()
    # a record per selection: the runs of another selection (other seeds) go to a record of their own
    topic = "-".join(["gradient-bits-accuracy", *(args.archs if args.archs != sorted(ARCHS) else []),
                      *(args.graphs if args.graphs != list(GRAPHS) else [])])
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    lines = [f"{PARTS} METIS parts, full-graph, {args.epochs} epochs, Adam lr 0.01, no weight decay; R-GCN 2 x 64 "
             f"(dropout 0.5), R-GAT 2 x (4 x 16) (dropout 0.2); test accuracy (%) at the best validation epoch, seeds "
             f"{' / '.join(map(str, args.seeds))}; each 1-bit row's difference from fp32 synchronous seed by seed "
             f"(points), and the worst of them.", ""]
    for name in args.graphs:
        part = partition(build(name, work), work / f"{name}-p{PARTS}", parts=PARTS)
        lines += [statistics_line(name, json.loads((part / "manifest.json").read_text())), "",
                  "| model | exchange | test accuracy by seed | mean | - fp32, seed by seed | worst | s |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for arch in args.archs:
            reference = None
            for label, flags in variants(args.gradient_bits).items():
                t0 = time.perf_counter()
                accs = [100 * train(part, work / "runs" / f"{name}-{arch}-{'-'.join(flags).replace('--', '')}-s{s}",
                                    arch, s, args.epochs, flags) for s in args.seeds]
                secs = time.perf_counter() - t0
                print(f"{name} {arch} {label}: {accs}", file=sys.stderr, flush=True)
                if reference is None:
                    reference, diffs, worst = accs, "", ""
                else:
                    d = [a - r for a, r in zip(accs, reference, strict=True)]
                    diffs, worst = " / ".join(f"{x:+.2f}" for x in d), f"{min(d):+.2f}"
                lines.append(f"| {arch} | {label} | {' / '.join(f'{a:.2f}' for a in accs)} | "
                             f"{statistics.mean(accs):.2f} | {diffs} | {worst} | {secs:.0f} |")
        lines.append("")
    lines.append("s: wall seconds of the row's trainings (4 ranks each, start-up included; 0 where read back).")
    publish("\n".join(lines), args.record and topic)


if __name__ == "__main__":
    main()
