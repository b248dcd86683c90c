"""`sylvie launch`: where a run's ranks go (geometry), what it asks Slurm for, and which launcher it picks."""
import pytest

from sylvie.errors import SylvieError
from sylvie.launch.torchrun import launch_argv, plan_geometry, slurm_resources, srun_argv, thread_env, where_to_launch

pytestmark = pytest.mark.unit


def test_geometry_fills_nodes_up_to_ranks_per_node():
    assert plan_geometry(4).nodes == 1  # 0 = one node per run
    g = plan_geometry(16, ranks_per_node=4, gpus_per_node=4, cpus_per_rank=8)
    assert (g.nodes, g.ranks_per_node, g.cpus_per_task, g.gpus_per_node) == (4, 4, 32, 4)
    assert plan_geometry(2, ranks_per_node=1).nodes == 2
    assert plan_geometry(1, ranks_per_node=4).nodes == 1
    assert plan_geometry(4, nodes=2).ranks_per_node == 2


@pytest.mark.parametrize("kwargs, words", [
    (dict(ranks=5, ranks_per_node=4), ["5 ranks do not split evenly over 2 nodes", "ranks_per_node"]),
    (dict(ranks=8, ranks_per_node=4, gpus_per_node=2), ["4 ranks per node", "gpus_per_node is 2"]),
    (dict(ranks=4, nodes=5), ["nodes must be between 1 and the number of ranks (4)"]),
    (dict(ranks=0), ["at least 1 rank"]),
])
def test_bad_geometry_is_a_clear_error(kwargs, words):
    with pytest.raises(SylvieError) as e:
        plan_geometry(**kwargs, where="run gcn-p4 with config launch")
    assert all(w in str(e.value) for w in words) and "run gcn-p4" in str(e.value)


def test_slurm_resources_one_task_per_node():
    multi = slurm_resources(plan_geometry(8, ranks_per_node=4, gpus_per_node=4, cpus_per_rank=2))
    assert multi == {"nodes": 2, "tasks": 2, "cpus_per_task": 8, "mpi": "srun", "gres": "gpu:4", "gpu": None,
                     "tasks_per_gpu": 0}
    # the plugin rejects MPI jobs of one task; a one-node job is a plain job whose jobstep sruns one task
    single = slurm_resources(plan_geometry(4, gpus_per_node=4))
    assert (single["mpi"], single["tasks"], single["gres"], single["gpu"]) == (None, 1, None, 4)
    cpu = slurm_resources(plan_geometry(2, ranks_per_node=1))
    assert (cpu["mpi"], cpu["tasks"], cpu["gres"], cpu["gpu"]) == ("srun", 2, None, None)


def test_launcher_follows_the_environment():
    assert where_to_launch({}) == "here"
    assert where_to_launch({"SLURM_JOB_ID": "7"}) == "slurm"  # batch script, or the jobstep's stripped shell
    assert where_to_launch({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}) == "slurm-step"
    cmd = ["sylvie", "train", "--partition", "p"]
    # sylvie's own command: its ranks forked from one process that has imported what they need (launch.launcher)
    here = launch_argv(plan_geometry(4), cmd, env={})
    assert here[1:] == ["-m", "sylvie.launch.forked_ranks", "--ranks", "4", "--", *cmd]
    # torchrun, run by sylvie.launch.supervise (which records how each failed rank ended): asked for, or for a command
    # that is not sylvie's
    for launcher, command in (("torchrun", cmd), ("fork", ["python", "my_script.py"])):
        here = launch_argv(plan_geometry(4), command, env={}, launcher=launcher)
        assert here[1:7] == ["-m", "sylvie.launch.supervise", "--standalone", "--nproc-per-node", "4", "--no-python"]
        assert here[7:] == command
    assert launch_argv(plan_geometry(1), cmd, env={"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"},
                       launcher="torchrun")[3] == "--standalone"
    srun = launch_argv(plan_geometry(4, nodes=2, gpus_per_node=2), cmd, env={"SLURM_JOB_ID": "7"})
    assert srun[:4] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1"] and "--gres=gpu:2" in srun
    assert srun[srun.index("launch"):srun.index("--")] == ["launch", "--slurm-task", "--ranks", "4", "--nodes", "2",
                                                           "--gpus-per-node", "2", "--cpus-per-rank", "1",
                                                           "--allocator", "auto"]
    assert srun[-4:] == cmd and srun == srun_argv(plan_geometry(4, nodes=2, gpus_per_node=2), cmd)


def test_several_nodes_outside_an_allocation_is_an_error():
    with pytest.raises(SylvieError, match="2 nodes were asked for, but this is not a Slurm allocation"):
        launch_argv(plan_geometry(4, nodes=2), ["x"], env={})


def test_threads_are_split_among_local_ranks_and_follow_slurm_cpus():
    g = plan_geometry(4, ranks_per_node=2, cpus_per_rank=3)
    assert thread_env(g, threads=8, slurm_task=False, env={})["OMP_NUM_THREADS"] == "2"
    assert thread_env(g, threads=2, slurm_task=False, env={})["OMP_NUM_THREADS"] == "1"
    assert thread_env(g, threads=8, slurm_task=True, env={})["OMP_NUM_THREADS"] == "3"
    step = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_CPUS_PER_TASK": "12"}  # inside the jobstep's srun -n1
    assert thread_env(plan_geometry(4), threads=4, slurm_task=False, env=step)["OMP_NUM_THREADS"] == "3"


def test_a_command_that_does_not_exist_is_a_clear_error():
    from sylvie.launch.torchrun import launch

    with pytest.raises(SylvieError, match="command not found: no-such-program-here"):
        launch(plan_geometry(2), ["no-such-program-here", "--x"])
