rule train:
    input:
        unpack(train_inputs),
    output:
        model="results/{run}/seed{seed}/model.pt",
        metrics="results/{run}/seed{seed}/metrics.jsonl",
        # evaluated in this job, as `sylvie evaluate` would in a job of its own (one process start less a run)
        evaluation="results/{run}/seed{seed}/eval.json",
    wildcard_constraints:
        seed=r"\d+",
    params:
        parts=lambda wc: RUNS[wc.run].partition.parts,
        options=lambda wc: train_options(wc.run),
        evaluation=evaluation_flags,
    threads: lambda wc: RUNS[wc.run].partition.parts
    resources:
        # Under Slurm: one task (torchrun) per node; `sylvie launch` sruns them itself when there are several.
        **launch_resources(),
    log:
        "logs/train/{run}/seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{run}/seed{seed}.tsv"
    conda:
        no_conda_env
    shell:
        # the ranks started as common.smk's LAUNCH_LINE says (torchrun here, srun + torchrun per node under Slurm)
        launched(
            "sylvie train --partition {input.partition} --out results/{wildcards.run}/seed{wildcards.seed} "
            "--seed {wildcards.seed} {params.options} {params.evaluation} --no-progress > {log} 2>&1"
        )
