"""Issue 44, class 6: numbers beyond what the machine can hold are refused before work starts, with the estimate: a
synthetic graph with more edges than its nodes allow or larger than memory, a model whose parameters or layer
outputs cannot fit. The machine's available memory is set by the test (``memory_budget.available_bytes``) so that
the cases hold on any machine."""
import pytest
from support.commands import refused_line

from sylvie import memory_budget

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def cora_part(cora_partitions):
    return cora_partitions[1]


def test_more_edges_than_the_nodes_allow(tmp_path, capsys):
    last = refused_line(["download", "synthetic-dense", "--source", "synthetic", "--nodes", "100",
                         "--avg-degree", "150", "--out", str(tmp_path / "ds")], capsys)
    assert last == ("sylvie download: error: synthetic: avg_degree=150.0 is more than 100 nodes allow (a node has at "
                    "most nodes - 1 = 99 neighbours); lower avg_degree or raise nodes")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("structure", ["blocks", "nested"])
def test_a_synthetic_graph_larger_than_memory(tmp_path, capsys, monkeypatch, structure):
    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 10**9)
    # 10M nodes x 32 features (1.28 GB) and 100M edge ids (1.6 GB): at least 2.9 GB
    last = refused_line(["download", "synthetic-big", "--source", "synthetic", "--structure", structure,
                        "--nodes", "10000000", "--features", "32", "--avg-degree", "10",
                        "--out", str(tmp_path / "ds")], capsys)
    assert last == ("sylvie download: error: synthetic: 10,000,000 nodes x 32 features and 100,000,000 edges (both "
                    "directions) needs at least 2.9 GB of memory, more than the 1.0 GB this machine has available; "
                    "lower nodes, avg_degree or features")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags, said", [
    # (1433 + 1 + 7) x 10^6 parameters x 16 bytes; 2,708 rows x (1433 + 10^6 + 7) x 4 bytes
    (["--hidden", "1000000"], "gcn 2 x 1000000, its parameters and optimiser state (23.1 GB) and 2,708 rows' layer "
                              "outputs (10.8 GB) needs at least 33.9 GB"),
    (["--arch", "gat", "--heads", "4096", "--hidden", "256"], "gat 2 x 256, its parameters and optimiser state "
                                                              "(24.2 GB) and 2,708 rows' layer outputs (11.4 GB)"),
    # a sampled rank: the parameters alone (its minibatches' rows are not counted)
    (["--mode", "sampled", "--arch", "sage", "--hidden", "1000000", "--no-self-loop"],
     "sage 2 x 1000000, its parameters and optimiser state (46.1 GB) needs at least 46.1 GB"),
    # refused on the layer outputs alone, before a model of a million layers is built
    (["--layers", "1000000"], "gcn 1000000 x 16, its 2,708 rows' layer outputs needs at least 173.3 GB"),
])
def test_a_model_larger_than_memory(cora_part, tmp_path, capsys, monkeypatch, flags, said):
    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 12 * 10**9)
    last = refused_line(["train", "--partition", str(cora_part), "--out", str(tmp_path / "run"), *flags], capsys)
    assert last.startswith(f"sylvie train: error: training on rank 0: {said}"), last
    assert last.endswith("more than the 12.0 GB this machine has available; lower model.hidden (or heads, layers), "
                         "or cut the graph into more parts over more machines"), last
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("arch, heads", [("gcn", 1), ("sage", 1), ("gat", 3)])
def test_the_parameters_are_counted_as_built(arch, heads):
    from sylvie.config import section
    from sylvie.models.gnn import build_model
    from sylvie.train.memory_need import parameter_count

    model = section("model", {"arch": arch, "hidden": 24, "heads": heads, "layers": 3})
    assert parameter_count(model, 50, 7) == sum(p.numel() for p in build_model(model, 50, 7).parameters())


@pytest.mark.parametrize("flags, field", [
    (["--hidden", str(10**20)], "model options: invalid value for 'hidden'"),
    (["--mode", "sampled", "--arch", "sage", "--no-self-loop", "--fanouts", str(10**20), "5"],
     "sampling options: invalid value for 'fanouts.0'"),
    (["--mode", "sampled", "--arch", "sage", "--no-self-loop", "--batch-size", str(2**31)],
     "sampling options: invalid value for 'batch_size'"),
])
def test_an_integer_beyond_its_c_type(cora_part, tmp_path, capsys, flags, field):
    """Sizes reach numpy, numba and torch as 64-bit integers (and METIS as 32-bit ones): beyond 2^31 - 1 they are
    refused by the schema, naming the field, where torch or numba failed with a C traceback or an OverflowError."""
    last = refused_line(["train", "--partition", str(cora_part), "--out", str(tmp_path / "run"), *flags], capsys)
    assert last.startswith(f"sylvie train: error: sylvie {field}: "), last
    assert "greater than the maximum of 2147483647" in last, last
    assert list(tmp_path.iterdir()) == []


def test_the_ranks_of_one_machine_share_its_memory(cora_part, monkeypatch):
    """4 ranks of 3.4 GB each on a machine with 12 GB available: refused, where one rank fits."""
    from sylvie.config import section
    from sylvie.errors import SylvieError
    from sylvie.formats.partition_manifest import read_manifest
    from sylvie.train.memory_need import check_training_fits

    monkeypatch.setattr(memory_budget, "available_bytes", lambda: 12 * 10**9)
    model, manifest = section("model", {"hidden": 100000}), read_manifest(cora_part)  # 2.3 GB + 1.1 GB
    check_training_fits(model, manifest, 0, sampled=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with pytest.raises(SylvieError, match=r"x 4 ranks on this machine needs at least 13\.\d GB of memory"):
        check_training_fits(model, manifest, 0, sampled=False)


def _cgroup_tree(root, files: dict) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_budget_reads_this_processs_cgroups_v2_and_v1(tmp_path):
    """A Slurm job's limit sits on the job's cgroup, the process in a step's task below it; cgroup v1 keeps the
    memory controller on its own mount and writes no limit as a huge number."""
    from sylvie.memory_budget import cgroup_limits

    v2, job = tmp_path / "v2", "system.slice/slurmstepd.scope/job_7"
    _cgroup_tree(v2, {f"{job}/memory.max": "8000000000\n", f"{job}/memory.current": "3000000000\n",
                      f"{job}/step_0/task_0/memory.max": "max\n", f"{job}/step_0/task_0/memory.current": "1\n",
                      "memory.max": "max\n"})
    (tmp_path / "self-v2").write_text(f"0::/{job}/step_0/task_0\n")
    assert cgroup_limits(tmp_path / "self-v2", v2) == [(8_000_000_000, 3_000_000_000)]

    v1 = tmp_path / "v1"
    _cgroup_tree(v1, {"memory/slurm/uid_0/job_7/memory.limit_in_bytes": "4000000000\n",
                      "memory/slurm/uid_0/job_7/memory.usage_in_bytes": "1000000000\n",
                      "memory/slurm/uid_0/memory.limit_in_bytes": "9223372036854771712\n",
                      "memory/slurm/uid_0/memory.usage_in_bytes": "5\n",
                      "memory/memory.limit_in_bytes": "2000000000\n", "memory/memory.usage_in_bytes": "1500000000\n"})
    (tmp_path / "self-v1").write_text("12:pids:/slurm/uid_0/job_7\n4:memory:/slurm/uid_0/job_7\n0::/\n")
    assert cgroup_limits(tmp_path / "self-v1", v1) == [(4_000_000_000, 1_000_000_000), (2_000_000_000, 1_500_000_000)]

    # a path this process cannot see (its own cgroup namespace): the mount's top; no file at all: no limit
    (tmp_path / "self-hidden").write_text("0::/elsewhere/job_9\n")
    _cgroup_tree(tmp_path / "v2b", {"memory.max": "6000000000\n", "memory.current": "0\n"})
    assert cgroup_limits(tmp_path / "self-hidden", tmp_path / "v2b") == [(6_000_000_000, 0)]
    assert cgroup_limits(tmp_path / "absent", v2) == []


@pytest.mark.parametrize("member", ["v1-memory-joined-with-cpuacct", "v1-joined-mount-named-otherwise",
                                    "v2-namespace-says-root", "v2-path-above-the-namespace", "v2-step-below-the-job",
                                    "v1-unlimited-everywhere", "v2-max-everywhere", "limit-is-a-folder",
                                    "limit-not-a-number", "usage-unreadable", "hybrid-memory-on-v1",
                                    "no-proc-cgroup", "no-memory-controller", "v2-page-cache-reclaimable",
                                    "v1-page-cache-reclaimable", "stat-unreadable"])
def test_the_budget_finds_the_limit_whatever_the_cgroup_layout(tmp_path, member):
    """Issue 57, class 5: the cgroup limits of this process, in the layouts a machine, a container or a Slurm job
    gives (fake ``/proc/self/cgroup`` and ``/sys/fs/cgroup`` trees): the limit is found where there is one, no limit
    where there is none, its use counted less the file cache the kernel reclaims (``inactive_file``), and what
    cannot be read is passed over (a limit without its usage counts as unused)."""
    from sylvie.memory_budget import cgroup_limits

    root, proc = tmp_path / "cgroup", tmp_path / "self-cgroup"
    job = "slurm/uid_0/job_7"
    v1 = {f"{job}/memory.limit_in_bytes": "4000000000\n", f"{job}/memory.usage_in_bytes": "1000000000\n",
          f"{job}/step_0/memory.limit_in_bytes": "9223372036854771712\n", f"{job}/step_0/memory.usage_in_bytes": "7\n"}
    expected = [(4_000_000_000, 1_000_000_000)]
    if member == "v1-memory-joined-with-cpuacct":
        _cgroup_tree(root / "memory,cpuacct", v1)
        proc.write_text(f"3:memory,cpuacct:/{job}/step_0\n0::/\n")
    elif member == "v1-joined-mount-named-otherwise":  # the mount's name lists them in another order
        _cgroup_tree(root / "cpuacct,memory", v1)
        proc.write_text(f"3:memory,cpuacct:/{job}/step_0\n")
    elif member == "v2-namespace-says-root":  # a container: its cgroup is the mount's top
        _cgroup_tree(root, {"memory.max": "2000000000\n", "memory.current": "500\n"})
        proc.write_text("0::/\n")
        expected = [(2_000_000_000, 500)]
    elif member == "v2-path-above-the-namespace":  # a cgroup outside the namespace reads as ../..
        _cgroup_tree(root, {"memory.max": "2000000000\n", "memory.current": "500\n",
                            "job_7/memory.max": "1000\n", "job_7/memory.current": "0\n"})
        proc.write_text("0::/../job_7\n")
        expected = [(2_000_000_000, 500)]
    elif member == "v2-step-below-the-job":
        _cgroup_tree(root, {f"{job}/memory.max": "4000000000\n", f"{job}/memory.current": "1000000000\n",
                            f"{job}/step_0/user/task_0/memory.max": "max\n", "memory.max": "max\n"})
        proc.write_text(f"0::/{job}/step_0/user/task_0\n")
    elif member in ("v1-unlimited-everywhere", "v2-max-everywhere"):
        v2 = member.startswith("v2")
        name, text = ("memory.max", "max\n") if v2 else ("memory.limit_in_bytes", "9223372036854771712\n")
        _cgroup_tree(root if v2 else root / "memory", {f"{job}/{name}": text, name: text})
        proc.write_text(f"0::/{job}\n" if v2 else f"4:memory:/{job}\n")
        expected = []
    elif member == "limit-is-a-folder":
        _cgroup_tree(root, {f"{job}/memory.max/x": "", "memory.max": "3000\n", "memory.current": "1\n"})
        proc.write_text(f"0::/{job}\n")
        expected = [(3000, 1)]
    elif member == "limit-not-a-number":
        _cgroup_tree(root, {f"{job}/memory.max": "lots\n", "memory.max": "3000\n", "memory.current": "1\n"})
        proc.write_text(f"0::/{job}\n")
        expected = [(3000, 1)]
    elif member == "usage-unreadable":
        _cgroup_tree(root, {f"{job}/memory.max": "3000\n"})
        proc.write_text(f"0::/{job}\n")
        expected = [(3000, 0)]
    elif member == "hybrid-memory-on-v1":  # systemd's hybrid layout: the controllers on v1, an empty v2 beside
        _cgroup_tree(root / "memory", v1)
        _cgroup_tree(root / "unified", {f"{job}/cgroup.procs": "1\n"})
        proc.write_text(f"12:pids:/{job}\n4:memory:/{job}/step_0\n1:name=systemd:/{job}\n0::/{job}\n")
    elif member == "no-proc-cgroup":
        _cgroup_tree(root, {"memory.max": "3000\n", "memory.current": "1\n"})
        expected = []
    elif member == "no-memory-controller":  # v1 without its memory controller mounted
        proc.write_text(f"12:pids:/{job}\n")
        expected = []
    elif member == "v2-page-cache-reclaimable":  # 15 of 16 GB in use, 12 of them file cache the kernel reclaims
        _cgroup_tree(root, {f"{job}/memory.max": "16000000000\n", f"{job}/memory.current": "15000000000\n",
                            f"{job}/memory.stat": "anon 3000000000\nfile 12000000000\nactive_file 1000000000\n"
                                                  "inactive_file 11000000000\n"})
        proc.write_text(f"0::/{job}\n")
        expected = [(16_000_000_000, 4_000_000_000)]
    elif member == "v1-page-cache-reclaimable":  # v1's hierarchical count (total_), not the cgroup's own
        _cgroup_tree(root / "memory", {**v1, f"{job}/memory.stat": "cache 900000000\ninactive_file 1\n"
                                                                   "total_inactive_file 600000000\n"})
        proc.write_text(f"4:memory:/{job}/step_0\n")
        expected = [(4_000_000_000, 400_000_000)]
    elif member == "stat-unreadable":  # no memory.stat (or a folder there): the usage as it is
        _cgroup_tree(root, {f"{job}/memory.max": "3000\n", f"{job}/memory.current": "2000\n",
                            f"{job}/memory.stat/x": ""})
        proc.write_text(f"0::/{job}\n")
        expected = [(3000, 2000)]
    assert cgroup_limits(proc, root) == expected
