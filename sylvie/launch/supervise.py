"""Run a launcher (torchrun, srun) as a child that cannot outlive us, and repeat its first failure last.

The child gets SIGTERM if this process dies, and the signals sent here are passed on. ``python -m
sylvie.launch.supervise TORCHRUN-ARGS`` runs torchrun in this module, so each failed rank's exit code or signal
(which only torchrun learns) is recorded for ``formats.rank_failures``' summary.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from sylvie.formats.rank_failures import ENV, describe, first_failure, record_rank_exit
from sylvie.launch.process_tree import die_with_parent, start_time
from sylvie.log import configure

log = logging.getLogger("sylvie.launch.supervise")  # (by name: this module also runs as __main__)

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop_when_gone(pid: int, proc: subprocess.Popen, stopped: list) -> None:
    """Watch ``pid`` (the program that started this run, e.g. Snakemake) and stop ``proc`` once it is gone."""
    started = start_time(pid)
    if started is None:
        raise SystemExit(f"sylvie launch: --watch-pid {pid}: no such process")

    def watch():
        while proc.poll() is None:
            if start_time(pid) != started:  # gone (or its pid reused by another process)
                stopped.append(f"the process that started it (pid {pid}) is gone")
                proc.send_signal(signal.SIGTERM)
                return
            time.sleep(1)

    threading.Thread(target=watch, name="sylvie-watch-parent", daemon=True).start()


def run_supervised(argv: list[str], env: dict, what: str, collect_failures: bool = True,
                   watch_pid: int | None = None) -> int:
    """Run ``argv``; returns its exit status (128 + signal if a signal ended it). With ``watch_pid``, the run
    also stops when that process ends."""
    folder = tempfile.mkdtemp(prefix="sylvie-failures-") if collect_failures else None
    if folder:
        env = {**env, ENV: folder}
    sys.stdout.flush()
    try:
        # a process group of its own: a terminal's Ctrl-C reaches this process alone, which passes it on once (two
        # SIGINTs, the terminal's and ours, made torchrun print a traceback as it stopped)
        proc = subprocess.Popen(argv, env=env, preexec_fn=lambda: die_with_parent(signal.SIGTERM), process_group=0)
    except OSError as e:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        raise SystemExit(f"sylvie launch: cannot start {argv[0]}: {e}") from e
    stopped: list[str] = []  # why this process stopped the run, if it did

    def forward(sig, _frame):
        stopped.append(f"{signal.Signals(sig).name} received")
        proc.send_signal(sig)

    if watch_pid:
        _stop_when_gone(watch_pid, proc, stopped)
    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    try:
        if code != 0:
            entry = first_failure(folder) if folder else None
            how = f"exited {code}" if code > 0 else f"was ended by signal {-code}"
            if stopped:
                log.error(f"sylvie launch: stopped {what} ({stopped[0]})")
            elif entry:
                log.error(f"sylvie launch: {what} {how}; {describe(entry)}")
            elif folder:
                log.error(f"sylvie launch: {what} {how}; no rank reported an error of its own (one failed to start, "
                          f"was killed by a signal, or ran out of memory?); see the output above")
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
    return code if code >= 0 else 128 - code


def _continue_what_torchrun_stops() -> None:
    """When torchrun stops the ranks (SIGTERM to each rank's process group), also continue them: a rank stopped
    by SIGSTOP (or Ctrl-Z) cannot act on the SIGTERM, and torchrun would wait 30 s before it SIGKILLs it. The
    rank is torchrun's child, not yet reaped, so its process group is still its own."""
    try:
        from torch.distributed.elastic.multiprocessing.subprocess_handler import SubprocessHandler
    except ImportError:
        return
    close = getattr(SubprocessHandler, "close", None)
    if close is None or not hasattr(os, "killpg"):
        return

    def close_and_continue(self, death_sig=None):
        close(self, death_sig)
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)
        except (OSError, AttributeError):
            pass

    SubprocessHandler.close = close_and_continue


def _quiet_about_signals() -> None:
    """torchrun logs "Received SIGINT death signal, shutting down workers" and "Sending process N closing signal
    SIGTERM" for each rank as it stops them; the launcher's own last line says that the run was stopped, and why."""
    class NotTheStopping(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            msg = str(record.msg)
            return not (msg.startswith("Received %s death signal") or msg.startswith("Sending process %s closing"))

    for name in ("torch.distributed.elastic.agent.server.api", "torch.distributed.elastic.multiprocessing.api"):
        logging.getLogger(name).addFilter(NotTheStopping())


def torchrun_main(argv: list[str]) -> int:
    """torchrun with ``argv``; when ranks fail, what torchrun saw of each (its exit code or signal, in the order
    torchrun saw them) is recorded in the launcher's failure folder, and torchrun's report printed."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main

    _continue_what_torchrun_stops()
    _quiet_about_signals()
    try:
        main(argv)
    except SignalException as e:  # stopped (Ctrl-C, SIGTERM): the launcher above says so, in one line
        return 128 + int(e.sigval)
    except ChildFailedError as e:
        folder = os.environ.get(ENV)
        if folder:
            # torchrun's root cause: the failure it saw first (timestamps in whole seconds: of those in the first
            # second, a rank ended by a signal before one that exited, as a peer's broken connection follows it)
            failures = e.failures
            root = min(failures, key=lambda r: (failures[r].timestamp, failures[r].exitcode >= 0))
            for seq, (rank, failure) in enumerate(failures.items()):
                record_rank_exit(folder, rank, failure.pid, failure.exitcode, failure.timestamp, seq,
                                 first=rank == root)
        log.error(str(e))
        return 1
    return 0


if __name__ == "__main__":
    configure()
    sys.exit(torchrun_main(sys.argv[1:]))
