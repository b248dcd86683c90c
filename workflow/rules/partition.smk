rule partition:
    input:
        "data/datasets/{dataset}",
    output:
        directory("data/partitions/{dataset}/{method}-p{parts}-s{pseed}"),
    wildcard_constraints:
        method="metis|random",
        parts=r"\d+",
        pseed=r"\d+",
    log:
        "logs/partition/{dataset}/{method}-p{parts}-s{pseed}.log",
    benchmark:
        "results/benchmarks/partition/{dataset}/{method}-p{parts}-s{pseed}.tsv"
    conda:
        no_conda_env
    shell:
        "sylvie partition {input} --out {output} --parts {wildcards.parts} --method {wildcards.method} "
        "--seed {wildcards.pseed} > {log} 2>&1"
