"""Whether two versions of the code train the same: the losses of every run of two pipeline results folders side by
side (the first ``--epochs`` of each run's ``metrics.jsonl``, compared bit for bit), and whether the whole runs and
their ``eval.json`` accuracies are equal too. Run the pipeline with each version into its own folder first.

    python benchmarks/same_losses.py BEFORE/results AFTER/results --before 6f3bb3e --after HEAD --record
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import add_record_option, publish


def runs(results: Path) -> dict[str, Path]:
    """run/seed -> its folder, for every run folder with a metrics.jsonl."""
    return {str(f.parent.relative_to(results)): f.parent for f in sorted(results.glob("*/*/metrics.jsonl"))}


def losses(run: Path) -> list[float]:
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [float(r["loss"]) for r in sorted(lines, key=lambda r: r["epoch"])]


def accuracies(run: Path) -> dict | None:
    path = run / "eval.json"
    return {k: v for k, v in json.loads(path.read_text()).items() if k.endswith("acc")} if path.exists() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path, help="the results folder of the version before")
    ap.add_argument("after", type=Path, help="the results folder of the version after")
    ap.add_argument("--before-name", default="before", help="what the before version is (a revision)")
    ap.add_argument("--after-name", default="after", help="what the after version is (a revision)")
    ap.add_argument("--epochs", type=int, default=20, help="the first epochs whose losses the table shows")
    ap.add_argument("--topic", default="same-losses", help="the record's topic (its file name's middle)")
    add_record_option(ap, "same-losses")
    args = ap.parse_args()
    before, after = runs(args.before), runs(args.after)
    missing = sorted(set(before) ^ set(after))
    if missing:
        raise SystemExit(f"runs in only one of the folders: {', '.join(missing)}")
    lines = [f"Before: {args.before_name} ({args.before}). After: {args.after_name} ({args.after}). Losses of the "
             f"first {args.epochs} epochs compared bit for bit; 'whole run': every epoch's loss and eval.json's "
             f"accuracies equal.", "",
             f"| run | first {args.epochs} losses equal | loss, epoch 1 | loss, epoch {args.epochs} (before) | "
             f"loss, epoch {args.epochs} (after) | whole run equal |", "| --- | --- | --- | --- | --- | --- |"]
    for name in before:
        a, b = losses(before[name]), losses(after[name])
        first = sum(x == y for x, y in zip(a[:args.epochs], b[:args.epochs], strict=True))
        whole = a == b and accuracies(before[name]) == accuracies(after[name])
        last = min(args.epochs, len(a)) - 1
        lines.append(f"| {name} | {first}/{min(args.epochs, len(a))} | {a[0]!r} | {a[last]!r} | {b[last]!r} | "
                     f"{'yes' if whole else 'no'} |")
    publish("\n".join(lines), args.record and args.topic)


if __name__ == "__main__":
    main()
