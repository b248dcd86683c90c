import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORA_RAW = REPO / "data" / "embedded" / "planetoid"
BIN = Path(sys.executable).parent
os.environ.setdefault("DGLBACKEND", "pytorch")


def venv_env(**extra) -> dict:
    """This environment with the venv's bin first on PATH (the pipeline's commands come from there)."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DGLBACKEND": "pytorch", **extra}


def run(cmd, check=True, timeout=900, **kw):
    """Run a command with the venv's bin first on PATH; returns the CompletedProcess."""
    env = venv_env(**kw.pop("env", {}))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}")
    return p


def torchrun(nproc, *args, **kw):
    return run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", str(nproc), *map(str, args)], **kw)


def ranks(nproc, *args, **kw):
    """``nproc`` ranks of ``args`` (a script, or ``--no-python sylvie ...``) as torchrun would start them, forked
    from one process that imported torch and sylvie once (tests/forked_ranks.py): for the tests whose subject is
    what the ranks compute. The tests of launching itself use torchrun (``torchrun``, `sylvie launch`)."""
    return run([sys.executable, str(REPO / "tests" / "forked_ranks.py"), str(nproc), *map(str, args)], **kw)


TIERS = ("unit", "slow", "e2e", "claims")
# The longest modules first (wall seconds on 2 cores, 2026-11-28): pytest-xdist hands whole modules to its workers in
# the order collected, so the last to run are short ones, not one long module on one worker while the other idles;
# test_slurm last, as its tests wait for the Slurm pipeline the session starts (conftest.slurm_pipeline).
LONGEST_FIRST = ("test_pipeline.py", "test_failures.py", "test_lowbit.py", "test_sampled_training.py",
                 "test_without_dgl.py", "test_cluster_bench.py", "test_message_passing.py",
                 "test_partitioned_evaluation.py", "test_empty_splits.py", "test_bad_input.py",
                 "test_resume_matching.py", "test_ogb_download.py", "test_sampled_minibatches.py", "test_exactness.py",
                 "test_damaged_arrow.py", "test_boundary_sampling.py", "test_lowbit_kernels.py", "test_resume.py")
LAST = ("test_slurm.py",)


def _module_order(item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST) + (name in LAST)


def pytest_collection_modifyitems(config, items):
    """Every test carries exactly one tier marker; a test without one (or with two) fails collection. A test marked
    ``gpu`` as well (besides its tier) is skipped, with the reason, where torch sees no CUDA device. Modules run
    longest first (``LONGEST_FIRST``), each whole."""
    items.sort(key=_module_order)  # stable: a module's tests keep their order
    wrong = [f"{item.nodeid} ({', '.join(t for t in TIERS if item.get_closest_marker(t)) or 'none'})"
             for item in items if sum(item.get_closest_marker(t) is not None for t in TIERS) != 1]
    if wrong:
        raise pytest.UsageError("each test needs exactly one tier marker (" + ", ".join(TIERS) + "):\n  "
                                + "\n  ".join(wrong))
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    reason = no_cuda_reason() if gpu else None
    for item in gpu if reason else ():
        item.add_marker(pytest.mark.skip(reason=reason))


def no_cuda_reason() -> str | None:
    """Why the ``gpu`` tests cannot run here (None: torch sees a CUDA device)."""
    import torch

    if torch.cuda.is_available():
        return None
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return f"needs a CUDA device: torch {torch.__version__} ({build}) sees none; run make gpu OUT=DIR on a GPU machine"


@pytest.fixture(scope="session")
def cora_dir(tmp_path_factory):
    """Cora in canonical form, built in-process from the embedded Planetoid files."""
    from sylvie.config import section
    from sylvie.data.registry import download

    out = tmp_path_factory.mktemp("datasets") / "cora"
    embedded = section("dataset", {"source": "planetoid", "raw_dir": str(CORA_RAW), "allow_download": False})
    download("cora", out, embedded)
    return out


@pytest.fixture(scope="session")
def cora_partitions(cora_dir, tmp_path_factory):
    """Cora cut by METIS into 1, 2 and 4 parts (in-process)."""
    from sylvie.partition.stage import partition_dataset

    base = tmp_path_factory.mktemp("partitions")
    dirs = {}
    for p in (1, 2, 4):
        dirs[p] = base / f"metis-p{p}"
        partition_dataset(cora_dir, dirs[p], p, "metis", 0, progress=False)
    return dirs


def refused_line(argv: list[str], capsys) -> str:
    """The last line ``sylvie <argv>`` (in-process) prints when it refuses its input: exit 2, no traceback."""
    from sylvie import cli

    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    return err[-1]


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut a file to ``keep`` of its bytes, as a write cut off part-way leaves it."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:int(len(data) * keep)])


def copy_repo(dst: Path) -> Path:
    """Copy the repository's files as a fresh clone has them (no data, results or venv) to ``dst``."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file() or src.is_symlink():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f, follow_symlinks=False)
    return dst


@pytest.fixture
def repo_copy(tmp_path):
    return copy_repo(tmp_path / "repo")


def _runs_slurm_tests(names) -> bool:
    return os.geteuid() == 0 and any(Path(str(n).split("::")[0]).name == "test_slurm.py" for n in names)


@pytest.fixture(scope="session", autouse=True)
def slurm_pipeline(request, tmp_path_factory):
    """tests/test_slurm.py's pipeline on a local Slurm, started in the background when the session begins (it
    waits on Slurm's polling far more than it computes), if those tests are selected and this is root. Under
    pytest-xdist the controller starts it (below) and a worker reads what it recorded."""
    if not _runs_slurm_tests(item.path for item in request.session.items):
        yield None
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from local_slurm import RecordedSlurmRun

        yield RecordedSlurmRun(tmp_path_factory.getbasetemp().parent / "slurm" / "state.json")
        return
    from local_slurm import SlurmPipelineRun

    background = SlurmPipelineRun(tmp_path_factory.mktemp("slurm")).start()
    yield background
    background.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """pytest-xdist's controller, once the first worker has collected: start the Slurm pipeline once for the whole
    session (not once per worker), recording its outcome in <basetemp>/slurm/state.json for the worker that runs
    tests/test_slurm.py."""
    config = node.config
    if getattr(config, "_slurm_pipeline", None) is not None or not _runs_slurm_tests(ids):
        return
    from local_slurm import SlurmPipelineRun

    workdir = config._tmp_path_factory.getbasetemp() / "slurm"
    workdir.mkdir(exist_ok=True)
    config._slurm_pipeline = SlurmPipelineRun(workdir, state_file=workdir / "state.json").start()


def pytest_unconfigure(config):
    background = getattr(config, "_slurm_pipeline", None)
    if background is not None:
        background.stop()


def pymetis_library():
    """The 64-bit METIS inside the pymetis wheel (sylvie.partition.metis_library)."""
    import glob

    import pymetis

    from sylvie.partition.metis_library import libraries

    (path,) = glob.glob(os.path.join(os.path.dirname(pymetis.__file__), "_internal*.so"))
    return next(lib for lib in libraries() if os.path.realpath(lib.path) == os.path.realpath(path))


def system_metis_library():
    """A 32-bit METIS installed on the system; the test is skipped where there is none (`make install` installs
    Debian's libmetis5 where it can: root and apt; CI always has it)."""
    from sylvie.partition.metis_library import libraries

    narrow = [lib for lib in libraries() if lib.bits == 32]
    if not narrow:
        pytest.skip("no 32-bit METIS library installed (apt-get install libmetis5)")
    return narrow[0]


@pytest.fixture(params=["32-bit", "64-bit"])
def metis_library(request):
    """Each METIS library sylvie calls: the system's 32-bit one, pymetis's 64-bit one."""
    return system_metis_library() if request.param == "32-bit" else pymetis_library()
