rule report:
    input:
        evals=[f"{d}/eval.json" for d in run_dirs()],
        metrics=[f"{d}/metrics.jsonl" for d in run_dirs()],
    output:
        html=report("results/report/report.html", caption="../report/report.rst", category="Report"),
        loss=report("results/report/loss.png", caption="../report/loss.rst", category="Training"),
        accuracy=report("results/report/accuracy.png", caption="../report/accuracy.rst", category="Training"),
        epoch_time=report("results/report/epoch_time.png", caption="../report/epoch_time.rst", category="Speed"),
        bytes=report("results/report/bytes.png", caption="../report/bytes.rst", category="Speed"),
        rows=report("results/report/rows.png", caption="../report/rows.rst", category="Speed"),
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
