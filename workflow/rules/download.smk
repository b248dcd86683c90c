rule download:
    input:
        # a graph of the user's own: its files (an edited file reruns the stage); none for downloaded sources
        lambda wc: given_files(wc.dataset, dataset_options(config, wc.dataset)),
    output:
        directory("data/datasets/{dataset}"),
    params:
        options=lambda wc: cli_arguments("dataset", dataset_options(config, wc.dataset)),
    log:
        "logs/download/{dataset}.log",
    benchmark:
        "results/benchmarks/download/{dataset}.tsv"
    localrule: True
    conda:
        no_conda_env
    shell:
        "sylvie download {wildcards.dataset} --out {output} {params.options} > {log} 2>&1"
