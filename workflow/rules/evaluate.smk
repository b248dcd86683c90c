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
        # partition-parallel: placed and launched like the run's training job; whole graph: nothing requested
        **launch_resources(when=partitioned_evaluation),
    log:
        "logs/evaluate/{run}/seed{seed}.log",
    benchmark:
        "results/benchmarks/evaluate/{run}/seed{seed}.tsv"
    conda:
        no_conda_env
    shell:
        # whole graph: one process; partition-parallel: as training, $PPID is the Snakemake that runs this shell
        "{params.command} > {log} 2>&1"
