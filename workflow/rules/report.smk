rule report:
    input:
        evals=[f"{d}/eval.json" for d in run_dirs()],
        metrics=[f"{d}/metrics.jsonl" for d in run_dirs()],
    output:
        html=report("results/report/report.html", caption="../report/report.rst", category="Report"),
        **report_plots(),
    params:
        runs=run_dirs(),
        title=REPORT["title"],
    log:
        "logs/report.log",
    benchmark:
        "results/benchmarks/report.tsv"
    conda:
        no_conda_env
    shell:
        "sylvie report {params.runs} --out results/report --title {params.title:q} > {log} 2>&1"
