rule report:
    input:
        # every run's seeds trained and evaluated (their eval.json and metrics.jsonl in run_dirs())
        trained=trained_runs(),
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
