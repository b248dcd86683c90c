"""Where a pipeline run's wall time goes: the default config's full-graph runs, all their seeds, launched as their
Snakemake rule launches them (``sylvie launch ... -- sylvie train``) and evaluated, before and after issue 71.

    python benchmarks/job_breakdown.py                   # gcn-p4, sage-p4, gat-p4, gcn-p4-1bit-pipe-k5, gcn-p1
    python benchmarks/job_breakdown.py --runs gcn-p4 --rounds 3 --record

- before: a job per seed, torchrun starting the ranks (``launch.launcher torchrun``), then a job per seed that
  evaluates the model (``sylvie evaluate --dataset``, as the evaluate rule did);
- after: a job per run, its seeds one after another in one launch (``--seed 0 1 2 --out DIR/seed{seed}``), the ranks
  forked from one process (``launch.launcher fork``), each seed's model evaluated in the job (``--eval-out
  --eval-dataset``, as the train rule does now).

Graph: Cora from the embedded Planetoid files (2,708 nodes), cut by METIS as the config cuts it; each run's flags and
seeds are the config's (config/config.yaml), 200 epochs. The wall time, from a job's start to its exit, summed over
a run's jobs, is cut at what the output and the files say:

- launcher: until the first rank process exists (torchrun: the agent imports torch; fork: the one process imports
  torch, torch._dynamo and sylvie's training stack before it forks);
- start-up: from there to the first seed's first epoch (the ranks import, read their shard, join, build the
  trainer); a seed's first epoch starts when rank 0 logged its epoch 10, less its epochs 1-10's recorded time;
- epochs: from each seed's first epoch to its last epoch's log line (training, the evaluation of the splits every
  epoch, the checkpoints), summed over the seeds;
- between: what else a job does between its first epoch and its exit: writing each model, evaluating it (after),
  the next seed's set-up (after);
- evaluation jobs (before): the ``sylvie evaluate`` jobs, whole;
- teardown: from the last line to the launcher's exit.

Outside = total - epochs; the ratio is outside / epochs. Rounds alternate (before, after, before, after ...); each
cell is the median over the rounds.
"""
import argparse
import json
import os
import shutil
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
PARTS = ("launcher", "start-up", "epochs", "between", "evaluation jobs", "teardown", "total", "outside", "ratio")


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


def breakdown(lines, total: float, first_rank: float, outs: list[Path], log_every: int) -> dict[str, float]:
    """One job's parts (see the module's notes): ``lines`` its timed output, ``outs`` its seeds' run directories in
    the order trained, each logging every ``log_every``-th epoch and the last."""
    epoch_lines = [(t, line) for t, line in lines if line.lstrip().startswith("epoch ")]
    loops = []  # each seed's (first epoch's start, last epoch's line)
    for out in outs:
        records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        spent = [r["epoch_time"] + r["eval_time"] for r in records]
        logged = sum(1 for e in range(1, len(records) + 1) if e % log_every == 0 or e == len(records))
        mine, epoch_lines = epoch_lines[:logged], epoch_lines[logged:]  # its logged epochs, then the next seed's
        first_logged = int(mine[0][1].split()[1].split("/")[0])  # "epoch   10/200 | ..."
        loops.append((mine[0][0] - sum(spent[:first_logged]), mine[-1][0]))
    last_line = lines[-1][0]
    epochs = sum(end - start for start, end in loops)
    return {"launcher": first_rank, "start-up": loops[0][0] - first_rank, "epochs": epochs,
            "between": last_line - loops[0][0] - epochs, "evaluation jobs": 0.0, "teardown": total - last_line,
            "total": total}


def evaluation_job(cora_dir: Path, model: Path, out: Path) -> float:
    """``sylvie evaluate --dataset`` of ``model`` in a process of its own: its wall seconds."""
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "sylvie"), "evaluate", "--dataset", str(cora_dir), "--model", str(model), "--out",
                    str(out)], check=True, capture_output=True)
    return time.perf_counter() - t0


def run_jobs(setup: str, run, name: str, part_dir: Path, work: Path, threads: int) -> dict[str, float]:
    """Train (and evaluate) every seed of ``run`` as ``setup`` does; its parts, summed over its jobs."""
    seeds = [str(s) for s in run.train.seeds]
    threads = min(threads, run.partition.parts)  # the train rule's threads: its parts, at most Snakemake's cores
    launch = [str(BIN / "sylvie"), "launch", "--ranks", str(run.partition.parts), "--threads", str(threads),
              "--launcher", SETUPS[setup], "--", "sylvie", "train", "--partition", str(part_dir), *train_flags(run),
              "--no-progress"]
    if setup == "after":  # one job: every seed, each evaluated in it
        out = f"{work}/{name}-after/seed{{seed}}"
        argv = [*launch, "--out", out, "--seed", *seeds, "--eval-out", f"{out}/eval.json", "--eval-dataset",
                str(work / "cora")]
        lines, total, first_rank = timed_job(argv, Path(out))
        return breakdown(lines, total, first_rank, [Path(out.replace("{seed}", s)) for s in seeds],
                         run.train.log_every)
    parts = dict.fromkeys(PARTS[:-2], 0.0)
    for seed in seeds:  # a job per seed, then its evaluation job
        out = work / f"{name}-before" / f"seed{seed}"
        lines, total, first_rank = timed_job([*launch, "--out", str(out), "--seed", seed], out)
        for k, v in breakdown(lines, total, first_rank, [out], run.train.log_every).items():
            parts[k] += v
        spent = evaluation_job(work / "cora", out / "model.pt", out / "eval.json")
        parts["evaluation jobs"] += spent
        parts["total"] += spent
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS), help="runs of config/config.yaml (full-graph)")
    ap.add_argument("--rounds", type=int, default=2, help="jobs per run and launcher (alternating launchers)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="Snakemake's --cores: a job's threads are its run's parts, at most these")
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
                for setup in SETUPS:
                    shutil.rmtree(work / f"{name}-{setup}", ignore_errors=True)
                    cell = run_jobs(setup, run, name, parts_dirs[parts], work, args.threads)
                    cell["outside"] = cell["total"] - cell["epochs"]
                    cell["ratio"] = cell["outside"] / cell["epochs"]
                    cells[setup].append(cell)
                    print(f"{name} {setup} round {i + 1}: {cell['total']:.2f} s", flush=True)
            for setup in SETUPS:
                med = {k: statistics.median(c[k] for c in cells[setup]) for k in PARTS}
                rows.append(f"| {name} | {parts} | {len(run.train.seeds)} | {setup} | " + " | ".join(
                    f"{med[k]:.2f}" if k != "ratio" else f"{med[k]:.2f}x" for k in PARTS) + " |")
                totals[setup] += med["total"]
                epochs[setup] += med["epochs"]
    head = ("| run | ranks | seeds | setting | " + " | ".join(PARTS) + " |\n|---|---|---|---|" + "---|" * len(PARTS))
    summary = "; ".join(f"{setup}: {totals[setup]:.1f} s, outside epochs {totals[setup] - epochs[setup]:.1f} s = "
                        f"{(totals[setup] - epochs[setup]) / epochs[setup]:.2f}x the epochs' {epochs[setup]:.1f} s"
                        for setup in SETUPS)
    table = (f"A run's jobs, all its seeds (Cora, 200 epochs, at most {args.threads} threads; seconds, summed over "
             f"the run's jobs, median of {args.rounds} rounds; before: a torchrun job and an evaluation job per "
             f"seed, after: one job per run, forked ranks, evaluating in the job; ratio: outside epochs / "
             f"epochs):\n\n{head}\n" + "\n".join(rows) + f"\n\nAll runs above, summed: {summary}.")
    publish(table, "job-breakdown-before-after" if args.record else None)


if __name__ == "__main__":
    main()
