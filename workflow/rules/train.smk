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
        "torchrun --standalone --nproc-per-node {params.parts} --no-python "
        "sylvie train --partition {input} --out results/{wildcards.run}/seed{wildcards.seed} "
        "--seed {wildcards.seed} {params.model} {params.train} {params.comm} --no-progress > {log} 2>&1"
