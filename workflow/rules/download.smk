rule download:
    output:
        directory("data/datasets/{dataset}"),
    params:
        options=lambda wc: cli_arguments("dataset", dataset_options(config, wc.dataset)),
    log:
        "logs/download/{dataset}.log",
    localrule: True
    conda:
        "../../environment.yml"
    shell:
        "sylvie download {wildcards.dataset} --out {output} {params.options} > {log} 2>&1"
