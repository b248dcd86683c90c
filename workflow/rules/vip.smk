rule vip:
    # VIP per part for one sampling setting: computed once, reused by every seed, cache policy and alpha.
    input:
        "data/partitions/{dataset}/{partition}",
    output:
        directory("data/vip/{dataset}/{partition}/f{fanouts}-b{batch}"),
    wildcard_constraints:
        fanouts=r"\d+(-\d+)*",
        batch=r"\d+",
    params:
        fanouts=lambda wc: wc.fanouts.replace("-", " "),
    log:
        "logs/vip/{dataset}/{partition}/f{fanouts}-b{batch}.log",
    benchmark:
        "results/benchmarks/vip/{dataset}/{partition}/f{fanouts}-b{batch}.tsv"
    conda:
        no_conda_env
    shell:
        "sylvie vip {input} --out {output} --fanouts {params.fanouts} --batch-size {wildcards.batch} "
        "--no-progress > {log} 2>&1"
