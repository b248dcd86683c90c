"""`sylvie <stage>`: every pipeline stage, runnable by hand. Snakemake rules call exactly these."""
from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
from pathlib import Path

from sylvie.errors import SylvieError, refused_by_the_system
from sylvie.log import configure

log = logging.getLogger("sylvie.cli")


def _download(args) -> None:
    from sylvie.config import section_from_args
    from sylvie.data.registry import download

    meta = download(args.name, args.out, section_from_args(args, "dataset"))
    types = meta.get("types")
    typed = (f" of {len(types['node_types'])} node types and {len(types['relations'])} relations, target "
             f"{types['target']}" if types else "")
    log.info(f"{meta['name']}: {meta['num_nodes']:,} nodes, {meta['num_edges']:,} edges{typed}, "
             f"{meta['num_features']} features, {meta['num_classes']} classes, split "
             f"{meta['num_train']}/{meta['num_val']}/{meta['num_test']} -> {args.out}")


def _export(args) -> None:
    import yaml

    from sylvie.data.export import ExportLayout, export_graph

    layout = ExportLayout(file_format=args.format, gzip=args.gzip, id_prefix=args.id_prefix,
                          class_names=tuple(args.class_names) if args.class_names else None,
                          shuffle_seed=args.shuffle, pairs=args.pairs, edge_columns=tuple(args.edge_columns),
                          node_key=args.node_key, label_column=args.label_column, split_column=args.split_column,
                          feature_prefix=args.feature_prefix)
    if args.name is not None and not args.name.strip():
        raise SylvieError("--name: empty; give the dataset's name in the printed config, or leave --name out")
    entry = export_graph(args.dataset, args.out, layout)
    log.info(f"wrote {entry['edges']} and {entry['node_table']}; a config reads them back with:")
    # the command's output (stdout), to paste or pipe into a config
    name = args.name or Path(os.path.abspath(args.dataset)).name  # "." is named for the folder it is
    print(yaml.safe_dump({"datasets": {name: entry}}, sort_keys=False, default_flow_style=None).rstrip())


def _partition(args) -> None:
    from sylvie.config import section_from_args
    from sylvie.partition.quality import format_summary
    from sylvie.partition.stage import partition_dataset

    p = section_from_args(args, "partition")
    manifest = partition_dataset(args.dataset, args.out, p.parts, p.method, p.seed, balance=p.balance,
                                 tolerance=p.tolerance)
    log.info(format_summary(manifest))


_VIP_LINK_SKIP = ("decoder", "loss", "pair_bits")  # the link knobs that do not shape a VIP analysis


def _vip(args) -> None:
    from sylvie.config import given_flags, section_from_args
    from sylvie.sampling.vip_stage import write_vip

    link = None
    if getattr(args, "train.task") == "link":
        link = section_from_args(args, "link", skip=_VIP_LINK_SKIP)
    elif given_flags(args, "link"):
        flags = ", ".join(given_flags(args, "link").values())
        raise SylvieError(f"{flags}: settings of link prediction's minibatches, which a node-classification analysis "
                          f"(--task node, the default) ignores; add --task link or drop {flags}")
    out = write_vip(args.partition, args.out, section_from_args(args, "sampling", skip=("prefetch", "remote_bits")),
                    progress=args.progress, link=link)
    expected = ", ".join(f"{p['expected_sampled']:,.0f}" for p in out["parts"])
    log.info(f"VIP of {len(out['parts'])} parts (fanouts {out['fanouts']}, batch {out['batch_size']}): expected "
             f"vertices sampled per minibatch {expected} -> {args.out}")


def _as_rank() -> None:
    """Set-up of a process that may be one rank of a torchrun (train, partition-parallel evaluate)."""
    # torchrun gives each rank OMP_NUM_THREADS (1 when it starts several); numba's kernels (Low-bit Module)
    # take the same number, as numba's spinning OpenMP workers would otherwise steal the other ranks' cores.
    # It must be set before numba is imported.
    if "OMP_NUM_THREADS" in os.environ:
        os.environ.setdefault("NUMBA_NUM_THREADS", os.environ["OMP_NUM_THREADS"])
    if "LOCAL_RANK" in os.environ:  # a rank dies with its torchrun, however torchrun ends
        from sylvie.launch.process_tree import die_with_parent
        die_with_parent()


def _rank_done() -> None:
    if "LOCAL_RANK" in os.environ:
        # Under torchrun: outputs are written and closed, the process group is gone. Skip the C++ static
        # destructors at interpreter exit (gloo, libxsmm), which can abort ("terminate called without an
        # active exception") and turn a finished run into a failed job.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# What one training mode ignores: the sections of the other mode (the rules pass a run only its mode's flags)
_MODE_NAMES = {"full": "full-graph", "sampled": "sampled"}


def _check_mode_flags(args) -> None:
    """Refuse flags the chosen training mode would ignore (only those given: the defaults fill every knob)."""
    from sylvie.config import OTHER_MODE_SECTIONS, given_flags

    mode = getattr(args, "train.mode")
    other = "sampled" if mode == "full" else "full"
    wrong = [flag for name in OTHER_MODE_SECTIONS[mode] for flag in given_flags(args, name).values()]
    if mode == "full" and args.vip is not None:
        wrong.append("--vip")
    if wrong:
        flags = ", ".join(wrong)
        chosen = f"--mode {mode}" if "mode" in given_flags(args, "train") else f"--mode {mode} (the default)"
        raise SylvieError(f"{flags} {'is a setting' if len(wrong) == 1 else 'are settings'} of {_MODE_NAMES[other]} "
                          f"training (--mode {other}), which {chosen} ignores; drop {flags} or train with --mode "
                          f"{other}")


def _train(args) -> None:
    """``sylvie train``: the run (``TrainingRun``) and its epochs, driven here as ``run_training`` drives them, so that
    the optimiser's step is four frames of ours from the entry point: ``main``, this, ``trainer.epoch``,
    ``trainer.train_step`` (tests/test_train_story.py). Several seeds: one run each, one after another, in one
    process group (``seeds_group``)."""
    _as_rank()
    from sylvie.config import check_item, section_from_args
    from sylvie.train.job import TrainingJob
    from sylvie.train.run import TrainingRun, seeds_group

    for seed in args.seed:
        check_item("train", "seeds", seed, "sylvie train options", "seed")
    _check_mode_flags(args)
    outs, evals = _seed_paths(args)
    train, comm = section_from_args(args, "train", skip=("seeds",)), section_from_args(args, "comm")
    jobs = [TrainingJob(args.partition, out, section_from_args(args, "model"), train, comm, seed,
                        section_from_args(args, "sampling"), section_from_args(args, "cache"),
                        section_from_args(args, "features"), args.vip, section_from_args(args, "link"))
            for seed, out in zip(args.seed, outs)]
    runs = [TrainingRun(job) for job in jobs]  # every seed's inputs and outputs checked before any trains
    if args.eval_out:  # before any epoch: an output that cannot be written is refused now, not after training
        from sylvie.evaluate.result import check_outputs

        for out, eval_out in zip(outs, evals):
            inputs = {"--model": os.path.join(out, "model.pt"), "--partition": args.partition}
            if args.eval_dataset:
                inputs["--dataset"] = args.eval_dataset
            check_outputs(eval_out, None, inputs)
    trained = []  # rank 0: each seed's record for --seeds-out
    shared = seeds_group(runs[0].job, runs[0].manifest) if len(runs) > 1 else contextlib.nullcontext()
    with shared as group:
        for run, out, eval_out in zip(runs, outs, evals or [None] * len(outs)):
            run.group = group
            with run:
                for epoch in run.loop:
                    run.loop.end_epoch(run.trainer.epoch(epoch, evaluate=run.loop.evaluates(epoch)))
                summary = run.finish()
                if summary is not None:
                    trained.append({"seed": run.job.seed, "dir": out, "run": summary["run"]})
                if args.eval_out and not args.eval_dataset:  # partition-parallel, in the training's process group
                    from sylvie.evaluate.partitioned import evaluate_partitioned

                    model = os.path.join(out, "model.pt")
                    _log_evaluation(evaluate_partitioned(args.partition, model, eval_out, ctx=run.ctx), eval_out)
    if args.eval_out and args.eval_dataset and run.ctx.rank == 0:  # the whole graph, once the other ranks are done
        from sylvie.evaluate import evaluate

        for out, eval_out in zip(outs, evals):
            _log_evaluation(evaluate(args.eval_dataset, os.path.join(out, "model.pt"), eval_out), eval_out)
    if args.seeds_out and trained:  # rank 0, once every seed is trained and evaluated
        from sylvie.formats.run_seeds import write_run_seeds

        write_run_seeds(args.seeds_out, trained)
    _rank_done()


SEED = "{seed}"  # in --out and --eval-out: where each seed's path has its seed


def _seed_paths(args) -> tuple[list[str], list[str]]:
    """Each seed's run directory and evaluation file (--out, --eval-out with ``{seed}`` in them, one per seed)."""
    paths = {"--out": args.out, **({"--eval-out": args.eval_out} if args.eval_out else {})}
    for flag, path in paths.items():
        if len(args.seed) > 1 and SEED not in path:
            raise SylvieError(f"{flag} {path}: {len(args.seed)} seeds train one after another, each into a path of "
                              f"its own; put {SEED} where the seed goes, e.g. {flag} {path.rstrip('/')}/seed{SEED}")
    outs = [args.out.replace(SEED, str(s)) for s in args.seed]
    return outs, [args.eval_out.replace(SEED, str(s)) for s in args.seed] if args.eval_out else []


def _evaluate(args) -> None:
    if not (args.dataset or args.partition):
        raise SylvieError("sylvie evaluate: give --dataset DIR (whole-graph inference) or --partition DIR "
                          "(partition-parallel)")
    if args.score_pairs:
        if args.partition or args.predictions or not args.dataset:
            raise SylvieError("sylvie evaluate --score-pairs: give --dataset DIR (the graph the model was trained on: "
                              "the pairs are scored from whole-graph embeddings) and --out FILE (the scores), without "
                              "--partition or --predictions")
        from sylvie.evaluate.score_pairs import score_pairs

        n = score_pairs(args.dataset, args.model, args.score_pairs, args.out, tuple(args.pair_columns))
        log.info(f"scored {n:,} pairs of {args.score_pairs} -> {args.out}")
        return
    if args.partition:
        _as_rank()
        from sylvie.evaluate.partitioned import evaluate_partitioned

        r = evaluate_partitioned(args.partition, args.model, args.out, args.predictions, args.dataset)
    else:
        from sylvie.evaluate import evaluate

        r = evaluate(args.dataset, args.model, args.out, args.predictions)
    _log_evaluation(r, args.out)
    _rank_done()


def _log_evaluation(r: dict | None, out: str) -> None:
    """The evaluation's line (rank 0's ``r``, eval.json's content; the other ranks' None say nothing)."""
    if r is None:
        return
    from sylvie.train.loop import no_nodes

    def acc(split):  # an empty split has no accuracy
        value = r[f"{split}_acc"]
        return "n/a" if no_nodes(value) else f"{value:.4f}"

    log.info(f"{r['dataset']}: train {acc('train')}, val {acc('val')}, test {acc('test')} ({r['inference']}) -> {out}")


def _report(args) -> None:
    from sylvie.report.html import write_report

    log.info(f"report: {write_report(args.runs, args.out, getattr(args, 'report.title'))}")


def _after_dashes(argv: list[str]) -> list[str]:
    """A REMAINDER argument without its leading ``--``."""
    return argv[1:] if argv[:1] == ["--"] else argv


def _launch(args) -> None:
    from sylvie.launch.torchrun import launch, plan_geometry

    knobs = {k[len("launch."):]: v for k, v in vars(args).items() if k.startswith("launch.")}
    allocator, launcher = knobs.pop("allocator"), knobs.pop("launcher")
    g = plan_geometry(args.ranks, nodes=args.nodes, **knobs)
    return launch(g, _after_dashes(args.command), threads=args.threads, slurm_task=args.slurm_task,
                  watch_pid=args.watch_pid, allocator=allocator, launcher=launcher)


def _bench_cluster(args) -> None:
    from sylvie.bench.cluster_run import train_on_cluster
    from sylvie.formats.partition_manifest import read_manifest

    nodes = args.nodes or read_manifest(args.partition)["num_parts"]
    records = train_on_cluster(args.partition, args.out, nodes, args.rate, _after_dashes(args.train_args),
                               args.timeout)
    last = records[-1]
    times = sorted(r.epoch_time for r in records[1:] or records)
    log.info(f"{len(records)} epochs on {nodes} emulated nodes at {args.rate}: median epoch "
             f"{times[len(times) // 2]:.3f} s, final test accuracy {last.test_acc:.4f}; metrics in "
             f"{Path(args.out) / 'metrics.jsonl'}")


def _seconds(text: str) -> float:
    """A flag's positive, finite number of seconds (argparse names the flag)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive, finite number of seconds")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, whose error (usage, then exit 2) a rank under a launcher also notes for it."""

    def error(self, message):
        from sylvie.formats.rank_failures import record_failure

        record_failure(f"{self.prog}: {message}")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    from sylvie.config import add_section_arguments, properties, top_level_properties

    p = _Parser(prog="sylvie", description="Distributed GNN training on partitioned graphs: full-graph "
                "(Sylvie) or sampled minibatches (SALIENT++).")
    sub = p.add_subparsers(dest="stage", required=True, metavar="STAGE")

    d = sub.add_parser("download", help="get a dataset and write it in canonical (Arrow) form",
                       description="Download or generate dataset NAME and write it as a canonical graph directory "
                                   "(nodes.arrow, edges.arrow, meta.json).")
    d.add_argument("name", help="cora, citeseer, pubmed, ogbn-arxiv, ogbn-products, ogbn-papers100M or synthetic*")
    d.add_argument("--out", required=True, help="output directory (written atomically)")
    add_section_arguments(d, "dataset")
    d.set_defaults(func=_download)

    x = sub.add_parser("export", help="write a canonical graph as an edge list and a node table (Parquet, Arrow, CSV)",
                       description="Write the canonical graph DATASET as edges.<ext> and nodes.<ext> in --out, the "
                                   "files a graph of your own comes in (what `source: files` reads), and print the "
                                   "datasets: entry that reads them back.")
    x.add_argument("dataset", help="canonical graph directory written by `sylvie download`")
    x.add_argument("--out", required=True, help="folder to write edges.<ext>, nodes.<ext> and export.json into (a "
                                                "new one, or an earlier export's, which is replaced)")
    x.add_argument("--format", choices=("parquet", "arrow", "csv", "tsv"), default="parquet",
                   help="file kind (parquet: features as one list column 'feat'; csv, tsv: a column a dimension)")
    x.add_argument("--gzip", action="store_true", help="csv, tsv: gzip the files (.csv.gz)")
    x.add_argument("--pairs", action="store_true", help="one row an undirected edge (read back with directed: "
                                                        "false); default: every stored directed edge")
    x.add_argument("--id-prefix", metavar="TEXT", help="nodes' ids as strings: TEXT then the node's number, "
                                                       "zero-padded; default: the dataset's own ids, else the numbers")
    x.add_argument("--class-names", nargs="+", metavar="NAME", help="labels as these names, one a class in order; "
                                                                     "default: the dataset's own, else numbers")
    x.add_argument("--shuffle", type=int, metavar="SEED", help="the node table's rows in a random order (seeded)")
    x.add_argument("--edge-columns", nargs=2, default=["src", "dst"], metavar=("SRC", "DST"),
                   help="the edge list's columns (default: src dst)")
    x.add_argument("--node-key", default="node", help="the node table's id column (default: node)")
    x.add_argument("--label-column", default="label", help="the label column (default: label)")
    x.add_argument("--split-column", default="split", help="the split column: train, val, test or empty")
    x.add_argument("--feature-prefix", help="csv, tsv: the feature columns' prefix (default: f)")
    x.add_argument("--name", help="the dataset's name in the printed config (default: DATASET's folder name)")
    x.set_defaults(func=_export)

    pa = sub.add_parser("partition", help="partition a canonical graph into Arrow shards",
                        description="Partition a canonical graph (METIS or random) into one Arrow shard per part "
                                    "plus manifest.json, and print a partition-quality summary.")
    pa.add_argument("dataset", help="canonical graph directory written by `sylvie download`")
    pa.add_argument("--out", required=True, help="output directory (written atomically)")
    add_section_arguments(pa, "partition")
    pa.set_defaults(func=_partition)

    v = sub.add_parser("vip", help="vertex inclusion probabilities per part, for sampled training (SALIENT++)",
                       description="For every part of a partition: the probability that each vertex is sampled as a "
                                   "neighbour in a minibatch of that part's training vertices (SALIENT++'s VIP), for "
                                   "the trainer's neighbour sampler (without replacement, as DGL's). Writes "
                                   "vip-<k>.npy per part and manifest.json.")
    v.add_argument("partition", help="partition directory written by `sylvie partition`")
    v.add_argument("--out", required=True, help="output directory (written atomically)")
    v.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="show a progress bar on a terminal")
    add_section_arguments(v, "sampling", skip=("prefetch", "remote_bits"))
    add_section_arguments(v, "train", knobs={"task": properties("train")["task"]})
    add_section_arguments(v, "link", skip=_VIP_LINK_SKIP)
    v.set_defaults(func=_vip)

    t = sub.add_parser("train", help="train on a partition (one process per part, under torchrun)",
                       description="Partition-parallel training, full-graph (--mode full: halo exchange per layer, "
                                   "Sylvie) or on sampled minibatches (--mode sampled: replicated topology, "
                                   "partitioned features, a cache of remote rows, SALIENT++). Launch one process per "
                                   "part: torchrun --standalone --nproc-per-node P --no-python sylvie train ...")
    t.add_argument("--partition", required=True, help="partition directory written by `sylvie partition`")
    t.add_argument("--out", required=True, help="run directory: model.pt, metrics.jsonl, checkpoints/")
    t.add_argument("--seed", type=int, nargs="+", default=[0],
                   help="seed for weights and dropout (default: 0); several: one run each, one after another in one "
                        "launch, their --out (and --eval-out) paths with {seed} in them")
    add_section_arguments(t, "model")
    add_section_arguments(t, "train", skip=("seeds",))
    add_section_arguments(t, "comm")
    add_section_arguments(t, "sampling")
    add_section_arguments(t, "cache")
    add_section_arguments(t, "features")
    add_section_arguments(t, "link")
    t.add_argument("--vip", metavar="DIR", help="sampled mode: the VIP analysis written by `sylvie vip` for this "
                                                "partition and sampling setting (needed by --policy vip; orders "
                                                "the local rows hottest first)")
    t.add_argument("--eval-out", metavar="FILE", help="then evaluate the kept model into FILE (eval.json, as `sylvie "
                                                      "evaluate` writes it) in this job: partition-parallel on these "
                                                      "ranks, or on the whole graph with --eval-dataset")
    t.add_argument("--eval-dataset", metavar="DIR", help="with --eval-out: the dataset (canonical form) to evaluate "
                                                         "on the whole graph, in rank 0, as `sylvie evaluate "
                                                         "--dataset DIR` does")
    t.add_argument("--seeds-out", metavar="FILE", help="once every seed is trained (and evaluated, with --eval-out), "
                                                       "write FILE (seeds.json): each seed's run directory and run "
                                                       "key, in the order trained")
    t.set_defaults(func=_train)

    e = sub.add_parser("evaluate", help="full-precision inference: whole graph or partition-parallel; writes eval.json",
                       description="Evaluate a trained model in full precision and write eval.json (OGB Evaluator "
                                   "for ogbn-* datasets). --dataset: whole-graph inference in one process (the "
                                   "reference; the whole graph must fit in memory). --partition: partition-parallel "
                                   "inference, one rank per part with fp32 halo exchange per layer, launched like "
                                   "training: sylvie launch --ranks P -- sylvie evaluate --partition DIR ...")
    e.add_argument("--dataset", help="canonical graph directory: whole-graph inference in this process (with "
                                     "--partition: only read for the nodes' own ids and class names of --predictions)")
    e.add_argument("--partition", help="partition directory the model was trained on: one rank per part")
    e.add_argument("--model", required=True, help="model.pt written by `sylvie train`")
    e.add_argument("--out", required=True, help="eval.json to write (with --score-pairs: the scores, a .csv, .tsv or "
                                                ".parquet file)")
    e.add_argument("--score-pairs", metavar="FILE", help="a link-prediction model: score these pairs (a CSV, TSV, "
                   "Parquet or Arrow file or folder, the nodes named by your own ids: the node table's node_key, "
                   "else node numbers) into --out: src, dst, score (logit), probability")
    e.add_argument("--pair-columns", nargs=2, default=["src", "dst"], metavar=("SRC", "DST"),
                   help="--score-pairs: the pairs' source and destination columns (default: src dst)")
    e.add_argument("--predictions", metavar="FILE", help="also write every node's predicted class, in the dataset's "
                   "node order: .npy (int64 classes), or .parquet, .csv, .tsv (optionally .gz): a table of node (the "
                   "node's own id where the dataset has them, else its number) and prediction (the class's name where "
                   "the labels were names, else its number)")
    e.set_defaults(func=_evaluate)

    r = sub.add_parser("report", help="HTML report with plots and a table comparing runs",
                       description="Collect run directories (each with metrics.jsonl and eval.json) into an HTML "
                                   "report with plots.")
    r.add_argument("runs", nargs="+", help="run directories, e.g. results/gcn-p4/seed0")
    r.add_argument("--out", required=True, help="report directory (report.html and PNG plots)")
    add_section_arguments(r, "report", knobs=top_level_properties("report"))
    r.set_defaults(func=_report)

    la = sub.add_parser("launch", help="start the ranks of a run: forked or torchrun here, srun + torchrun per "
                                       "Slurm node",
                        description="Start RANKS processes of COMMAND (usually `sylvie train ...`, after --). Outside "
                                    "Slurm: RANKS processes forked from one that has imported torch and sylvie "
                                    "(--launcher fork, for sylvie's own commands) or torchrun --standalone "
                                    "--nproc-per-node RANKS. Inside a Slurm allocation (SLURM_JOB_ID set): srun with "
                                    "one task per node, each a torchrun of RANKS/NODES processes, c10d rendezvous on "
                                    "the first node of the allocation.")
    la.add_argument("--ranks", type=int, required=True, help="processes in all (one per partition)")
    add_section_arguments(la, "launch", knobs=top_level_properties("launch"))
    la.add_argument("--nodes", type=int, default=None, help="exactly this many nodes (instead of --ranks-per-node)")
    la.add_argument("--threads", type=int, default=None, help="CPUs this machine gives the whole run when not under "
                                                              "Slurm; each rank gets THREADS/RANKS OMP threads")
    la.add_argument("--watch-pid", type=int, default=None, help="stop the run when the process with this pid ends "
                                                                "(the Snakemake rule passes its own Snakemake: $PPID)")
    la.add_argument("--slurm-task", action="store_true", help=argparse.SUPPRESS)
    la.add_argument("command", nargs=argparse.REMAINDER, help="the command each rank runs, after --")
    la.set_defaults(func=_launch)

    b = sub.add_parser("bench", help="benchmarks that need several machines (emulated)")
    bsub = b.add_subparsers(dest="bench", required=True, metavar="BENCH")
    c = bsub.add_parser("cluster", help="train on an emulated cluster of network namespaces (root)",
                        description="As root: create one network namespace per part, joined by a bridge, limit "
                                    "every node's link with tc tbf, run `sylvie train` as one torchrun node per "
                                    "namespace (multi-node c10d rendezvous), collect metrics.jsonl, and remove "
                                    "every namespace and link afterwards (also on Ctrl-C or a failed node). "
                                    "Training flags go after --, e.g. -- --bits 1 --pipeline --epochs 20.")
    c.add_argument("--partition", required=True, help="partition directory written by `sylvie partition`")
    c.add_argument("--out", required=True, help="run directory (model.pt, metrics.jsonl, node<k>.log)")
    c.add_argument("--nodes", type=int, default=None, help="emulated machines (default: the partition's parts)")
    c.add_argument("--rate", default="1gbit", help="link rate of every node, a tc rate (default: 1gbit)")
    c.add_argument("--timeout", type=_seconds, default=3600,
                   help="stop everything after this many seconds (default: 3600)")
    c.add_argument("train_args", nargs=argparse.REMAINDER, help="flags for `sylvie train`, after --")
    c.set_defaults(func=_bench_cluster)
    for command in [*sub.choices.values(), *bsub.choices.values()]:
        _add_verbosity(command)
    return p


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    """-q/--quiet (warnings and errors only) and -v/--verbose (also debug messages); default: also the progress
    lines (an epoch, what a stage wrote)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const="quiet", default="normal",
                       help="print only warnings and errors")
    group.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const="verbose",
                       help="also print debug messages")


def _error(stage: str, message: str) -> None:
    """Print a user's error as one line; under torchrun name the rank and note it for the launcher."""
    from sylvie.formats.rank_failures import record_failure

    rank = os.environ.get("RANK") if "LOCAL_RANK" in os.environ else None
    message = message.removeprefix(f"sylvie {stage}: ")  # a message that names its stage already (output_dir's)
    log.error(f"sylvie {stage}: error{'' if rank is None else f' on rank {rank}'}: {message}")
    record_failure(message)


# the stages whose --out one process writes (train locks its run directory itself; a partition-parallel evaluate
# writes on rank 0)
_LOCKED_STAGES = ("download", "export", "partition", "vip", "evaluate", "report")


def _output_lock(args):
    """The stage's lock on its --out (``output_lock``): a second writer of the same output is refused at once."""
    if args.stage not in _LOCKED_STAGES or os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    from sylvie.output_lock import OutputLock

    return OutputLock(args.out, args.stage)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.verbosity)
    try:
        with _output_lock(args):
            code = args.func(args)
    except SylvieError as e:
        _error(args.stage, str(e))
        return 2
    except OSError as e:  # the system refused a path (read-only, permission, not a folder, full): one line
        refused = refused_by_the_system(e)
        if refused is None:
            _fault(e)
            raise
        _error(args.stage, str(refused))
        return 2
    except KeyboardInterrupt:
        if "TORCHELASTIC_RUN_ID" not in os.environ:  # a rank's launcher says it once for the run
            log.error(f"sylvie {args.stage}: interrupted")
        return 130
    except Exception as e:  # a bug or a failed collective: the traceback follows, the launcher repeats the line
        _fault(e)
        raise
    return code or 0


def _fault(e: BaseException) -> None:
    """Note an error that is no user's (a bug, a failed collective) for the launcher; its traceback follows."""
    from sylvie.formats.rank_failures import record_exception

    record_exception(e)


if __name__ == "__main__":
    sys.exit(main())
