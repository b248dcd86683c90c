"""Run a launcher (torchrun, srun) as a child that cannot outlive us, and repeat its first failure last.

The child gets SIGTERM from the kernel if this process dies (so torchrun stops its ranks, which die with
it); SIGINT, SIGTERM and SIGHUP sent to this process are passed on to it. When it fails, the earliest
error a rank recorded (``sylvie.failures``) is printed after all of torchrun's output.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from sylvie.failures import ENV, describe, first_failure
from sylvie.process_tree import die_with_parent, start_time

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
        proc = subprocess.Popen(argv, env=env, preexec_fn=lambda: die_with_parent(signal.SIGTERM))
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
                print(f"sylvie launch: stopped {what} ({stopped[0]})", file=sys.stderr, flush=True)
            elif entry:
                print(f"sylvie launch: {what} {how}; {describe(entry)}", file=sys.stderr, flush=True)
            elif folder:
                print(f"sylvie launch: {what} {how}; no rank reported an error of its own (one failed to start, was "
                      f"killed by a signal, or ran out of memory?); see the output above", file=sys.stderr, flush=True)
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
    return code if code >= 0 else 128 - code
