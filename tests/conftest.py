"""The tests' fixtures and hooks; what the tests share besides them is the ``support`` package (tests/support/)."""
import os
from pathlib import Path

import pytest
from support.commands import CORA_RAW
from support.files import copy_repo
from support.graphs import ONE_WAY_FEATURES, SMALL_MAG, LazyPartitions
from support.metis import pymetis_library, system_metis_library

os.environ.setdefault("DGLBACKEND", "pytorch")


TIERS = ("unit", "slow", "e2e", "claims")
# The longest modules first (wall seconds on 2 cores, 2026-11-28): pytest-xdist hands whole modules to its workers in
# the order collected, so the last to run are short ones, not one long module on one worker while the other idles;
# test_slurm last, as its tests wait for the Slurm pipeline the session starts (slurm_pipeline, below).
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


@pytest.fixture(scope="session")
def cora_link_dir(cora_dir, tmp_path_factory):
    """Cora as a link-prediction graph (``support.link_graphs.with_edge_split``: 85/5/10 of its edges), canonical."""
    from support.link_graphs import save_link_graph

    from sylvie.data.graph import load_graph

    out = tmp_path_factory.mktemp("datasets") / "cora-link"
    save_link_graph(load_graph(cora_dir), out)
    return out


@pytest.fixture(scope="session")
def cora_link_partitions(cora_link_dir, tmp_path_factory):
    """``cora_link_dir`` cut by METIS: {parts: folder}, each cut the first time a test asks for it."""
    return LazyPartitions(cora_link_dir, tmp_path_factory.mktemp("cora-link-partitions"))


@pytest.fixture(scope="session")
def small_mag():
    """The tests' typed graph: the mag preset at ``support.graphs.SMALL_MAG`` (2,000 nodes of four types, four
    relations and their reverses), built once a session; tests read it, never change it."""
    from sylvie.config import section
    from sylvie.data.generated import generate_from

    return generate_from(section("dataset", SMALL_MAG), "mag")


@pytest.fixture(scope="session")
def small_mag_one_way():
    """``small_mag``'s nodes and edges with its relations one way only (``reverse_relations`` off), as a user's files
    hold them (reading files adds the reverses), and papers ``ONE_WAY_FEATURES`` wide, as ``write_files`` writes
    them (so their features, and the split drawn after them, are not ``small_mag``'s)."""
    from sylvie.config import section
    from sylvie.data.generated import generate_from

    knobs = {**SMALL_MAG, "features": ONE_WAY_FEATURES, "reverse_relations": False}
    return generate_from(section("dataset", knobs), "mag")


@pytest.fixture(scope="session")
def small_mag_dir(small_mag, tmp_path_factory):
    """``small_mag`` in canonical form (``save_graph``)."""
    from sylvie.data.graph import save_graph

    out = tmp_path_factory.mktemp("datasets") / "small-mag"
    save_graph(small_mag, out, source="synthetic")
    return out


@pytest.fixture(scope="session")
def small_mag_partitions(small_mag_dir, tmp_path_factory):
    """``small_mag`` cut by METIS: {parts: folder}, each number of parts cut the first time a test asks for it."""
    return LazyPartitions(small_mag_dir, tmp_path_factory.mktemp("small-mag-partitions"))


@pytest.fixture(scope="session")
def learnable_mag(tmp_path_factory):
    """The second typed graph, for the tests that assert learning after a few epochs (tests/test_typed_training.py,
    tests/test_typed_sampled_training.py): the mag preset at 6,000 nodes, easier than the preset (homophily 0.6,
    label noise 0.3, 8 venues; the preset's own 0.25 and 0.45 give R-GCN 48% over 349 venues) and larger than
    ``small_mag``, so that a few epochs show it. graph/ by `sylvie download`, p2/ by `sylvie partition` (2 parts);
    tests write their runs beside them, never into them."""
    from sylvie.cli import main

    root = tmp_path_factory.mktemp("learnable-mag")
    assert main(["download", "mag", "--source", "synthetic", "--preset", "mag", "--nodes", "6000", "--classes", "8",
                 "--features", "16", "--homophily", "0.6", "--label-noise", "0.3", "--out", str(root / "graph")]) == 0
    assert main(["partition", str(root / "graph"), "--out", str(root / "p2"), "--parts", "2"]) == 0
    return root


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
        from support.local_slurm import RecordedSlurmRun

        yield RecordedSlurmRun(tmp_path_factory.getbasetemp().parent / "slurm" / "state.json")
        return
    from support.local_slurm import SlurmPipelineRun

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
    from support.local_slurm import SlurmPipelineRun

    workdir = config._tmp_path_factory.getbasetemp() / "slurm"
    workdir.mkdir(exist_ok=True)
    config._slurm_pipeline = SlurmPipelineRun(workdir, state_file=workdir / "state.json").start()


def pytest_unconfigure(config):
    background = getattr(config, "_slurm_pipeline", None)
    if background is not None:
        background.stop()


@pytest.fixture(params=["32-bit", "64-bit"])
def metis_library(request):
    """Each METIS library sylvie calls: the system's 32-bit one, pymetis's 64-bit one."""
    return system_metis_library() if request.param == "32-bit" else pymetis_library()
