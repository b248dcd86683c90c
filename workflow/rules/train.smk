rule train:
    input:
        lambda wc: partition_dir(wc.run),
    output:
        model="results/{run}/seed{seed}/model.pt",
        metrics="results/{run}/seed{seed}/metrics.jsonl",
    wildcard_constraints:
        seed=r"\d+",
    params:
        parts=lambda wc: RUNS[wc.run].partition["parts"],
        model=lambda wc: cli_arguments("model", RUNS[wc.run].model),
        train=lambda wc: cli_arguments("train", RUNS[wc.run].train, skip=("seeds",)),
        comm=lambda wc: cli_arguments("comm", RUNS[wc.run].comm),
    threads: lambda wc: RUNS[wc.run].partition["parts"]
    log:
        "logs/train/{run}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        # Snakemake exports OMP/MKL/OPENBLAS_NUM_THREADS={threads}, which torchrun keeps; split them among the
        # ranks, so that P ranks on this machine do not each run that many (spinning) threads.
        "T=$(( {threads} / {params.parts} > 0 ? {threads} / {params.parts} : 1 )); "
        "export OMP_NUM_THREADS=$T MKL_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T GOTO_NUM_THREADS=$T; "
        "torchrun --standalone --nproc-per-node {params.parts} --no-python "
        "sylvie train --partition {input} --out results/{wildcards.run}/seed{wildcards.seed} "
        "--seed {wildcards.seed} {params.model} {params.train} {params.comm} --no-progress > {log} 2>&1"
