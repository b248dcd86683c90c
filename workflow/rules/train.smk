rule train:
    input:
        unpack(train_inputs),
    output:
        model="results/{run}/seed{seed}/model.pt",
        metrics="results/{run}/seed{seed}/metrics.jsonl",
    wildcard_constraints:
        seed=r"\d+",
    params:
        parts=lambda wc: RUNS[wc.run].partition.parts,
        options=lambda wc: train_options(wc.run),
    threads: lambda wc: RUNS[wc.run].partition.parts
    resources:
        # Under Slurm: one task (torchrun) per node; `sylvie launch` sruns them itself when there are several.
        nodes=slurm_resource("nodes"),
        tasks=slurm_resource("tasks"),
        cpus_per_task=slurm_resource("cpus_per_task"),
        mpi=slurm_resource("mpi"),
        gres=slurm_resource("gres"),
        gpu=slurm_resource("gpu"),
        tasks_per_gpu=slurm_resource("tasks_per_gpu"),
        gpus_per_node=lambda wc: geometry(wc.run).gpus_per_node,
        cpus_per_rank=lambda wc: geometry(wc.run).cpus_per_rank,
    log:
        "logs/train/{run}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        # Here: torchrun --standalone with the rule's threads split among the ranks. In a Slurm job: srun of one
        # torchrun per node, c10d rendezvous on the first (sylvie/launch/torchrun.py). $PPID is the Snakemake that runs this
        # shell: if it is killed, the training stops instead of running on as an orphan.
        "sylvie launch --watch-pid $PPID --ranks {params.parts} --nodes {resources.nodes} --gpus-per-node {resources.gpus_per_node} "
        "--cpus-per-rank {resources.cpus_per_rank} --threads {threads} -- "
        "sylvie train --partition {input.partition} --out results/{wildcards.run}/seed{wildcards.seed} "
        "--seed {wildcards.seed} {params.options} --no-progress > {log} 2>&1"
