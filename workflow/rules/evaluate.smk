rule evaluate:
    input:
        unpack(evaluate_inputs),
    output:
        "results/{run}/seed{seed}/eval.json",
    wildcard_constraints:
        seed=r"\d+",
    params:
        command=evaluate_command,
    threads: lambda wc: RUNS[wc.run].partition.parts if partitioned_evaluation(wc.run) else 1
    resources:
        # partition-parallel: placed like the run's training job (sylvie launch, one torchrun per node)
        nodes=evaluate_slurm_resource("nodes"),
        tasks=evaluate_slurm_resource("tasks"),
        cpus_per_task=evaluate_slurm_resource("cpus_per_task"),
        mpi=evaluate_slurm_resource("mpi"),
        gres=evaluate_slurm_resource("gres"),
        gpu=evaluate_slurm_resource("gpu"),
        tasks_per_gpu=evaluate_slurm_resource("tasks_per_gpu"),
    log:
        "logs/evaluate/{run}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        # whole graph: one process; partition-parallel: as training, $PPID is the Snakemake that runs this shell
        "{params.command} > {log} 2>&1"
