"""What every benchmark shares: running a command (bounded in time; a failure names the command and shows its last
lines), the synthetic graph and its partition (made once in a work directory, reused after), the provenance line
printed under every table (commit, machine, date, versions) and ``--record``'s dated record files.

The scripts are run as ``python benchmarks/X.py``, so this directory is on ``sys.path``: ``from common import ...``.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

BIN = Path(sys.executable).parent  # the environment's `sylvie`, `torchrun`, ...
REPO = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT_S = 4 * 3600  # a bound, not an estimate: no stage of these benchmarks should come near it
TAIL_LINES = 20


class CommandFailed(SystemExit):
    """A command exited non-zero or ran past its bound: the message names it and ends with its last lines."""


@dataclass(frozen=True)
class Ran:
    seconds: float  # wall time, start to exit
    max_rss_kib: int  # the kernel's peak RSS of the command (ru_maxrss from wait4: its largest process), KiB
    peak_sample: float  # the largest value `sample` returned (0 without one)
    output: str  # stdout and stderr, interleaved as written


def run(cmd: Sequence, *, log: str | Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
        sample: Callable[[int], float] | None = None, sample_every_s: float = 0.2) -> Ran:
    """Run ``cmd`` (items made ``str``) with this environment's bin first on PATH, its stdout and stderr into ``log``
    (a temporary file when None). Every ``sample_every_s`` seconds ``sample(pid)`` is called (e.g. to add up a
    process tree's memory). The command runs in a session of its own: after ``timeout_s`` seconds, or on Ctrl-C,
    its whole process group is stopped. Raises :class:`CommandFailed` on a non-zero exit or a timeout."""
    cmd = [str(c) for c in cmd]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    keep = log is not None
    if log is None:
        fd, log = tempfile.mkstemp(prefix="sylvie-bench-", suffix=".log")
        os.close(fd)
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    done, timed_out, peak = threading.Event(), threading.Event(), [0.0]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def on_timeout():
        timed_out.set()
        _stop_group(proc.pid)

    def sampler():
        while not done.wait(sample_every_s):
            try:
                peak[0] = max(peak[0], sample(proc.pid))
            except Exception:  # noqa: BLE001 - a process ended between listing and reading: the next sample
                pass

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    if sample is not None:
        threading.Thread(target=sampler, daemon=True).start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # Ctrl-C: the command's processes go too
        _stop_group(proc.pid)
        proc.wait()
        raise
    finally:
        timer.cancel()
        done.set()
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text(errors="replace")
    if not keep:
        log.unlink()
    if timed_out.is_set() or proc.returncode:
        why = f"ran past its bound of {timeout_s:g} s and was stopped" if timed_out.is_set() else \
            f"exited {proc.returncode} after {seconds:.1f} s"
        raise CommandFailed(f"benchmark command {why}: {shlex.join(cmd)}\n"
                            f"its last lines{f' (all of them: {log})' if keep else ''}:\n{tail(output)}")
    return Ran(seconds, usage.ru_maxrss, peak[0], output)


def _stop_group(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM to the process group ``pid`` leads, SIGKILL to what is left after ``grace_s``."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of ``text`` (progress bars' carriage returns split lines), indented."""
    last = [line.rstrip()[:300] for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"  | {line}" for line in last) if last else "  (no output)"


def sylvie(*args, log: str | Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Ran:
    """``sylvie ARGS...`` of this environment (see :func:`run`)."""
    return run([BIN / "sylvie", *args], log=log, timeout_s=timeout_s)


def synthetic_graph(path: str | Path, *, check_params: bool = True, **params) -> Path:
    """``sylvie download synthetic --out PATH`` with ``params`` as flags (``avg_degree=20`` -> ``--avg-degree 20``;
    only those given, the rest are the generator's defaults), unless ``PATH`` already holds a graph. A graph made
    earlier with other parameters is refused (``check_params``), rather than measured under the wrong title."""
    path = Path(path)
    meta = path / "meta.json"
    if not meta.exists():
        flags = [x for k, v in params.items() for x in (f"--{k.replace('_', '-')}", v)]
        sylvie("download", "synthetic", "--out", path, *flags, log=path.parent / f"{path.name}.log")
    elif check_params:
        made = json.loads(meta.read_text()).get("params", {})
        differ = {k: (made.get(k), v) for k, v in params.items() if k != "preset" and made.get(k) != v}
        if differ:
            raise SystemExit(f"{path} holds a graph made with other parameters ("
                             + ", ".join(f"{k} {a} there, {b} asked" for k, (a, b) in differ.items())
                             + "): remove it, or give another work directory")
    return path


def partition(graph: str | Path, out: str | Path, *, parts: int, method: str | None = None) -> Path:
    """``sylvie partition GRAPH --out OUT --parts P [--method M]``, unless ``OUT`` already holds a partition of that
    graph into ``parts`` parts (one of another graph, or another part count, is refused)."""
    out = Path(out)
    manifest = out / "manifest.json"
    if not manifest.exists():
        sylvie("partition", graph, "--out", out, "--parts", parts, *(["--method", method] if method else []),
               log=out.parent / f"{out.name}.log")
    else:
        m = json.loads(manifest.read_text())
        meta = json.loads((Path(graph) / "meta.json").read_text())
        if m.get("dataset_fingerprint") != meta.get("fingerprint") or m.get("num_parts") != parts or (
                method and m.get("method") != method):
            raise SystemExit(f"{out} holds a partition of another graph, part count or method than {graph} in "
                             f"{parts} parts{f' ({method})' if method else ''}: remove it, or give another work "
                             "directory")
    return out


def synthetic_partition(work: str | Path, *, parts: int, method: str | None = None, part_name: str | None = None,
                        **graph_params) -> tuple[Path, Path]:
    """The synthetic graph ``WORK/graph`` (:func:`synthetic_graph`) and its partition ``WORK/metis-pPARTS`` (or
    ``part_name``), each made once: (graph, partition)."""
    work = Path(work)
    graph = synthetic_graph(work / "graph", **graph_params)
    return graph, partition(graph, work / (part_name or f"metis-p{parts}"), parts=parts, method=method)


def steady_medians(records, keys) -> dict:
    """Each field of ``keys`` as its median over the epochs after the first (every epoch if there is one): the
    steady state of a run's ``EpochRecord``s, without the first epoch's start-up."""
    steady = records[1:] or records
    return {k: statistics.median(r.value(k) for r in steady) for k in keys}


def embedded_cora(work: str | Path):
    """Cora from the repository's embedded Planetoid files, in canonical form under ``WORK/cora`` (written once),
    loaded (``sylvie.data.graph.Graph``)."""
    from sylvie.config import section
    from sylvie.data.graph import load_graph
    from sylvie.data.registry import download

    cora_dir = Path(work) / "cora"
    if not (cora_dir / "meta.json").exists():
        download("cora", cora_dir, section("dataset", {"source": "planetoid", "allow_download": False,
                                                       "raw_dir": str(REPO / "data/embedded/planetoid")}))
    return load_graph(cora_dir)


@dataclass(frozen=True)
class WholeGraph:
    """A canonical graph as a plain DGL user loads it, for the baselines: everything in one process."""
    graph: object  # dgl.DGLGraph
    x: object  # torch.Tensor: features
    y: object  # torch.Tensor: labels
    train: object  # torch.Tensor: training node ids
    classes: int


def whole_graph(graph_dir: str | Path) -> WholeGraph:
    """``graph_dir`` (a canonical graph) as ``dgl.graph`` of its edges, its features, labels and training ids."""
    import dgl
    import torch

    from sylvie.data.graph import load_graph

    g = load_graph(graph_dir)
    dg = dgl.graph((torch.from_numpy(g.src.copy()), torch.from_numpy(g.dst.copy())), num_nodes=g.num_nodes)
    return WholeGraph(dg, torch.from_numpy(g.features), torch.from_numpy(g.labels),
                      torch.from_numpy(g.train_mask).nonzero().squeeze(1), g.num_classes)


# ---------------------------------------------------------------------------------------------------- provenance

def _git(*args: str) -> str | None:
    try:  # --no-optional-locks: reading the state never takes the index lock (a concurrent git keeps working)
        p = subprocess.run(["git", "--no-optional-locks", "-C", str(REPO), *args], capture_output=True, text=True,
                           timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def commit() -> str:
    """The checkout's short commit, ``+dirty`` when tracked files differ from it; ``unknown`` outside git."""
    sha = _git("rev-parse", "--short", "HEAD")
    if sha is None:
        return "unknown"
    return sha + ("+dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")


@cache
def machine() -> str:
    """CPU model, cores, RAM and GPUs, e.g. ``AMD EPYC 7B13, 2 cores, 23.4 GiB RAM, no GPU``."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = " ".join(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    try:
        ram = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        ram = "RAM unknown"
    return f"{cpu}, {os.cpu_count()} cores, {ram}, {gpus()}"


def gpus() -> str:
    names = []
    if shutil.which("nvidia-smi"):
        try:
            p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=20)
            names = [n.strip() for n in p.stdout.splitlines() if n.strip()] if p.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            pass
    if not names and "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if not names:
        return "no GPU"
    counted = {n: names.count(n) for n in names}
    return "GPU " + ", ".join(f"{c} x {n}" if c > 1 else n for n, c in counted.items())


def versions() -> str:
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "not installed"
    return f"Python {platform.python_version()}, torch {torch_version}"


def provenance() -> str:
    """One line: where and when a table was measured."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"Measured at commit {commit()} on {machine()}; {now}; {versions()}."


# ------------------------------------------------------------------------------------------------------ records

RECORDS = REPO / "benchmarks" / "records"
_ours: set[Path] = set()  # the records this process created: later tables of the same run are appended to them


def machine_name() -> str:
    """A record's machine in its file name: the GPUs' model where there are any (``h200``, ``4xh100``), else the
    cores and whether they are a virtual machine's (``2core-vm``, ``16core``)."""
    import re

    names = gpus()
    if names != "no GPU":
        first = names.removeprefix("GPU ").split(",")[0].strip()
        count, _, model = first.rpartition(" x ") if " x " in first else ("", "", first)
        found = re.findall(r"\b([A-Z]+\d+[A-Za-z]*)\b", model.replace("NVIDIA", ""))
        slug = (found[0] if found else re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")).lower()
        return f"{count}x{slug}" if count else slug
    try:
        virtual = " hypervisor " in f" {Path('/proc/cpuinfo').read_text().replace(chr(10), ' ')} "
    except OSError:
        virtual = False
    return f"{os.cpu_count()}core{'-vm' if virtual else ''}"


def record_path(topic: str, day: datetime.date | None = None) -> Path:
    """``benchmarks/records/<day>_<topic>_<machine>.md``, ``day`` today (UTC) by default."""
    day = day or datetime.datetime.now(datetime.timezone.utc).date()
    return RECORDS / f"{day.isoformat()}_{topic}_{machine_name()}.md"


def add_record_option(ap, topic: str) -> None:
    """``--record``: the script's tables also go into a new dated record (see :func:`publish`)."""
    ap.add_argument("--record", action="store_true",
                    help=f"also write the tables to a new record, benchmarks/records/<today>_{topic}_<machine>.md "
                         "(an existing record is never overwritten)")


def publish(table: str, record: str | None = None, *, intro: str | None = None) -> None:
    """Print ``table`` with the provenance line under it; with ``record`` (a topic), also write both to the dated
    record :func:`record_path` names. A record is written once: the first table of a run creates it (with the
    command line, and ``intro`` under its heading), later tables of the same run are appended, and a record that
    existed before the run is refused (the table is printed all the same)."""
    text = f"{table}\n\n{provenance()}"
    print(text, flush=True)
    if not record:
        return
    path = record_path(record)
    if path in _ours:
        with open(path, "a") as f:
            f.write(f"\n{text}\n")
        return
    if path.exists():
        raise SystemExit(f"{path} exists: a record is never rewritten; the table above is not recorded (rename "
                         "or date the earlier record otherwise if both should stay)")
    command = shlex.join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    head = f"Written by `{command}`.\n\n# {record} ({machine_name()}, {path.name[:10]})\n\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(head + (f"{intro}\n\n" if intro else "") + f"{text}\n")
    try:
        os.link(tmp, path)  # fails if another process made the record meanwhile: never replaced
    except FileExistsError:
        raise SystemExit(f"{path} exists: a record is never rewritten; the table above is not recorded") from None
    finally:
        tmp.unlink()
    _ours.add(path)
