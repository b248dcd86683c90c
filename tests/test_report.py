"""`sylvie report`: the time-to-accuracy (validation accuracy against seconds of training, means over seeds, and the
common target every run reaches); which run directories make one run and how many seeds; numbers that are not finite
and runs that failed, in words; one line per run in the plots."""
import json
import math
import shutil
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from sylvie.cli import main
from sylvie.formats.epoch_record import EpochRecord
from sylvie.report.grouping import collect
from sylvie.report.run_output import RunOutput
from sylvie.report.time_to_accuracy import accuracy_over_time, accuracy_target, time_to_accuracy


def _run(name, seed, times, accs):
    return RunOutput(name, seed, [EpochRecord.from_json({"epoch": e, "loss": 1.0, "epoch_time": t, "val_acc": a,
                                                         "compute_time": t, "comm_time": 0.0, "bytes_sent": 0})
                                  for e, (t, a) in enumerate(zip(times, accs))], None)


@pytest.mark.unit
def test_time_to_accuracy_sums_epoch_times_and_averages_seeds():
    fast = [_run("fast", 0, [1, 1, 1, 1], [0.5, None, 0.7, 0.8]), _run("fast", 1, [1, 1, 1, 1], [0.5, None, 0.7, 0.6])]
    slow = [_run("slow", 0, [3, 3, 3], [0.6, 0.75, 0.9])]
    seconds, acc = accuracy_over_time(fast)
    assert seconds.tolist() == [1, 2, 3, 4] and np.isnan(acc[1]) and acc[3] == pytest.approx(0.7)
    target = accuracy_target({"fast": fast, "slow": slow})
    assert target == pytest.approx(0.98 * 0.7)  # fast's best mean is 0.7 (epochs 3 and 4), slow's 0.9
    assert time_to_accuracy(fast, target) == 3  # the unevaluated epoch 2 counts in time, not as reached
    assert time_to_accuracy(slow, target) == 6
    assert math.isnan(time_to_accuracy(slow, 0.95))


# ---- `sylvie report` on run directories as the train and evaluate stages write them -----------------------------

def _record(epoch: int, sampled: bool, acc: float) -> dict:
    """One epoch of metrics.jsonl, with the keys the trainers write."""
    val = min(acc, 0.3 + 0.1 * epoch)
    rec = {"epoch": epoch, "loss": (2.0 - acc) / (epoch + 1), "train_acc": val, "val_acc": val, "test_acc": val,
           "epoch_time": 0.5, "compute_time": 0.4, "comm_time": 0.1, "hidden_comm_time": 0.0, "codec_time": 0.0,
           "bits": 32, "bytes_sent": 4000, "fp32_bytes_sent": 4000, "bytes_received": 4000, "eval_time": 0.01}
    if sampled:
        rec.update(mode="sampled", minibatches=3, input_rows_per_batch=900.0, rows_local=2000, rows_cached=500,
                   rows_remote=200, cache_hit_rate=500 / 700)
    else:
        rec.update(pipeline=False, staleness=0, sync_reason="synchronous")
    return rec


def write_run(d, seed=0, arch="gcn", mode="full", acc=0.8, epochs=6, test_nodes=True, failure=None,
              run: str | None = None) -> Path:
    """A run directory as `sylvie train` and `sylvie evaluate` leave it: metrics.jsonl and eval.json (through the
    evaluate stage's writer), or, for a run whose training failed (a RunFailure), metrics.jsonl of the epochs it ran
    and failed.json."""
    from sylvie.atomic import json_safe, write_jsonl
    from sylvie.config import as_dict, section
    from sylvie.evaluate.result import write_eval
    from sylvie.formats.checksum import with_checksum
    from sylvie.formats.model_file import ModelFile
    from sylvie.formats.run_failure import write_run_failure

    d = Path(d)
    d.mkdir(parents=True)
    sampled = mode == "sampled"
    records = [_record(e, sampled, acc) for e in range(epochs)]
    if run is not None:  # as sylvie train writes them now: each line, and the model's summary, name their run
        records = [{**r, "run": run} for r in records]
    if failure is not None:
        records = records[:failure.epoch]
        records[-1]["loss"] = None if failure.reason == "non-finite" else 1e9
    # each line with its checksum, as write_metrics writes it
    write_jsonl(d / "metrics.jsonl", [with_checksum(json_safe(r)) for r in records])
    if failure is not None:
        write_run_failure(d, failure)
        return d
    train = {k: v for k, v in as_dict(section("train", {"mode": mode, "epochs": epochs})).items() if k != "seeds"}
    sampled_cfgs = {"sampling_cfg": as_dict(section("sampling", {})), "features_cfg": as_dict(section("features", {})),
                    "cache_cfg": as_dict(section("cache", {"policy": "vip", "alpha": 0.2}))} if sampled else {}
    saved = ModelFile(weights={}, model_cfg=as_dict(section("model", {"arch": arch, "self_loop": arch != "sage"})),
                      train_cfg={**train, "seed": seed}, in_feats=1433, num_classes=7, dataset_fingerprint="",
                      comm_cfg={} if sampled else as_dict(section("comm", {})),
                      summary={"best_epoch": epochs - 1, "best_val_acc": acc, "test_acc_at_best_val": acc,
                               "setup_bytes": 0, "num_parts": 4,
                               **({"run": run, "epochs_recorded": epochs} if run is not None else {})},
                      **sampled_cfgs)
    labels = np.zeros(100, dtype=np.int64)
    pred = (np.arange(100) >= round(acc * 100)).astype(np.int64)  # a share acc of them right
    empty = np.zeros(0, dtype=np.int64)
    splits = {"train": (labels, pred), "val": (labels, pred), "test": (labels, pred) if test_nodes else (empty, empty)}
    write_eval(d / "eval.json", "cora", saved, splits, "whole-graph")
    return d


class _Table(HTMLParser):
    """The report's table: its header and rows, each a list of cell texts."""

    def __init__(self):
        super().__init__()
        self.header, self.rows, self._cells, self._text = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._cells = []
        elif tag in ("td", "th"):
            self._text = ""

    def handle_data(self, data):
        if self._text is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cells is not None:
            self._cells.append(self._text)
            self._text = None
        elif tag == "tr":
            (self.rows if self.header else self.header).extend([self._cells] if self.header else self._cells)
            self._cells = None


def report(tmp_path, run_dirs, capsys, out=None):
    """``sylvie report`` as the CLI runs it: exit status, stderr, and the table's rows (each header -> cell text;
    a failed run's row: run -> its name, note -> the spanned cell)."""
    out = tmp_path / "report" if out is None else out
    code = main(["report", *map(str, run_dirs), "--out", str(out), "--title", "t"])
    err = capsys.readouterr().err
    if code != 0:
        return code, err, None
    table = _Table()
    table.feed((out / "report.html").read_text())
    rows = [dict(zip(table.header, r)) if len(r) == len(table.header) else {"run": r[0], "note": r[1]}
            for r in table.rows]
    return code, err, rows


@pytest.mark.unit
def test_a_run_directory_given_twice_counts_once(tmp_path, capsys):
    seed0 = write_run(tmp_path / "results/gcn/seed0", seed=0, acc=0.7)
    seed1 = write_run(tmp_path / "results/gcn/seed1", seed=1, acc=0.9)
    (tmp_path / "results/gcn/latest").symlink_to(seed0)
    same = [seed0, seed1, seed0, tmp_path / "results/gcn/../gcn/seed0", tmp_path / "results/gcn/latest"]
    code, err, rows = report(tmp_path, same, capsys)
    assert code == 0, err
    assert [(r["run"], r["seeds"], r["test acc"], r["± std"]) for r in rows] == [("gcn", "2", "80.00%", "10.00%")]
    assert "counts once" in err


@pytest.mark.unit
def test_two_directories_recording_one_seed_of_one_run_are_an_error(tmp_path, capsys):
    seed0 = write_run(tmp_path / "results/gcn/seed0", seed=0)
    shutil.copytree(seed0, tmp_path / "results/gcn/seed0-copy")
    code, err, _ = report(tmp_path, [seed0, tmp_path / "results/gcn/seed0-copy"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{seed0} and {tmp_path / 'results/gcn/seed0-copy'}: both record seed 0" in err
    assert not (tmp_path / "report").exists()


@pytest.mark.slow
def test_runs_are_grouped_by_their_settings_and_folder(tmp_path, capsys):
    r = tmp_path / "results"
    default_layout = [write_run(r / "gcn-p4" / f"seed{s}", seed=s, acc=a) for s, a in [(0, 0.8), (1, 0.7), (2, 0.9)]]
    default_layout += [write_run(r / "sage-p4-sampled" / f"seed{s}", seed=s, arch="sage", mode="sampled", acc=0.6)
                       for s in (0, 1)]
    same_name = [write_run(tmp_path / "a/x/seed0", seed=0, acc=0.5),
                 write_run(tmp_path / "b/x/seed1", seed=1, arch="sage", mode="sampled", acc=0.9)]
    mixed = [write_run(r / "mixed/seed0", seed=0, acc=0.4), write_run(r / "mixed/seed1", seed=1, acc=0.6),
             write_run(r / "mixed/seed2", seed=2, arch="sage", acc=0.3)]
    code, err, rows = report(tmp_path, default_layout + same_name + mixed, capsys)
    assert code == 0, err
    assert [(row["run"], row["seeds"], row["model"], row["regime"], row["test acc"]) for row in rows] == [
        ("a/x", "1", "gcn", "full-graph", "50.00%"),
        ("b/x", "1", "sage", "sampled", "90.00%"),
        ("gcn-p4", "3", "gcn", "full-graph", "80.00%"),
        ("mixed (arch=gcn, self_loop=true)", "2", "gcn", "full-graph", "50.00%"),
        ("mixed (arch=sage, self_loop=false)", "1", "sage", "full-graph", "30.00%"),
        ("sage-p4-sampled", "2", "sage", "sampled", "60.00%"),
    ]


def _unsealed(line: str) -> dict:
    """A metrics line's object without its checksum: as lines were written before they carried one."""
    return {k: v for k, v in json.loads(line).items() if k != "checksum"}


@pytest.mark.slow
def test_numbers_that_are_not_finite_are_words(tmp_path, capsys):
    r = tmp_path / "results"
    no_test = write_run(r / "no-test-nodes/seed0", test_nodes=False)
    stalled = write_run(r / "stalled/seed0")  # its last epoch, where it reaches the target, took forever
    lines = (stalled / "metrics.jsonl").read_text().splitlines()
    # Infinity: as Python's json writes it (the line without its checksum, as written before lines carried one)
    lines[-1] = json.dumps({**_unsealed(lines[-1]), "epoch_time": math.inf})
    (stalled / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    never = write_run(r / "never-evaluated/seed0")
    lines = (never / "metrics.jsonl").read_text().splitlines()
    (never / "metrics.jsonl").write_text("".join(
        json.dumps({**_unsealed(line), "val_acc": None}) + "\n" for line in lines))
    code, err, rows = report(tmp_path, [no_test, stalled, never], capsys)
    assert code == 0, err
    by_run = {row["run"]: row for row in rows}
    assert by_run["no-test-nodes"]["test acc"] == by_run["no-test-nodes"]["± std"] == "n/a (no test nodes)"
    assert by_run["no-test-nodes"]["s to target"] == "3.00"  # 0.5 s per epoch, 98% of the best 80% reached at epoch 6
    assert by_run["stalled"]["s to target"] == by_run["never-evaluated"]["s to target"] == "not reached"
    assert by_run["stalled"]["s/epoch"] == "infinite"
    cells = [c for row in rows for c in row.values()]
    assert not [c for c in cells if c.strip() in ("", "–", "-", "nan", "inf") or sum(ch.isdigit() for ch in c) > 12]


@pytest.mark.slow
def test_failed_runs_are_shown_as_failed_in_the_table_and_the_plots(tmp_path, capsys):
    from sylvie.formats.run_failure import RunFailure
    from sylvie.report.plots import figure

    r = tmp_path / "results"
    dirs = [write_run(r / "gcn" / f"seed{s}", seed=s, acc=a) for s, a in enumerate([0.7, 0.8, 0.9])]
    dirs.append(write_run(r / "gcn/seed3", failure=RunFailure("diverged", 3, "loss 1e9 is 100x the first epoch's")))
    dirs.append(write_run(r / "sage/seed0", failure=RunFailure("non-finite", 2, "epoch 2: the training loss is nan")))
    code, err, rows = report(tmp_path, dirs, capsys)
    assert code == 0, err
    assert [(row["run"], row.get("seeds"), row.get("note", "")[:40]) for row in rows] == [
        ("gcn", "3 (+1 failed, below)", ""),
        ("gcn seed3", None, "diverged at epoch 3: loss 1e9 is 100x th"),
        ("sage seed0", None, "failed: non-finite loss at epoch 2: epoc")]
    assert "%" not in rows[1]["note"] + rows[2]["note"]  # no accuracy for a run without a model

    runs = collect(dirs)
    for name, lines in [("accuracy", ["gcn", "validation", "test"]), ("loss", ["gcn"])]:  # (validation: solid)
        fig = figure(name, runs)
        try:
            assert [t.get_text() for t in fig.legends[0].get_texts()] == [
                lines[0], "gcn seed3 (diverged at epoch 3)", "sage seed0 (failed: non-finite loss at epoch 2)",
                *lines[1:], "shaded: lowest to highest seed"]
            ax = fig.axes[0]
            labelled = {line.get_label(): line for line in ax.get_lines()}
            assert labelled["gcn seed3 (diverged at epoch 3)"].get_linestyle() == ":"
            assert len(labelled["gcn seed3 (diverged at epoch 3)"].get_xdata()) == 3  # the epochs it ran
            assert len(labelled["gcn"].get_xdata()) == 6  # one line for the 3 seeds: their mean
            assert len(ax.collections) == 1  # and a band (of the first key)
        finally:
            plt.close(fig)


@pytest.mark.slow
def test_a_report_is_written_over_only_its_own_files(tmp_path, capsys):
    """An earlier report's page and plots are replaced; a user's file under one of their names (a page, a plot, a
    folder) is not: refused naming it, nothing changed."""
    run = write_run(tmp_path / "results/gcn/seed0")
    code, err, _ = report(tmp_path, [run], capsys)
    assert code == 0, err
    code, err, _ = report(tmp_path, [run], capsys)  # an earlier report: replaced
    assert code == 0, err
    for name, theirs in (("report.html", b"<html>my notes</html>"), ("loss.png", b"\x89PNG\r\n\x1a\nmine"),
                         ("rows.png", None)):
        out = tmp_path / f"mine-{name}"
        out.mkdir()
        if theirs is None:
            (out / name).mkdir()
        else:
            (out / name).write_bytes(theirs)
        code = main(["report", str(run), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].endswith(f"refusing --out {out}: it holds {name}, which sylvie report did not "
                                              f"write and would replace; nothing was changed. Give another --out, "
                                              f"or move it away yourself"), err
        assert sorted(p.name for p in out.iterdir()) == [name]
        assert theirs is None or (out / name).read_bytes() == theirs


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


@pytest.mark.unit
@pytest.mark.parametrize("member", ["metrics cut at a line", "metrics with a line added", "eval.json of another run",
                                    "metrics.jsonl of another run"])
def test_a_runs_files_of_two_runs_or_cut_short_are_refused(tmp_path, capsys, member):
    """metrics.jsonl and eval.json each check out alone; where they meet (the report) they must be of one run (the
    run each names) and agree on its epochs."""
    run = write_run(tmp_path / "r" / "seed0", run="a" * 16)
    other = write_run(tmp_path / "o" / "seed1", seed=1, run="b" * 16, epochs=6)
    metrics = run / "metrics.jsonl"
    if member == "metrics cut at a line":
        metrics.write_text("".join(_lines(metrics)[:-1]))
    elif member == "metrics with a line added":
        metrics.write_text("".join(_lines(metrics) + _lines(metrics)[-1:]))
    elif member == "eval.json of another run":
        (run / "eval.json").write_bytes((other / "eval.json").read_bytes())
    else:
        metrics.write_bytes((other / "metrics.jsonl").read_bytes())
    code, err, _ = report(tmp_path, [run], capsys)
    assert code == 2 and not (tmp_path / "report").exists()
    last = err.strip().splitlines()[-1]
    if member == "metrics cut at a line":
        assert f"{metrics}: 5 epochs, but its run recorded 6 ({run / 'eval.json'}): the file was cut short" in last
    elif member == "metrics with a line added":  # the epoch repeated: the reader's own check, before they meet
        assert f"{metrics}: line 7: " in last, last
    else:
        runs = ("b" * 16, "a" * 16) if member.startswith("eval") else ("a" * 16, "b" * 16)
        assert f"{run / 'eval.json'}: of run {runs[0]}, but {metrics} line 1 is of run {runs[1]}" in last, last
    assert "rerun `sylvie" in last and f"leave {run} out of the report" in last


@pytest.mark.unit
def test_a_runs_files_written_before_they_named_their_run_are_read(tmp_path, capsys):
    run = write_run(tmp_path / "r" / "seed0")
    metrics = run / "metrics.jsonl"
    metrics.write_text("".join(_lines(metrics)[:-1]))  # nothing to check it against: taken as it is
    code, err, rows = report(tmp_path, [run], capsys)
    assert code == 0, err
