"""Where a pipeline run's wall time goes: the default config's training runs, each launched as its Snakemake rule
launches it (``sylvie launch ... -- sylvie train``), then evaluated, before and after the changes of issue 71.

    python benchmarks/job_breakdown.py                   # gcn-p4, sage-p4, gat-p4, gcn-p4-1bit-pipe-k5, gcn-p1
    python benchmarks/job_breakdown.py --runs gcn-p4 --rounds 3 --record

- before: torchrun starts the ranks (``launch.launcher torchrun``), and a job of its own evaluates the model
  (``sylvie evaluate --dataset``, as the evaluate rule did);
- after: the ranks are forked from one process (``launch.launcher fork``) and the training job evaluates the model
  itself (``sylvie train --eval-out --eval-dataset``, as the train rule does now).

Graph: Cora from the embedded Planetoid files (2,708 nodes), cut by METIS as the config cuts it; each run's flags are
the config's (config/config.yaml), seed 0, 200 epochs. The wall time, from the command's start to its exit (before:
both jobs'), is cut at what the output and the files say:

- launcher: until the first rank process exists (torchrun: the agent imports torch; fork: the one process imports
  torch, torch._dynamo and sylvie's training stack before it forks);
- start-up: from there to the first epoch's start (the ranks import, read their shard, join, build the trainer);
  the first epoch's start is when rank 0 logged epoch 10, less epochs 1-10's recorded time (training and evaluation);
- epochs: from the first epoch's start to the last epoch's log line (every epoch's training, its evaluation of the
  splits, the checkpoints); "first" is epoch 1's recorded time within it (imports and caches the first step meets);
- writing: from the last epoch's line to the line saying model.pt was written;
- evaluation: after: from there to the evaluation's line; before: the evaluation job, whole;
- teardown: from the last line to the launcher's exit.

Outside = total - epochs; the ratio is outside / epochs. Rounds alternate (before, after, before, after ...); each
cell is the median over the rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import yaml
from common import BIN, REPO, add_record_option, embedded_cora, partition, publish

from sylvie.config import cli_arguments
from sylvie.launch.process_tree import training_ranks
from sylvie.pipeline_config import plan_config

DEFAULT_RUNS = ("gcn-p4", "sage-p4", "gat-p4", "gcn-p4-1bit-pipe-k5", "gcn-p1")
SETUPS = {"before": "torchrun", "after": "fork"}  # setting -> launch.launcher
PARTS = ("launcher", "start-up", "epochs", "first", "writing", "evaluation", "teardown", "total", "outside", "ratio")


def train_flags(run) -> list[str]:
    """A full-graph run's flags of `sylvie train`, as the train rule gives them (workflow/rules/common.smk)."""
    flags = [cli_arguments("model", run.model), cli_arguments("train", run.train, skip=("seeds", "mode")),
             cli_arguments("comm", run.comm)]
    return " ".join(flags).split()


def timed_job(argv: list[str], out: Path) -> tuple[list[tuple[float, str]], float, float | None]:
    """Run ``argv``: each line of its output with the seconds since the start, the seconds to its exit, and the
    seconds until the first rank of the run writing ``out`` existed."""
    first_rank: list[float] = []
    done = threading.Event()
    t0 = time.perf_counter()

    def watch():
        while not done.is_set() and not first_rank:
            if training_ranks(out):
                first_rank.append(time.perf_counter() - t0)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"})
    lines = [(time.perf_counter() - t0, line.rstrip("\n")) for line in proc.stdout]
    code = proc.wait()
    total = time.perf_counter() - t0
    done.set()
    watcher.join()
    if code:
        raise SystemExit(f"{' '.join(argv)} exited {code}:\n" + "\n".join(line for _, line in lines[-15:]))
    return lines, total, first_rank[0] if first_rank else None


def breakdown(lines, total: float, first_rank: float, out: Path) -> dict[str, float]:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    spent = [r["epoch_time"] + r["eval_time"] for r in records]
    epoch_lines = [(t, line) for t, line in lines if line.lstrip().startswith("epoch ")]
    first_logged = int(epoch_lines[0][1].split()[1].split("/")[0])  # "epoch   10/200 | ..."
    loop_start = epoch_lines[0][0] - sum(spent[:first_logged])
    loop_end = epoch_lines[-1][0]
    wrote = next(t for t, line in lines if "wrote" in line and "model.pt" in line)
    evaluated = next((t for t, line in lines if "whole graph, one process) -> " in line), wrote)
    epochs = loop_end - loop_start
    return {"launcher": first_rank, "start-up": loop_start - first_rank, "epochs": epochs, "first": spent[0],
            "writing": wrote - loop_end, "evaluation": evaluated - wrote, "teardown": total - evaluated,
            "total": total}


def evaluation_job(cora_dir: Path, model: Path, out: Path) -> float:
    """``sylvie evaluate --dataset`` of ``model`` in a process of its own: its wall seconds."""
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "sylvie"), "evaluate", "--dataset", str(cora_dir), "--model", str(model), "--out",
                    str(out)], check=True, capture_output=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS), help="runs of config/config.yaml (full-graph)")
    ap.add_argument("--rounds", type=int, default=2, help="jobs per run and launcher (alternating launchers)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="the job's threads (Snakemake's --cores)")
    add_record_option(ap, "job-breakdown-before-after")
    args = ap.parse_args()
    plan = plan_config(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    with tempfile.TemporaryDirectory(prefix="job-breakdown-") as tmp:
        work = Path(tmp)
        embedded_cora(work)
        parts_dirs = {}
        rows, totals, epochs = [], dict.fromkeys(SETUPS, 0.0), dict.fromkeys(SETUPS, 0.0)
        for name in args.runs:
            run = plan.runs[name]
            parts = run.partition.parts
            if parts not in parts_dirs:
                parts_dirs[parts] = partition(work / "cora", work / f"metis-p{parts}", parts=parts)
            cells = {setup: [] for setup in SETUPS}
            for i in range(args.rounds):
                for setup, launcher in SETUPS.items():
                    out = work / f"{name}-{setup}-{i}"
                    argv = [str(BIN / "sylvie"), "launch", "--ranks", str(parts), "--threads", str(args.threads),
                            "--launcher", launcher, "--", "sylvie", "train", "--partition", str(parts_dirs[parts]),
                            "--out", str(out), "--seed", "0", *train_flags(run), "--no-progress"]
                    if setup == "after":
                        argv[-1:-1] = ["--eval-out", str(out / "eval.json"), "--eval-dataset", str(work / "cora")]
                    lines, total, first_rank = timed_job(argv, out)
                    cell = breakdown(lines, total, first_rank, out)
                    if setup == "before":  # the evaluate rule's job, after the training job
                        cell["evaluation"] = evaluation_job(work / "cora", out / "model.pt", out / "eval.json")
                        cell["total"] += cell["evaluation"]
                    cell["outside"] = cell["total"] - cell["epochs"]
                    cell["ratio"] = cell["outside"] / cell["epochs"]
                    cells[setup].append(cell)
                    print(f"{name} {setup} round {i + 1}: {cell['total']:.2f} s", flush=True)
            for setup in SETUPS:
                med = {k: statistics.median(c[k] for c in cells[setup]) for k in PARTS}
                rows.append(f"| {name} | {parts} | {setup} | " + " | ".join(
                    f"{med[k]:.2f}" if k != "ratio" else f"{med[k]:.2f}x" for k in PARTS) + " |")
                totals[setup] += med["total"]
                epochs[setup] += med["epochs"]
    head = ("| run | ranks | setting | " + " | ".join(PARTS) + " |\n|---|---|---|" + "---|" * len(PARTS))
    summary = "; ".join(f"{setup}: {totals[setup]:.1f} s, outside epochs {totals[setup] - epochs[setup]:.1f} s = "
                        f"{(totals[setup] - epochs[setup]) / epochs[setup]:.2f}x the epochs' {epochs[setup]:.1f} s"
                        for setup in SETUPS)
    table = (f"A run's jobs (Cora, 200 epochs, seed 0, {args.threads} threads; seconds, median of {args.rounds}; "
             f"before: torchrun + an evaluation job, after: forked ranks evaluating in the job; ratio: outside epochs "
             f"/ epochs):\n\n{head}\n" + "\n".join(rows) + f"\n\nAll runs above, summed: {summary}.")
    publish(table, "job-breakdown-before-after" if args.record else None)


if __name__ == "__main__":
    main()
