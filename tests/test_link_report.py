"""`sylvie report` of link-prediction runs beside node-classification runs: the table says each run's task, a link
run's test MRR and Hits@10/Hits@50 (eval.json's ``link``) with their std over seeds, a node run's accuracies as
before, each the other's n/a; the validation curves of link runs are a plot of their own (mrr.png, its axis MRR, from
the epochs' ``metric``), the accuracy and time-to-accuracy plots the node runs', and a node-only report has no MRR
plot."""
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from test_report import report, write_run

from sylvie.formats.epoch_record import EpochRecord, write_metrics
from sylvie.formats.eval_result import EvalResult, link_accuracies, write_eval_result
from sylvie.report.grouping import collect
from sylvie.report.plots import figure, plots_for


def write_link_run(d, seed=0, mrr=0.4, epochs=5, shared=False, failed_at=None, metrics=None) -> Path:
    """A link-prediction run directory as `sylvie train` and `sylvie evaluate` leave it (through the formats'
    writers): metrics.jsonl whose epochs measure MRR (no training accuracy), eval.json of task link. ``shared``:
    the dataset's negatives are shared pairs (Hits@K and AUC, no MRR; the headline Hits@50). ``metrics``: each split's
    ranking metrics, as given."""
    from sylvie.config import as_dict, section
    from sylvie.formats.run_failure import RunFailure, write_run_failure

    d = Path(d)
    d.mkdir(parents=True)
    records = [EpochRecord.from_json({
        "epoch": e, "loss": 0.7 / (e + 1), "train_acc": None, "val_acc": mrr * (e + 1) / epochs,
        "test_acc": 0.9 * mrr * (e + 1) / epochs, "epoch_time": 0.5, "compute_time": 0.4, "comm_time": 0.1,
        "bytes_sent": 1000, "fp32_bytes_sent": 32000, "bits": 1, "pipeline": False, "staleness": 0,
        "metric": "mrr"}) for e in range(epochs)]
    if failed_at is not None:
        write_metrics(d, records[:failed_at])
        write_run_failure(d, RunFailure("non-finite", failed_at, f"epoch {failed_at}: the training loss is nan"))
        return d
    write_metrics(d, records)
    per_split = ({"hits@10": mrr / 2, "hits@50": mrr, "hits@100": 1.2 * mrr, "auc": 0.9} if shared else
                 {"mrr": mrr, "hits@1": mrr / 2, "hits@10": 1.5 * mrr, "hits@50": 1.8 * mrr, "hits@100": 2 * mrr,
                  "auc": 0.95}) if metrics is None else metrics
    link = {"val": per_split, "test": {k: v - 0.01 for k, v in per_split.items()}}
    train = {k: v for k, v in as_dict(section("train", {"task": "link", "epochs": epochs})).items() if k != "seeds"}
    write_eval_result(d / "eval.json", EvalResult(
        dataset="ogbl-collab" if shared else "ogbl-citation2", evaluator="ogb", inference="whole graph, one process",
        accuracies=link_accuracies(link), model=as_dict(section("model", {"arch": "sage", "self_loop": False})),
        train={**train, "seed": seed}, comm=as_dict(section("comm", {"bits": 1})),
        summary={"best_epoch": epochs - 1, "best_val_acc": mrr, "num_parts": 2}, task="link", link=link,
        link_cfg=as_dict(section("link", {}))))
    return d


def _runs(tmp_path):
    r = tmp_path / "results"
    node = [write_run(r / "gcn-node" / f"seed{s}", seed=s, acc=a) for s, a in [(0, 0.7), (1, 0.9)]]
    link = [write_link_run(r / "sage-link" / f"seed{s}", seed=s, mrr=m) for s, m in [(0, 0.3), (1, 0.5)]]
    collab = [write_link_run(r / "sage-collab" / "seed0", shared=True, mrr=0.45)]
    return node, link, collab


@pytest.mark.unit
def test_metrics_a_link_evaluation_did_not_give_are_said_so(tmp_path, capsys):
    """OGB's Evaluator for ogbl-citation2 gives MRR and Hits@1, 3, 10 (no Hits@50); a split without pairs gives
    nulls."""
    ogb = write_link_run(tmp_path / "results/ogb/seed0", metrics={"mrr": 0.5, "hits@1": 0.3, "hits@3": 0.4,
                                                                  "hits@10": 0.6})
    empty = write_link_run(tmp_path / "results/empty/seed0", metrics={"mrr": math.nan, "hits@10": math.nan,
                                                                      "hits@50": math.nan, "auc": math.nan})
    code, err, rows = report(tmp_path, [ogb, empty], capsys)
    assert code == 0, err
    by_run = {row["run"]: row for row in rows}
    assert (by_run["ogb"]["test MRR"], by_run["ogb"]["test Hits@10"], by_run["ogb"]["test Hits@50"]) == (
        "0.4900", "0.5900", "n/a (not measured)")
    assert {by_run["empty"][c] for c in ("test MRR", "± std MRR", "test Hits@50")} == {"n/a (no test pairs)"}


@pytest.mark.slow
def test_the_table_shows_link_runs_beside_node_runs(tmp_path, capsys):
    node, link, collab = _runs(tmp_path)
    code, err, rows = report(tmp_path, node + link + collab, capsys)
    assert code == 0, err
    by_run = {row["run"]: row for row in rows}
    assert [(r["run"], r["task"], r["seeds"]) for r in rows] == [
        ("gcn-node", "node", "2"), ("sage-collab", "link", "1"), ("sage-link", "link", "2")]
    n, lk, co = by_run["gcn-node"], by_run["sage-link"], by_run["sage-collab"]
    # node runs: accuracies as before, no ranking metrics
    assert (n["test acc"], n["± std"], n["val acc"], n["s to target"]) == ("80.00%", "10.00%", "80.00%", "3.00")
    assert {n[c] for c in ("test MRR", "± std MRR", "test Hits@10", "test Hits@50", "± std Hits@50")} == {
        "n/a (node run)"}
    # link runs: test MRR (mean of 0.29 and 0.49), Hits@10 (0.44, 0.74), Hits@50 (0.53, 0.89), std over the seeds
    assert (lk["test MRR"], lk["± std MRR"]) == ("0.3900", "0.1000")
    assert (lk["test Hits@10"], lk["± std Hits@10"], lk["test Hits@50"], lk["± std Hits@50"]) == (
        "0.5900", "0.1500", "0.7100", "0.1800")
    assert {lk[c] for c in ("test acc", "± std", "val acc", "s to target")} == {"n/a (link run)"}
    # shared negatives (ogbl-collab's protocol): Hits@K, no MRR
    assert (co["test MRR"], co["test Hits@50"], co["test Hits@10"]) == ("n/a (shared negatives)", "0.4400", "0.2150")
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Link-prediction runs: MRR and Hits@K" in page
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == [
        "accuracy.png", "bytes.png", "epoch_time.png", "loss.png", "mrr.png", "report.html", "rows.png",
        "time_to_accuracy.png"]


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


@pytest.mark.unit
def test_the_curves_of_each_task_are_a_plot_of_their_own(tmp_path):
    node, link, collab = _runs(tmp_path)
    failed = write_link_run(tmp_path / "results/sage-link/seed2", failed_at=2)  # a link run that failed: its epochs
    runs = collect(node + link + collab + [failed])
    assert plots_for(runs) == ("loss", "accuracy", "mrr", "time_to_accuracy", "epoch_time", "bytes", "rows")
    figs = {name: figure(name, runs) for name in ("accuracy", "mrr", "time_to_accuracy", "loss")}
    try:
        assert figs["mrr"].axes[0].get_ylabel() == "MRR (mean over seeds)"
        assert _legend(figs["mrr"]) == ["sage-collab", "sage-link", "sage-link seed2 (failed: non-finite loss at "
                                        "epoch 2)", "validation", "test", "shaded: lowest to highest seed"]
        assert figs["accuracy"].axes[0].get_ylabel() == "accuracy (mean over seeds)"
        assert _legend(figs["accuracy"])[:3] == ["gcn-node", "validation", "test"]
        assert _legend(figs["time_to_accuracy"])[0] == "gcn-node"  # the target from node runs alone: 98% of 75%
        assert [t for t in _legend(figs["time_to_accuracy"]) if t.startswith("target")] == ["target 73.5%"]
        assert _legend(figs["loss"])[:3] == ["gcn-node", "sage-collab", "sage-link"]  # every run
        # a run keeps its colour across plots
        color = {fig: {line.get_label(): line.get_color() for line in figs[fig].axes[0].get_lines()}
                 for fig in ("mrr", "loss")}
        assert color["mrr"]["sage-link"] == color["loss"]["sage-link"]
        mean = next(line for line in figs["mrr"].axes[0].get_lines() if line.get_label() == "sage-link")
        assert list(mean.get_ydata()) == pytest.approx([0.4 * (e + 1) / 5 for e in range(5)])  # mean of 2 seeds
    finally:
        for fig in figs.values():
            plt.close(fig)


@pytest.mark.slow
def test_a_report_of_one_task_has_only_its_plots(tmp_path, capsys):
    node, link, _ = _runs(tmp_path)
    out = tmp_path / "out"
    code, err, rows = report(tmp_path, link, capsys, out=out)
    assert code == 0, err
    assert sorted(p.name for p in out.glob("*.png")) == ["bytes.png", "epoch_time.png", "loss.png", "mrr.png",
                                                         "rows.png"]
    assert rows[0]["test MRR"] == "0.3900"
    code, err, rows = report(tmp_path, node, capsys, out=out)  # a node-only report over it: as before, no MRR plot
    assert code == 0, err
    assert sorted(p.name for p in out.glob("*.png")) == ["accuracy.png", "bytes.png", "epoch_time.png", "loss.png",
                                                         "rows.png", "time_to_accuracy.png"]
    assert "Link-prediction runs" not in (out / "report.html").read_text()
    assert rows[0]["task"] == "node" and rows[0]["test acc"] == "80.00%"


@pytest.mark.unit
def test_link_runs_of_one_folder_differ_by_their_link_section(tmp_path):
    """Two link runs in one folder that differ only in the decoder are two runs, labelled by it."""
    import json

    from sylvie.formats.checksum import with_checksum

    a = write_link_run(tmp_path / "results/link/seed0", seed=0)
    b = write_link_run(tmp_path / "results/link/seed1", seed=1)
    content = json.loads((b / "eval.json").read_text())
    content["link_cfg"]["decoder"] = "mlp"
    (b / "eval.json").write_text(json.dumps(with_checksum({k: v for k, v in content.items() if k != "checksum"})))
    assert sorted(collect([a, b])) == ["link (decoder=dot)", "link (decoder=mlp)"]
    assert math.isnan(collect([a])["link"][0].evaluation.accuracies["train"])


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [("link",), ("node",), ("node", "link")])
def test_the_report_rule_declares_the_plots_the_report_writes(tmp_path, tasks):
    """The pipeline's report rule declares, for a config of runs of ``tasks``, the plots ``sylvie report`` writes for
    such runs: a config of link runs alone has no accuracy plot (Snakemake would fail the finished report), one of
    node runs no MRR plot."""
    from support.commands import BIN, REPO, run

    from sylvie.report.plot_names import plots_of_tasks

    runs = "".join(f"  r-{t}: {{dataset: cora-links, train: {{task: {t}, epochs: 2}}, partition: {{parts: 1}}}}\n"
                   for t in tasks)
    config = tmp_path / "tasks.yaml"
    config.write_text("datasets:\n  cora-links: {source: planetoid, name: cora, raw_dir: data/embedded/planetoid,\n"
                      "               edge_split: [0.05, 0.1], eval_negatives: 100}\n" + f"runs:\n{runs}")
    p = run([str(BIN / "snakemake"), "report", "-n", "--cores", "1", "-s", str(REPO / "Snakefile"), "--directory",
             str(tmp_path), "--configfile", str(config)])
    block = (p.stdout + p.stderr).split("rule report:")[1]
    outputs = next(line for line in block.splitlines() if line.strip().startswith("output:"))
    declared = sorted(Path(f.strip()).stem for f in outputs.split(":", 1)[1].split(","))
    assert declared == sorted(["report", *plots_of_tasks(set(tasks))])
