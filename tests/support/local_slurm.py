"""The pipeline on a real Slurm, run in the background for tests/test_slurm.py.

Starts the single-machine Slurm of workflow/scripts/slurm-local-up.sh, runs the Snakefile through
`--profile workflow/profiles/slurm` on a fresh copy of the repository, changes a training setting, runs it
again, records what Slurm says of every submitted job (scontrol forgets finished jobs after MinJobAge), and
stops the daemons. It mostly waits on Slurm and on Snakemake's status polling, so tests/conftest.py starts it at
the beginning of the session and it runs while the CPU-bound tests do. Every wait is bounded.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from support.commands import BIN, REPO, venv_env
from support.files import copy_repo

UP = REPO / "workflow" / "scripts" / "slurm-local-up.sh"
DOWN = REPO / "workflow" / "scripts" / "slurm-local-down.sh"

CONFIG = """\
datasets:
  cora: {source: planetoid, raw_dir: data/embedded/planetoid}
defaults:
  dataset: cora
  partition: {method: metis, parts: 2, seed: 0}
  model: {arch: gcn, hidden: 16, layers: 2, dropout: 0.5, self_loop: true}
  train: {epochs: 30, lr: 0.01, seeds: [0], checkpoint_every: 0, log_every: 10}
runs:
  gcn-p2: {}
  gcn-p1:
    partition: {parts: 1}
launch: {ranks_per_node: 1}
report: {title: Sylvie on a local Slurm}
"""
CHANGED_LR = ("  gcn-p2: {}", "  gcn-p2: {train: {lr: 0.02}}")
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+)/")


def submitted(log: str) -> list[tuple[int, str]]:
    """(Slurm job id, rule) of every job Snakemake submitted."""
    return [(int(j), rule) for j, rule in SUBMITTED.findall(log)]


def scontrol_job(job_id: int) -> dict:
    out = subprocess.run(["timeout", "-k", "5", "30", "scontrol", "show", "job", "-o", str(job_id)],
                         capture_output=True, text=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


class SlurmPipelineRun:
    """Background run: ``logs`` (Snakemake's output of the first run and of the rerun), ``jobs`` (Slurm job id
    -> scontrol fields), ``skip_reason`` (Slurm cannot be installed here), ``leftover`` (daemons still running
    after the stop script)."""

    def __init__(self, workdir: Path, state_file: Path | None = None):
        self.repo = workdir / "repo"
        self.state_file = state_file  # where the outcome is written when the run ends (RecordedSlurmRun reads it)
        self.logs: list[str] = []
        self.jobs: dict[int, dict] = {}
        self.skip_reason: str | None = None
        self.error: BaseException | None = None
        self.leftover: str | None = None
        self._proc: subprocess.Popen | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="slurm-pipeline", daemon=True)

    def start(self) -> SlurmPipelineRun:
        self._thread.start()
        return self

    def wait(self, timeout_s: float = 1800) -> SlurmPipelineRun:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.stop()
            raise TimeoutError(f"the Slurm pipeline did not finish in {timeout_s:.0f} s")
        if self.error is not None:
            raise self.error
        return self

    def _command(self, argv: list[str], timeout_s: int) -> subprocess.CompletedProcess:
        self._proc = subprocess.Popen(["timeout", "-k", "10", str(timeout_s), *argv], cwd=self.repo, env=venv_env(),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True)
        out, _ = self._proc.communicate()
        return subprocess.CompletedProcess(argv, self._proc.returncode, out)

    def _snakemake(self) -> str:
        # first status check after 2 s instead of the profile's 20: these jobs take seconds
        p = self._command([str(BIN / "snakemake"), "--profile", "workflow/profiles/slurm",
                           "--slurm-init-seconds-before-status-checks", "2"], timeout_s=900)
        if p.returncode != 0:
            raise AssertionError(f"snakemake --profile workflow/profiles/slurm exited {p.returncode}:\n"
                                 f"{p.stdout[-5000:]}")
        for job_id, _ in submitted(p.stdout):
            self.jobs[job_id] = scontrol_job(job_id)
        return p.stdout

    def _run(self) -> None:
        try:
            up = subprocess.run(["timeout", "-k", "10", "600", str(UP), "--nodes", "2"], capture_output=True,
                                text=True)
            if up.returncode == 3:
                self.skip_reason = f"slurm-wlm and munge are not installed and cannot be: {up.stderr.strip()}"
                return
            if up.returncode != 0:
                raise AssertionError(f"slurm-local-up.sh exited {up.returncode}:\n{up.stdout}\n{up.stderr}")
            copy_repo(self.repo)
            config = self.repo / "config" / "config.yaml"
            config.write_text(CONFIG)
            self.logs.append(self._snakemake())
            config.write_text(CONFIG.replace(*CHANGED_LR))
            self.logs.append(self._snakemake())
        except BaseException as e:  # handed to the test by wait()
            self.error = e
        finally:
            self.stop()
            if self.state_file is not None:
                self._save()

    def _save(self) -> None:
        state = {"repo": str(self.repo), "logs": self.logs, "jobs": {str(j): job for j, job in self.jobs.items()},
                 "skip_reason": self.skip_reason, "leftover": self.leftover,
                 "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}"}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.state_file)

    def stop(self) -> None:
        """Stop snakemake if it still runs, then the daemons; records any daemon left behind. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
        subprocess.run(["timeout", "-k", "10", "120", str(DOWN)], capture_output=True, text=True)
        # one name per pgrep: it matches nothing for a pattern longer than a process name (15 characters)
        left = [subprocess.run(["pgrep", "-a", "-x", name], capture_output=True, text=True).stdout.strip()
                for name in ("slurmctld", "slurmd", "slurmstepd")]
        self.leftover = "\n".join(x for x in left if x) or None


class RecordedSlurmRun:
    """The outcome of a SlurmPipelineRun started by another process (the pytest-xdist controller, see
    tests/conftest.py), read from its state file once the run has ended: the same attributes."""

    def __init__(self, state_file: Path):
        self.state_file = state_file

    def wait(self, timeout_s: float = 1800) -> RecordedSlurmRun:
        deadline = time.monotonic() + timeout_s
        while not self.state_file.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Slurm pipeline did not finish in {timeout_s:.0f} s ({self.state_file})")
            time.sleep(1)
        state = json.loads(self.state_file.read_text())
        if state["error"]:
            raise AssertionError(f"the Slurm pipeline failed: {state['error']}")
        self.repo, self.logs, self.skip_reason, self.leftover = (Path(state["repo"]), state["logs"],
                                                                 state["skip_reason"], state["leftover"])
        self.jobs = {int(j): job for j, job in state["jobs"].items()}
        return self
