# Paths shared by the rules, derived from the resolved runs.


def run_dirs():
    return [f"results/{r.name}/seed{s}" for r in RUNS.values() for s in r.train.seeds]


def partition_dir(run_name):
    r = RUNS[run_name]
    return f"data/partitions/{r.dataset}/{r.partition_id}"


def dataset_dir(run_name):
    return f"data/datasets/{RUNS[run_name].dataset}"


def geometry(run_name):
    """How the run's ranks are placed on Slurm nodes (config `launch`)."""
    return plan_geometry(RUNS[run_name].partition.parts, **LAUNCH, where=f"run {run_name} with config launch")


def slurm_resource(name):
    """Resource ``name`` of a training job for the Slurm executor (None = not requested)."""
    return lambda wc: slurm_resources(geometry(wc.run))[name]


for _name in RUNS:  # a `launch` that cannot place a run stops the pipeline at start, naming the run
    geometry(_name)
