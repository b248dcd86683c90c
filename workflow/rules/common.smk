# Paths shared by the rules, derived from the resolved runs.


def run_dirs():
    return [f"results/{r.name}/seed{s}" for r in RUNS.values() for s in r.train.seeds]


def partition_dir(run_name):
    r = RUNS[run_name]
    return f"data/partitions/{r.dataset}/{r.partition_id}"


def vip_dir(run_name):
    r = RUNS[run_name]
    return f"data/vip/{r.dataset}/{r.partition_id}/{r.vip_id}"


def train_inputs(wc):
    """The partition; for a sampled run also its VIP analysis (computed once per partition and sampling setting)."""
    inputs = {"partition": partition_dir(wc.run)}
    if RUNS[wc.run].sampled:
        inputs["vip"] = vip_dir(wc.run)
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
    return " ".join(flags)


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


def partitioned_evaluation(run_name):
    """Whether the run's models are evaluated partition-parallel, one rank per part (config evaluate.mode; auto:
    when the dataset has more than evaluate.partitioned_above nodes, known before it is downloaded)."""
    r = RUNS[run_name]
    if r.evaluate.mode != "auto":
        return r.evaluate.mode == "partitioned"
    return num_nodes_before_download(r.dataset, dataset_options(config, r.dataset)) > r.evaluate.partitioned_above


def evaluate_inputs(wc):
    """The model and what inference reads: the partition (partition-parallel) or the whole dataset."""
    data = partition_dir(wc.run) if partitioned_evaluation(wc.run) else dataset_dir(wc.run)
    return {"model": f"results/{wc.run}/seed{wc.seed}/model.pt", "data": data}


def evaluate_command(wc, input, output, threads):
    """`sylvie evaluate` in one process, or its ranks started like training's (`sylvie launch`)."""
    if not partitioned_evaluation(wc.run):
        return f"sylvie evaluate --dataset {input.data} --model {input.model} --out {output}"
    g = geometry(wc.run)
    return (f"sylvie launch --watch-pid $PPID --ranks {RUNS[wc.run].partition.parts} --nodes {g.nodes} "
            f"--gpus-per-node {g.gpus_per_node} --cpus-per-rank {g.cpus_per_rank} --threads {threads} -- "
            f"sylvie evaluate --partition {input.data} --model {input.model} --out {output}")


def evaluate_slurm_resource(name):
    """Resource ``name`` of an evaluate job: a training job's when partition-parallel, else none requested."""
    return lambda wc: slurm_resources(geometry(wc.run))[name] if partitioned_evaluation(wc.run) else None
