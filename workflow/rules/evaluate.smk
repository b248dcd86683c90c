rule evaluate:
    input:
        model="results/{run}/seed{seed}/model.pt",
        dataset=lambda wc: dataset_dir(wc.run),
    output:
        "results/{run}/seed{seed}/eval.json",
    wildcard_constraints:
        seed=r"\d+",
    log:
        "logs/evaluate/{run}/seed{seed}.log",
    conda:
        "../../environment.yml"
    shell:
        "sylvie evaluate --dataset {input.dataset} --model {input.model} --out {output} > {log} 2>&1"
