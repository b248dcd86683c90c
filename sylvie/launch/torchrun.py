"""Start the P ranks of a training run: one torchrun here, or one torchrun per node of a Slurm allocation.

``sylvie launch`` picks the launcher from the environment, so the Snakemake rule is the same everywhere: torchrun
``--standalone`` here; in a Slurm allocation, ``srun`` with the geometry spelled out (the Slurm executor strips the
sizing variables), each task running torchrun with c10d rendezvous on the step's first node.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from sylvie.errors import SylvieError
from sylvie.launch.allocator import allocator_env
from sylvie.launch.supervise import run_supervised

log = logging.getLogger(__name__)

RDZV_PORT_BASE = 20000  # c10d port = base + job id mod 10000: concurrent jobs on a shared node differ


@dataclass(frozen=True)
class Geometry:
    """Where the ranks of one run go: ``nodes`` nodes, one torchrun (Slurm task) each, ``ranks_per_node``
    processes per torchrun, ``cpus_per_rank`` CPUs and ``gpus_per_node`` GPUs requested per rank/node."""
    ranks: int
    nodes: int
    gpus_per_node: int = 0
    cpus_per_rank: int = 1

    @property
    def ranks_per_node(self) -> int:
        return self.ranks // self.nodes

    @property
    def cpus_per_task(self) -> int:
        return self.ranks_per_node * self.cpus_per_rank


def plan_geometry(ranks: int, ranks_per_node: int = 0, gpus_per_node: int = 0, cpus_per_rank: int = 1,
                  nodes: int | None = None, where: str = "launch") -> Geometry:
    """Nodes for ``ranks`` processes: exactly ``nodes``, or as few as hold at most ``ranks_per_node`` each
    (0 = all on one node); every node must get the same number of ranks."""
    if ranks < 1:
        raise SylvieError(f"{where}: a run needs at least 1 rank, got {ranks}")
    if nodes is None:
        nodes = 1 if ranks_per_node <= 0 else math.ceil(ranks / ranks_per_node)
    elif not 1 <= nodes <= ranks:
        raise SylvieError(f"{where}: nodes must be between 1 and the number of ranks ({ranks}), got {nodes}")
    if ranks % nodes:
        raise SylvieError(f"{where}: {ranks} ranks do not split evenly over {nodes} nodes "
                          f"(ranks_per_node {ranks_per_node}); choose a ranks_per_node that divides {ranks}")
    if gpus_per_node and gpus_per_node < ranks // nodes:
        raise SylvieError(f"{where}: {ranks // nodes} ranks per node but gpus_per_node is {gpus_per_node}; each "
                          f"rank needs a GPU (set ranks_per_node <= gpus_per_node, or gpus_per_node 0 for CPU)")
    return Geometry(ranks=ranks, nodes=nodes, gpus_per_node=gpus_per_node, cpus_per_rank=max(1, cpus_per_rank))


def slurm_resources(g: Geometry) -> dict:
    """Resources for snakemake-executor-plugin-slurm: ``nodes``, ``tasks`` (one torchrun per node),
    ``cpus_per_task``, and GPUs; ``mpi`` (launch left to the rule) only with several tasks, as the plugin
    rejects MPI jobs of one task. ``None`` leaves a resource unset."""
    multi = g.nodes > 1
    return {
        "nodes": g.nodes,
        "tasks": g.nodes,
        "cpus_per_task": g.cpus_per_task,
        "mpi": "srun" if multi else None,
        # --gpus is job-wide: per-node GPUs of a multi-node job go through --gres; one node may use either,
        # and --gpus is what the jobstep's own srun passes on to a one-task step.
        "gres": f"gpu:{g.gpus_per_node}" if multi and g.gpus_per_node else None,
        "gpu": g.gpus_per_node if not multi and g.gpus_per_node else None,
        "tasks_per_gpu": 0,  # else the plugin adds --ntasks-per-gpu=<tasks> to GPU jobs
    }


def _torchrun() -> list[str]:
    """torchrun, run by ``sylvie.launch.supervise`` so that how each failed rank ended is recorded
    (``sylvie.formats.rank_failures``)."""
    return [sys.executable, "-m", "sylvie.launch.supervise"]


def _sylvie() -> list[str]:
    return [sys.executable, "-m", "sylvie"]


def forks(command: list[str], launcher: str) -> bool:
    """Whether ``command``'s ranks are forked here (``launch.forked_ranks``): launcher fork and sylvie's command."""
    return launcher == "fork" and os.path.basename(command[0]) == "sylvie"


def standalone_argv(ranks: int, command: list[str], launcher: str = "fork") -> list[str]:
    """The ranks on this machine: forked from one process (``forks``), or torchrun --standalone."""
    if forks(command, launcher):
        return [sys.executable, "-m", "sylvie.launch.forked_ranks", "--ranks", str(ranks), "--", *command]
    return [*_torchrun(), "--standalone", "--nproc-per-node", str(ranks), "--no-python", *command]


def multinode_argv(nnodes: int, nproc_per_node: int, endpoint: str, rdzv_id: str, is_host: bool,
                   command: list[str], node_rank: int | None = None, local_addr: str | None = None,
                   join_timeout: int = 300) -> list[str]:
    """torchrun for one node of a c10d rendezvous at ``endpoint`` (host:port); ``is_host`` says this node
    runs the store (torchrun's guess from the hostname fails when several nodes share a host)."""
    argv = [*_torchrun(), "--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id,
            "--rdzv-conf", f"is_host={int(is_host)},join_timeout={join_timeout}", "--max-restarts", "0"]
    if node_rank is not None:
        argv += ["--node-rank", str(node_rank)]
    if local_addr is not None:
        argv += ["--local-addr", local_addr]
    return argv + ["--no-python", *command]


def srun_argv(g: Geometry, command: list[str], allocator: str = "auto") -> list[str]:
    """srun of one ``sylvie launch --slurm-task`` per node, every size explicit."""
    argv = ["srun", f"--nodes={g.nodes}", f"--ntasks={g.nodes}", "--ntasks-per-node=1",
            f"--cpus-per-task={g.cpus_per_task}", "--kill-on-bad-exit=1", "--label"]
    if g.gpus_per_node:
        argv.append(f"--gres=gpu:{g.gpus_per_node}")
    return argv + [*_sylvie(), "launch", "--slurm-task", "--ranks", str(g.ranks), "--nodes", str(g.nodes),
                   "--gpus-per-node", str(g.gpus_per_node), "--cpus-per-rank", str(g.cpus_per_rank),
                   "--allocator", allocator, "--", *command]


def _scontrol(*args: str) -> str:
    try:
        return subprocess.run(["scontrol", *args], check=True, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SylvieError(f"scontrol {' '.join(args)} failed ({e}); is this a Slurm node?") from e


def first_node_address(nodelist: str) -> str:
    """``NodeAddr`` of the first node of a Slurm node list (the hostname on most clusters)."""
    first = _scontrol("show", "hostnames", nodelist).split()[0]
    for field in _scontrol("show", "node", "-o", first).split():
        if field.startswith("NodeAddr="):
            return field.split("=", 1)[1]
    return first


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError) as e:
        raise SylvieError(f"--slurm-task runs as a task of srun, which sets {name}; it is missing or not a number "
                          f"(start it through `sylvie launch` inside a Slurm allocation)") from e


def slurm_task_argv(g: Geometry, command: list[str]) -> list[str]:
    """torchrun for this Slurm task (one per node): rendezvous on the step's first node."""
    job, node = _env_int("SLURM_JOB_ID"), _env_int("SLURM_NODEID")
    step = os.environ.get("SLURM_STEP_ID", "0")
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise SylvieError("--slurm-task: SLURM_STEP_NODELIST is not set (start it through srun)")
    endpoint = f"{first_node_address(nodelist)}:{RDZV_PORT_BASE + job % 10000}"
    log.info(f"sylvie launch: Slurm job {job} step {step}, node {node + 1} of {g.nodes} "
             f"({os.environ.get('SLURMD_NODENAME', '?')}), {g.ranks_per_node} ranks, rendezvous {endpoint}")
    return multinode_argv(g.nodes, g.ranks_per_node, endpoint, f"slurm-{job}.{step}", node == 0, command)


def where_to_launch(env: dict | None = None) -> str:
    """``here``, ``slurm`` (in an allocation: srun the tasks) or ``slurm-step`` (already in a step)."""
    env = os.environ if env is None else env
    if not env.get("SLURM_JOB_ID"):
        return "here"
    return "slurm-step" if env.get("SLURM_STEP_ID") not in (None, "", "batch", "extern") else "slurm"


def launch_argv(g: Geometry, command: list[str], slurm_task: bool = False, env: dict | None = None,
                allocator: str = "auto", launcher: str = "fork") -> list[str]:
    if slurm_task:
        return slurm_task_argv(g, command)
    where = where_to_launch(env)
    if where == "slurm":
        return srun_argv(g, command, allocator)
    if g.nodes > 1:
        raise SylvieError(f"{g.nodes} nodes were asked for, but this is "
                          f"{'a single Slurm step' if where == 'slurm-step' else 'not a Slurm allocation'}; "
                          f"run it with `snakemake --profile workflow/profiles/slurm` (or inside salloc), or set "
                          f"launch.ranks_per_node to 0 to run every rank here")
    return standalone_argv(g.ranks, command, launcher)


def thread_env(g: Geometry, threads: int | None, slurm_task: bool, env: dict | None = None) -> dict:
    """OMP/MKL threads per rank: the CPUs Slurm gave each rank, or this machine's share for one rank (inside a
    one-task Slurm step, the step's CPUs rather than Snakemake's thread count)."""
    env = os.environ if env is None else env
    if not slurm_task and where_to_launch(env) == "slurm-step" and env.get("SLURM_CPUS_PER_TASK", "").isdigit():
        threads = int(env["SLURM_CPUS_PER_TASK"])
    n = g.cpus_per_rank if slurm_task or threads is None else max(1, threads // g.ranks)
    return {k: str(n) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")}


def launch(g: Geometry, command: list[str], threads: int | None = None, slurm_task: bool = False,
           watch_pid: int | None = None, allocator: str = "auto", launcher: str = "fork") -> int:
    """Run the launcher as a supervised child (it and its ranks end if this process ends); returns its exit
    status, after repeating the first failing rank's error as the last line. The ranks get ``allocator``'s
    environment (``launch.allocator``: tcmalloc preloaded where installed), on the node they run on; outside
    Slurm they are forked from one process or started by torchrun (``launch.launcher``)."""
    if not command:
        raise SylvieError("launch: no command given; put it after --, e.g. -- sylvie train --partition ...")
    if not shutil.which(command[0]):
        raise SylvieError(f"launch: command not found: {command[0]}; give a program on PATH (e.g. sylvie train ...) "
                          f"or its full path")
    argv = launch_argv(g, command, slurm_task, allocator=allocator, launcher=launcher)
    if argv[0] == "srun" and not shutil.which("srun"):
        raise SylvieError("SLURM_JOB_ID is set but srun is not on PATH; load the Slurm module or unset SLURM_JOB_ID")
    env = {**os.environ, **thread_env(g, threads, slurm_task)}
    # Under srun every task is a `sylvie launch --slurm-task` that supervises its own node's torchrun (and chooses
    # the allocator there, where the library is looked for).
    srun = argv[0] == "srun"
    if not srun:
        env.update(allocator_env(allocator, env))
    what = "srun" if srun else "the ranks" if argv[2:3] == ["sylvie.launch.forked_ranks"] else "torchrun"
    return run_supervised(argv, env, what, collect_failures=not srun, watch_pid=watch_pid)
