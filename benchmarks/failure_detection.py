"""Time from a fault to a non-zero exit, with default settings (train.timeout from the schema).

Two faults on Cora (2 parts, GCN): a rank frozen with SIGSTOP under `sylvie launch` (torchrun here), and a
node whose link goes down in the emulated cluster (`sylvie bench cluster`, root). Prints the seconds to the
exit, the last line the user sees, and whether any process or namespace was left behind.

    python benchmarks/failure_detection.py --dataset data/datasets/cora --workdir /tmp/faults
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time
from pathlib import Path

from common import BIN, partition, provenance

from sylvie.launch.process_tree import alive, training_ranks


def _namespaces() -> set[str]:
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


def _measure(argv: list[str], out: Path, fault) -> tuple[float, str, int]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (len(training_ranks(out)) == 2 and (out / "train.lock").exists()):
        time.sleep(0.2)
    time.sleep(5)
    pids = training_ranks(out)
    fault(proc, pids)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=600)
    elapsed = time.monotonic() - t0
    time.sleep(1)
    left = sum(alive(p) for p in pids.values())
    return elapsed, err.strip().splitlines()[-1], left


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="canonical Cora directory (sylvie download cora ...)")
    ap.add_argument("--workdir", required=True, help="scratch directory for the partition and the runs")
    ap.add_argument("--faults", default="frozen,cut", help="which faults to time (default: frozen,cut)")
    args = ap.parse_args()
    work = Path(args.workdir)
    part = partition(args.dataset, work / "p2", parts=2)
    train = ["--epochs", "100000000", "--log-every", "100000000", "--no-progress"]
    rows = []
    if "frozen" in args.faults:
        out = work / "frozen"
        elapsed, last, left = _measure([str(BIN / "sylvie"), "launch", "--ranks", "2", "--", "sylvie", "train",
                                        "--partition", str(part), "--out", str(out), *train], out,
                                       lambda proc, pids: os.kill(pids[1], signal.SIGSTOP))
        rows.append(("rank 1 frozen (SIGSTOP), torchrun", elapsed, left, "-", last))
    if "cut" in args.faults and os.geteuid() == 0:
        out = work / "cut"
        before = _namespaces()
        cluster = [str(BIN / "sylvie"), "bench", "cluster", "--partition", str(part), "--out", str(out), "--rate",
                   "1gbit", "--", *train]
        elapsed, last, left = _measure(
            cluster, out, lambda proc, pids: subprocess.run(["ip", "link", "set", f"sy{proc.pid % 100000}v1", "down"],
                                                            check=True))
        rows.append(("node 1 link down, emulated cluster", elapsed, left, len(_namespaces() - before), last))
    print(f"{'fault':<38} {'to exit':>8} {'procs left':>10} {'netns left':>10}  last line")
    for name, elapsed, left, ns, last in rows:
        print(f"{name:<38} {elapsed:>7.1f}s {left:>10} {ns!s:>10}  {last}")
    print(f"\n{provenance()}")


if __name__ == "__main__":
    main()
