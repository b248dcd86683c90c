"""The ranks of a run on this machine as children forked from one process that has imported torch and sylvie once.

``python -m sylvie.launch.forked_ranks --ranks P -- sylvie STAGE ARGS`` is ``sylvie launch``'s launcher outside Slurm
(``launch.launcher`` fork): what ``torchrun --standalone --nproc-per-node P`` does for our own commands, without its
agent process and without each rank importing torch, torch._dynamo and sylvie's stage again (what that costs a job:
benchmarks/job_breakdown.py measures it both ways, record 2026-12-08_job-breakdown_2core-vm.md). It imports them, forks
the P ranks while it is one thread, then hosts the rendezvous store (as torchrun's agent does:
``TORCHELASTIC_USE_AGENT_STORE``) and gives each rank torchrun's environment, so that a rank cannot tell the two
launchers apart. It supervises them as torchrun does: when one fails, the others get SIGTERM (and SIGCONT, for a stopped
one) and SIGKILL after ``STOP_GRACE_S``; each failed rank's exit is recorded for ``formats.rank_failures``; a SIGINT,
SIGTERM or SIGHUP sent here goes to every rank. It exits 0, 1 when a rank failed, or 128 + the signal that stopped it.
"""
from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
import time
import uuid
from collections.abc import Callable

from sylvie.launch.process_tree import FORKED_RANK, die_with_parent

STOP_GRACE_S = 30.0  # torchrun's: how long a rank told to stop may take before it is killed
PORT_WAIT_S = 120.0  # how long a forked rank waits for the store's port (the parent makes it at once)
POLL_S = 0.05

# What the ranks of each stage import, once, before they are forked: the stage's module and what it imports, and
# where ranks train torch._dynamo, which the first optimiser imports (torch._disable_dynamo's wrapper of
# Optimizer.add_param_group), costing as much as torch itself.
PRELOAD = ("torch", "torch.distributed", "sylvie.cli")
TRAINING = ("torch._dynamo",)
STAGE_MODULES = {"train": (*TRAINING, "sylvie.train.run"), "evaluate": ("sylvie.evaluate.partitioned",)}


def rank_name(rank: int) -> str:
    """The process name a forked rank takes (``ps``, ``top``, ``/proc/PID/comm``): ``sylvie-rank<k>``."""
    return f"{FORKED_RANK}{rank}"


def _name_this_process(name: str) -> None:
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass  # not Linux: the name is only for people and for process_tree.training_ranks


def rank_env(rank: int, ranks: int, port: int, run_id: str) -> dict[str, str]:
    """torchrun's environment for rank ``rank`` of ``ranks`` on one node, its agent's store at ``port``."""
    env = {"RANK": rank, "LOCAL_RANK": rank, "GROUP_RANK": 0, "ROLE_RANK": rank, "ROLE_NAME": "default",
           "LOCAL_WORLD_SIZE": ranks, "WORLD_SIZE": ranks, "GROUP_WORLD_SIZE": 1, "ROLE_WORLD_SIZE": ranks,
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "TORCHELASTIC_RESTART_COUNT": 0,
           "TORCHELASTIC_MAX_RESTARTS": 0, "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_USE_AGENT_STORE": True,
           "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")}
    return {k: str(v) for k, v in env.items()}


def preload(modules=()) -> None:
    """Import what the ranks need: torch, sylvie's CLI and ``modules``, once here instead of once
    per rank; and what numba does at a process's first kernel, loaded from its cache or compiled (its CPU target's
    registries of implementations). No kernel runs and no thread pool starts. numba takes its thread
    count as torchrun gives it (``cli._as_rank``), before it is imported."""
    if "OMP_NUM_THREADS" in os.environ:
        os.environ.setdefault("NUMBA_NUM_THREADS", os.environ["OMP_NUM_THREADS"])
    for module in (*PRELOAD, *modules):
        importlib.import_module(module)
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


def stage_modules(command: list[str]) -> tuple[str, ...]:
    """The modules the ranks of ``sylvie STAGE ...`` import beyond ``PRELOAD``."""
    return STAGE_MODULES.get(command[1] if len(command) > 1 else "", ())


def _sylvie_main():
    """What the ``sylvie`` program runs (its console script's entry point), as torchrun would start it by name."""
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="sylvie")
    return script.load()


def _run_rank(rank: int, ranks: int, port_pipe: int, run_id: str, run: Callable[[], int | None]) -> None:
    """The forked child: wait for the store's port, become rank ``rank`` and exit with what ``run()`` returns (None:
    0); never returns."""
    code = 1
    try:
        os.setsid()  # a session of its own, as torchrun starts a rank: a terminal's Ctrl-C goes to the launcher
        die_with_parent()  # and it ends with this process, however that ends
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _name_this_process(rank_name(rank))
        ready, _, _ = select.select([port_pipe], [], [], PORT_WAIT_S)
        port = int(os.read(port_pipe, 16) or b"0") if ready else 0
        os.close(port_pipe)
        if not port:
            print(f"sylvie launch: rank {rank}: the launcher made no rendezvous store within {PORT_WAIT_S:.0f} s",
                  file=sys.stderr)
        else:
            os.environ.update(rank_env(rank, ranks, port, run_id))
            code = run() or 0
    except SystemExit as e:  # argparse's errors and --help
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no interpreter teardown: the ranks' native destructors (gloo) can abort at exit


def _describe(status: int) -> str:
    return f"exited {status}" if status > 0 else f"was killed by signal {-status} ({signal.Signals(-status).name})"


class ForkedRanks:
    """``ranks`` children, forked from this process, each calling ``run`` as its rank, and their supervision."""

    def __init__(self, ranks: int, run: Callable[[], int | None]):
        self.ranks, self.run = ranks, run
        self.pids: dict[int, int] = {}  # rank -> pid, while it runs
        self.ended: dict[int, tuple[int, int, float]] = {}  # rank -> (pid, exit status, when)
        self.signalled: int | None = None
        self.seen_first: set[int] = set()

    def start(self) -> ForkedRanks:
        run_id = uuid.uuid4().hex[:12]
        pipes = []
        sys.stdout.flush()  # else each child would write what this process had buffered again
        sys.stderr.flush()
        for rank in range(self.ranks):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                for w in pipes + [write]:
                    os.close(w)
                _run_rank(rank, self.ranks, read, run_id, self.run)
            os.close(read)
            pipes.append(write)
            self.pids[rank] = pid
        # the store once every rank is forked (this process then has the store's threads): as torchrun's agent
        from datetime import timedelta

        import torch.distributed as dist

        try:
            self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                       timeout=timedelta(seconds=60))
            port = str(self.store.port).encode()
        except Exception as e:  # noqa: BLE001 - said once, then every rank ends for want of a port
            print(f"sylvie launch: cannot make the rendezvous store on 127.0.0.1: {e}", file=sys.stderr)
            port = b"0"
        for w in pipes:
            try:
                os.write(w, port)
            finally:
                os.close(w)
        return self

    def _reap(self) -> None:
        now = time.time()  # one time for the ranks seen ended together: which ended first is not known
        for rank, pid in list(self.pids.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.ended[rank] = (pid, os.waitstatus_to_exitcode(status), now)
                del self.pids[rank]

    def _stop_all(self, sig: int) -> None:
        """``sig`` (and SIGCONT, so that a stopped rank can act on it) to every running rank; SIGKILL to those still
        running after ``STOP_GRACE_S``."""
        for pid in self.pids.values():
            for s in (sig, signal.SIGCONT):
                try:
                    os.killpg(pid, s)
                except OSError:
                    pass
        deadline = time.monotonic() + STOP_GRACE_S
        while self.pids and time.monotonic() < deadline:
            time.sleep(POLL_S)
            self._reap()
        for pid in self.pids.values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        while self.pids:
            time.sleep(POLL_S)
            self._reap()

    def wait(self) -> int:
        """Until every rank has ended: 0, 1 if one failed (the others stopped), 128 + the signal that stopped the
        run here."""

        def forward(sig, _frame):
            self.signalled = sig

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, forward)
        while self.pids:
            self._reap()
            if self.signalled is not None:
                self._stop_all(self.signalled)
                return 128 + self.signalled
            failed = {rank for rank, (_, status, _) in self.ended.items() if status != 0}
            if failed:
                self.seen_first = failed  # the ranks that failed before this process stopped any
                self._stop_all(signal.SIGTERM)
                break
            time.sleep(POLL_S)
        failed = {rank: e for rank, e in self.ended.items() if e[1] != 0}
        if not failed:
            return 0
        self._report(failed)
        return 1

    def _report(self, failed: dict[int, tuple[int, int, float]]) -> None:
        """What torchrun's agent says of failed ranks: each one's exit, the first seen first; each recorded for the
        launcher's last line (``formats.rank_failures``)."""
        from sylvie.formats.rank_failures import ENV, record_rank_exit

        # first: those that failed before the others were stopped, and of them a rank ended by a signal before one
        # that exited (as torchrun orders those of one second: a peer's broken connection follows the signal, and its
        # rank exits at once); then the ranks this process stopped
        order = sorted(failed, key=lambda r: (r not in self.seen_first, failed[r][1] >= 0, failed[r][2]))
        folder = os.environ.get(ENV)
        said = []
        for seq, rank in enumerate(order):
            pid, status, when = failed[rank]
            said.append(f"rank {rank} (pid {pid}) {_describe(status)}{' first' if seq == 0 else ''}")
            if folder:
                record_rank_exit(folder, rank, pid, status, int(when), seq, first=seq == 0)
        print(f"sylvie launch: {len(failed)} of {self.ranks} ranks failed: {'; '.join(said)}", file=sys.stderr,
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sylvie.launch.forked_ranks",
                                     description="run `sylvie STAGE ...` as RANKS ranks forked from this process")
    parser.add_argument("--ranks", type=int, required=True, help="how many ranks")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- sylvie STAGE ARGS")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or os.path.basename(command[0]) != "sylvie":
        parser.error("the command must be sylvie's (-- sylvie STAGE ...); run others under torchrun")
    preload(stage_modules(command))
    sylvie = _sylvie_main()
    code = ForkedRanks(args.ranks, lambda: sylvie(command[1:])).start().wait()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # torch's teardown adds a second to every run and nothing to it


if __name__ == "__main__":
    main()
