rule vip:
    # VIP per part for one sampling setting: computed once, reused by every seed, cache policy and alpha. A link
    # prediction run's minibatches (batches of pairs, their negatives) name theirs: b<batch>-link-<sampler>-k<negatives>.
    input:
        "data/partitions/{dataset}/{partition}",
    output:
        directory("data/vip/{dataset}/{partition}/f{fanouts}-b{batch}"),
    wildcard_constraints:
        fanouts=r"\d+(-\d+)*|m[0-9a-f]{10}",
        batch=r"\d+(-link-(uniform|local|joint)-k\d+)?",
    params:
        sampling=vip_sampling_flags,
    log:
        "logs/vip/{dataset}/{partition}/f{fanouts}-b{batch}.log",
    benchmark:
        "results/benchmarks/vip/{dataset}/{partition}/f{fanouts}-b{batch}.tsv"
    conda:
        no_conda_env
    shell:
        "sylvie vip {input} --out {output} {params.sampling} "
        "--no-progress > {log} 2>&1"
