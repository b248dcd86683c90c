rule train:
    # One job a run: its seeds one after another in one launch (one start-up, one process group), each into its own
    # results/{run}/seed<k>/ (model.pt, metrics.jsonl, eval.json, checkpoints/), evaluated in the same job; the job's
    # output is results/{run}/seeds.json, written once every seed is done. Run again (a changed knob, another seed), a
    # seed whose training is finished resumes after its last epoch and only writes and evaluates.
    input:
        unpack(train_inputs),
    output:
        seeds="results/{run}/seeds.json",
    wildcard_constraints:
        run=r"[^/]+",
    params:
        parts=lambda wc: RUNS[wc.run].partition.parts,
        seeds=lambda wc: " ".join(str(s) for s in RUNS[wc.run].train.seeds),
        options=lambda wc: train_options(wc.run),
        evaluation=evaluation_flags,
    threads: lambda wc: RUNS[wc.run].partition.parts
    resources:
        # Under Slurm: one task (torchrun) per node; `sylvie launch` sruns them itself when there are several.
        **launch_resources(),
    log:
        "logs/train/{run}.log",
    benchmark:
        "results/benchmarks/train/{run}.tsv"
    conda:
        no_conda_env
    shell:
        # the ranks started as common.smk's LAUNCH_LINE says (forked here, srun + torchrun per node under Slurm)
        launched(
            "sylvie train --partition {input.partition} --out results/{wildcards.run}/seed{{seed}} "
            "--seed {params.seeds} {params.options} {params.evaluation} --seeds-out {output.seeds} --no-progress "
            "> {log} 2>&1"
        )
