# Paths shared by the rules, derived from the resolved runs; how a run's ranks are launched.

from sylvie.formats.vip_file import minibatch_seeds, seeds_id
from sylvie.memory_budget import PARTITION_BYTES_PER_NODE, runs_alone
from sylvie.report.plot_names import plots_of_tasks


def run_dirs():
    return [f"results/{r.name}/seed{s}" for r in RUNS.values() for s in r.train.seeds]


def trained_runs():
    """What each run's train job writes once its seeds are trained and evaluated (their files are in run_dirs)."""
    return [f"results/{name}/seeds.json" for name in RUNS]


def partition_dir(run_name):
    r = RUNS[run_name]
    return f"data/partitions/{r.dataset}/{r.partition_id}"


# every partition the runs read, by dataset and directory name: its settings, balance resolved to the run's regime
PARTITIONS = {(r.dataset, r.partition_id): r.partition for r in RUNS.values()}


def partition_flags(wc):
    """The flags of `sylvie partition` that cut partition `wc.partition` of `wc.dataset`."""
    if (wc.dataset, wc.partition) not in PARTITIONS:
        known = ", ".join(f"data/partitions/{d}/{p}" for d, p in PARTITIONS)
        raise ValueError(f"data/partitions/{wc.dataset}/{wc.partition}: no run of the config reads this partition "
                         f"(the runs read {known})")
    return cli_arguments("partition", PARTITIONS[(wc.dataset, wc.partition)])


def partition_threads(wildcards):
    """1, or every core for a graph so large that two partitions at once would not fit in memory (the products preset
    at full size: 16 GB each on a 24 GB machine)."""
    nodes = num_nodes_before_download(wildcards.dataset, dataset_options(config, wildcards.dataset),
                                      f"data/datasets/{wildcards.dataset}")
    return workflow.cores if runs_alone(nodes * PARTITION_BYTES_PER_NODE) else 1


def vip_name(r):
    """The VIP analysis run `r` reads: its sampling setting, and for link prediction its negatives."""
    return f"{r.vip_id}{seeds_id(minibatch_seeds(r.train.task, r.link))}"


def vip_dir(run_name):
    r = RUNS[run_name]
    return f"data/vip/{r.dataset}/{r.partition_id}/{vip_name(r)}"


def vip_sampling_flags(wc):
    """The flags of `sylvie vip` for analysis `wc` (fanouts and batch size of the runs that read it; a link
    prediction run's task and negatives)."""
    for r in RUNS.values():
        if (r.dataset, r.partition_id, vip_name(r)) == (wc.dataset, wc.partition, f"f{wc.fanouts}-b{wc.batch}"):
            flags = cli_arguments("sampling", r.sampling, skip=("prefetch", "remote_bits"))
            if r.train.task == "link":
                flags = f'{flags} --task link {cli_arguments("link", r.link, skip=("decoder", "loss", "pair_bits"))}'
            return flags
    raise ValueError(f"data/vip/{wc.dataset}/{wc.partition}/f{wc.fanouts}-b{wc.batch}: no run of the config reads "
                     f"this VIP analysis")


def train_inputs(wc):
    """The partition; for a sampled run also its VIP analysis (computed once per partition and sampling setting); where
    the job evaluates its model on the whole graph, the dataset."""
    inputs = {"partition": partition_dir(wc.run)}
    if RUNS[wc.run].sampled:
        inputs["vip"] = vip_dir(wc.run)
    if not partitioned_evaluation(wc.run):
        inputs["dataset"] = dataset_dir(wc.run)
    return inputs


def train_options(run_name):
    """The flags of `sylvie train` for a run. A full-graph run gets no sampling or cache flags (nor --mode), a sampled
    run no comm flags, so that changing one regime's settings reruns only its runs."""
    r = RUNS[run_name]
    flags = [cli_arguments("model", r.model)]
    if r.sampled:  # the halo exchange settings (comm) do not apply
        flags += [cli_arguments("train", r.train, skip=("seeds",)), cli_arguments("sampling", r.sampling),
                  cli_arguments("cache", r.cache), cli_arguments("features", r.features), f"--vip {vip_dir(run_name)}"]
    else:
        flags += [cli_arguments("train", r.train, skip=("seeds", "mode")), cli_arguments("comm", r.comm)]
    if r.train.task == "link":  # link prediction's settings; a node-classification run gets none
        flags.append(cli_arguments("link", r.link))
    return " ".join(flags)


def dataset_dir(run_name):
    return f"data/datasets/{RUNS[run_name].dataset}"


def geometry(run_name):
    """How the run's ranks are placed on Slurm nodes (config `launch`)."""
    return PLAN.geometry(run_name)



def partitioned_evaluation(run_name):
    """Whether the run's models are evaluated partition-parallel, one rank per part (config evaluate.mode; auto:
    when the dataset has more than evaluate.partitioned_above nodes, known before it is downloaded)."""
    r = RUNS[run_name]
    if r.evaluate.mode != "auto":
        return r.evaluate.mode == "partitioned"
    return num_nodes_before_download(r.dataset, dataset_options(config, r.dataset),
                                     dataset_dir(run_name)) > r.evaluate.partitioned_above


def evaluation_flags(wildcards, input, output):
    """How the training job evaluates the model it keeps into eval.json, as `sylvie evaluate` would in a job of its
    own: on the whole graph in rank 0, or partition-parallel on the job's ranks (config evaluate.mode)."""
    flags = f"--eval-out results/{wildcards.run}/seed{{seed}}/eval.json"  # each seed's ({seed}: sylvie train's)
    return flags if partitioned_evaluation(wildcards.run) else f"{flags} --eval-dataset {input.dataset}"


# --- Starting a run's ranks (the train rule, which also evaluates). One place for the launch line and for what a
# Slurm job of it requests; the launch line reads the job's resources, so that a `--set-resources` override of
# `nodes` changes the allocation and the launch together.

# `sylvie launch` here forks the ranks from one process (launch.launcher fork) or runs torchrun --standalone, with
# the rule's threads split among the ranks; in a Slurm job, srun of
# one torchrun per node with c10d rendezvous on the first (sylvie/launch/torchrun.py). $PPID is the Snakemake that
# runs the rule's shell: if it is killed, the ranks stop instead of running on as orphans.
LAUNCH_LINE = (
    "sylvie launch --watch-pid $PPID --ranks {params.parts} --nodes {resources.nodes} --gpus-per-node "
    "{resources.gpus_per_node} --cpus-per-rank {resources.cpus_per_rank} --threads {threads} "
    f"--allocator {LAUNCH['allocator']} --launcher {LAUNCH['launcher']} -- "
)

# what the Slurm executor reads (nodes, tasks, cpus_per_task, mpi, gres, gpu, tasks_per_gpu), then what the launch
# line reads
LAUNCH_RESOURCES = [*slurm_resources(plan_geometry(1)), "gpus_per_node", "cpus_per_rank"]


def launched(command):
    """A rule's shell: ``command`` (a template) run as the ranks of a run; the rule gives ``params.parts`` (its ranks)
    and ``launch_resources()``."""
    return LAUNCH_LINE + command


def launch_resources():
    """The resources of a job that starts the ranks of its run (`wildcards.run`), placed by config `launch` (one
    task, torchrun, per node)."""

    def resource(name):
        def value(wildcards):
            g = geometry(wildcards.run)
            return {**slurm_resources(g), "gpus_per_node": g.gpus_per_node, "cpus_per_rank": g.cpus_per_rank}[name]

        return value

    return {name: resource(name) for name in LAUNCH_RESOURCES}


# --- The software of every job: the environment Snakemake runs in (.venv, or on GPU clusters the conda environment
# `sylvie` built once from environment.yml with this checkout installed into it: docs/installation.md), never
# a conda environment Snakemake builds itself: one built from environment.yml would lack `sylvie` and, built once per
# version of the file, would run an old checkout's code. Each of the rules says so with `conda: no_conda_env` (None:
# with or without --use-conda the job runs in the current environment), which is also the software definition
# `snakemake --lint` asks of each.
def no_conda_env(wildcards):
    return None


PLOT_CATEGORY = {"epoch_time": "Speed", "bytes": "Speed", "rows": "Speed"}  # the others: Training


def report_plots():
    """The plots ``sylvie report`` writes for this config's runs (the accuracy plots only where a run classifies
    nodes, the MRR plot only where one predicts links), each with its caption."""
    names = plots_of_tasks({r.train.task for r in RUNS.values()})
    return {name: report(f"results/report/{name}.png", caption=f"../report/{name}.rst",
                         category=PLOT_CATEGORY.get(name, "Training")) for name in names}
