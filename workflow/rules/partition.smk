rule partition:
    # one per partition the runs read (PARTITIONS: its directory name says how it was cut)
    input:
        "data/datasets/{dataset}",
    output:
        directory("data/partitions/{dataset}/{partition}"),
    wildcard_constraints:
        partition=r"[^/]+",
    params:
        flags=partition_flags,
    # every core (so nothing runs beside it) for a graph whose partitioning takes over half this machine's memory
    threads: partition_threads
    log:
        "logs/partition/{dataset}/{partition}.log",
    benchmark:
        "results/benchmarks/partition/{dataset}/{partition}.tsv"
    conda:
        no_conda_env
    shell:
        "sylvie partition {input} --out {output} {params.flags} > {log} 2>&1"
