"""The HTML report: a comparison table and the plots, in one self-contained page.

Node-classification and link-prediction runs share the table: each row says its task; node runs fill the accuracy
columns and the time to the accuracy target, link runs the test MRR and Hits@K columns (eval.json's ``link``), each
the other's "n/a". The plots of one task (``plots.plots_for``) appear where the report has its runs."""
from __future__ import annotations

import base64
import contextlib
import errno
import html
import math
import os
from datetime import datetime, timezone
from pathlib import Path

from sylvie.atomic import disk_full_error, scratch_directory
from sylvie.errors import SylvieError, system_said
from sylvie.formats.model_file import BY_LAST_EPOCH
from sylvie.output_dir import check_location
from sylvie.report.grouping import collect
from sylvie.report.plot_names import PLOTS
from sylvie.report.plots import SOFTWARE, write_plots
from sylvie.report.run_output import RunOutput, failed, finished
from sylvie.report.summary import LINK_METRICS, summarise
from sylvie.report.time_to_accuracy import accuracy_target, time_to_accuracy

_CAPTIONS = {
    "loss": "Training loss per epoch, one line per run: the mean over its seeds, shaded from the lowest to the "
            "highest seed. Runs that failed are dotted, up to the cross where they stopped.",
    "accuracy": "Validation (solid) and test (dashed) accuracy per epoch, one colour per run: the mean over its "
                "seeds, shaded from the lowest to the highest seed. Runs that failed are dotted (validation), up "
                "to the cross where they stopped.",
    "mrr": "Link-prediction runs: validation (solid) and test (dashed) MRR per epoch, each split's pairs ranked "
           "among their negatives as the trainer evaluates them, one colour per run: the mean over its seeds, shaded "
           "from the lowest to the highest seed. Runs that failed are dotted (validation), up to the cross where "
           "they stopped. The table's MRR and Hits@K are the evaluate stage's, of the model it chose.",
    "time_to_accuracy": "Validation accuracy against seconds of training (the epochs' times summed, evaluation "
                        "excluded), mean over seeds, shaded from the lowest to the highest seed: what each regime "
                        "and exchange buys in wall-clock. The dashed line is the target of the table's \"s to "
                        "target\" column: 98% of the lowest best validation accuracy of any run, so every run "
                        "reaches it. Runs that failed are dotted. Node-classification runs only (a link run's "
                        "validation MRR has no accuracy target).",
    "epoch_time": "Seconds per training epoch, split into computation, encoding/decoding of the halo exchange "
                  "(Low-bit Module) and communication waited on (halo exchange and gradient all-reduce), mean over "
                  "epochs and seeds. The hatched part on top is communication that ran in the background while "
                  "the rank computed (pipelined runs): it overlaps the computation and is not part of the epoch. "
                  "For sampled runs, communication waited on is the wait for the sampling thread (sampling and row "
                  "fetching) plus the all-reduce; the hatched part is the thread's work hidden behind computation.",
    "bytes": "Bytes on the wire per training epoch, all ranks together: full-graph runs send halo rows (features "
             "forward and gradients backward of layers >= 1; comm.bits sets their width), sampled runs fetch the "
             "input rows of their minibatches that are neither their own nor cached, and the ids they ask for "
             "(sampling.remote_bits sets the rows' width).",
    "rows": "Sampled runs: input rows of all minibatches per epoch, all ranks together, by where they came from: "
            "the rank's own rows, its cache of remote rows, or their owners over the network.",
}
_COLUMNS = [("run", "run", "{}"), ("dataset", "dataset", "{}"), ("parts", "parts", "{}"), ("arch", "model", "{}"),
            ("task", "task", "{}"), ("seeds", "seeds", "{}"), ("test_acc", "test acc", "{:.2%}"),
            ("test_std", "± std", "{:.2%}"), ("val_acc", "val acc", "{:.2%}"),
            ("test_mrr", "test MRR", "{:.4f}"), ("test_mrr_std", "± std MRR", "{:.4f}"),
            ("test_hits@10", "test Hits@10", "{:.4f}"), ("test_hits@10_std", "± std Hits@10", "{:.4f}"),
            ("test_hits@50", "test Hits@50", "{:.4f}"), ("test_hits@50_std", "± std Hits@50", "{:.4f}"),
            ("epochs", "epochs", "{}"), ("epoch_time", "s/epoch", "{:.4f}"),
            ("time_to_target", "s to target", "{:.2f}"),
            ("comm_time", "comm waited s/epoch", "{:.4f}"), ("hidden_comm_time", "comm hidden s/epoch", "{:.4f}"),
            ("codec_time", "codec s/epoch", "{:.4f}"), ("regime", "regime", "{}"), ("exchange", "exchange", "{}"),
            ("stale_share", "stale epochs", "{:.0%}"),
            ("bits", "bits", "{}"), ("mb_sent", "MB sent/epoch", "{:.3f}"), ("compression", "vs fp32", "{:.1f}x"),
            ("rows_per_batch", "input rows/batch", "{:.0f}"), ("cache_hit", "cache hits", "{:.0%}")]


# A value that is not a finite number, in words: per column where it has a meaning, else "n/a" / "infinite"
_NOT_A_NUMBER = {"test_acc": "n/a (no test nodes)", "test_std": "n/a (no test nodes)",
                 "val_acc": "n/a (no validation nodes)", "time_to_target": "not reached",
                 "rows_per_batch": "n/a (no minibatches)", "cache_hit": "n/a (nothing remote)"}
_SAMPLED_ONLY = ("rows_per_batch", "cache_hit")
_NODE_ONLY = ("test_acc", "test_std", "val_acc", "time_to_target")
_LINK_ONLY = tuple(key for key, _, _ in _COLUMNS if key.startswith("test_") and key not in _NODE_ONLY)
_INFINITE = {"time_to_target": "not reached"}


def _missing(key: str, row: dict) -> str:
    """Why the number ``key`` of ``row`` is not a number, in words."""
    if row.get("regime") == "full-graph" and key in _SAMPLED_ONLY:
        return "n/a (full-graph)"
    if row.get("task") == "link" and key in _NODE_ONLY:
        return "n/a (link run)"
    if row.get("task", "node") == "node" and key in _LINK_ONLY:
        return "n/a (node run)"
    if key in _LINK_ONLY:  # a link run's metric: never measured (MRR: the split's negatives are shared), or no pairs
        name = key.removeprefix("test_").removesuffix("_std")
        if name in row.get("unmeasured", ()):
            shared = name == "mrr" and len(row["unmeasured"]) < len(LINK_METRICS)  # (Hits@K measured, no MRR)
            return "n/a (shared negatives)" if shared else "n/a (not measured)"
        return "n/a (no test pairs)"
    return _NOT_A_NUMBER.get(key, "n/a")


def _fmt(key: str, fmt: str, v, row: dict | None = None) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        if math.isnan(v):
            return html.escape(_missing(key, row or {}))
        return html.escape(_INFINITE.get(key, "infinite" if v > 0 else "minus infinite"))
    return html.escape(fmt.format(v))


def _seeds(outputs: list[RunOutput]) -> str:
    done, stopped = len(finished(outputs)), len(failed(outputs))
    return f"{done} (+{stopped} failed, below)" if stopped else str(done)


def _failed_row(output: RunOutput) -> str:
    """A run that stopped without a model: what happened, no numbers (there is no evaluation)."""
    f = output.failure
    what = f"{output.failure_text()}: {f.message}" if f.message else output.failure_text()
    return (f"<tr class='failed'><td>{html.escape(f'{output.run} {output.name}')}</td>"
            f"<td colspan='{len(_COLUMNS) - 1}' style='text-align:left'>{html.escape(what)} "
            f"({len(output.metrics)} epochs in {html.escape(str(output.path))}/metrics.jsonl; no model, no "
            "evaluation)</td></tr>")


def _table(runs: dict[str, list[RunOutput]]) -> str:
    head = "".join(f"<th>{html.escape(t)}</th>" for _, t, _ in _COLUMNS)
    rows, target = [], accuracy_target(runs)
    for name, outputs in runs.items():
        done = finished(outputs)
        if done:
            row = {"run": name, **summarise(outputs), "seeds": _seeds(outputs)}
            row["time_to_target"] = time_to_accuracy(outputs, target) if row["task"] == "node" else math.nan
            # a link run's metrics its evaluation did not give (no MRR: negatives shared by the split, as ogbl-collab's)
            measured = {k for o in done for k in (o.evaluation.link or {}).get("test", {})}
            row["unmeasured"] = set(LINK_METRICS) - measured if row["task"] == "link" else set()
            rows.append("<tr>" + "".join(f"<td>{_fmt(k, f, row[k], row)}</td>" for k, _, f in _COLUMNS) + "</tr>")
        rows.extend(_failed_row(o) for o in failed(outputs))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _check_out(out_dir: str | Path, run_dirs) -> None:
    """``--out`` is a directory, or a path where one can be made; else a one-line error."""
    target = check_location(out_dir, inputs=tuple(run_dirs), stage="sylvie report")
    if target.exists() and not target.is_dir():
        raise SylvieError(f"refusing --out {out_dir}: it exists and is not a directory; give a "
                          f"directory for report.html and its plots (a new one, or an earlier report's), e.g. "
                          f"--out {Path(out_dir).with_name(Path(out_dir).name + '-report')}")
    if target.is_dir():
        page = _ours(target / "report.html")  # an earlier report's plots are its page's (marked or not)
        theirs = ([] if page else ["report.html"]) + [f"{p}.png" for p in PLOTS
                                                      if not (page and (target / "report.html").is_file())
                                                      and not _ours(target / f"{p}.png")]
        if theirs:
            raise SylvieError(f"refusing --out {out_dir}: it holds {', '.join(theirs)}, which sylvie report did not "
                              f"write and would replace; nothing was changed. Give another --out, or move "
                              f"{'them' if len(theirs) > 1 else 'it'} away yourself")


def _ours(path: Path) -> bool:
    """``path`` does not exist, or is a file this stage wrote (its generator mark: the page's meta tag, the plot's
    PNG text chunk)."""
    if not path.exists():
        return True
    marks = _PAGE_MARKS if path.suffix == ".html" else (b"Software\x00" + SOFTWARE.encode(),)
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        return path.is_file() and any(m in head for m in marks)
    except OSError:
        return False


def _write_error(out_dir: str | Path, error: OSError) -> SylvieError:
    """A failed write into the report directory, in one line that says what to do."""
    said, do = system_said(error)
    on = f" ({error.filename})" if error.filename and Path(error.filename) != Path(out_dir) else ""
    refused = SylvieError(f"--out {out_dir}: could not write the report there: {said}{on}; {do}")
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # (a read-only disk may be a full one too)
        return refused
    return disk_full_error(Path(out_dir) / "report.html", error) or refused


_GENERATOR = '<meta name="generator" content="sylvie report">'
# the page's mark, and the sentence the pages written before it carry
_PAGE_MARKS = (_GENERATOR.encode(), b"Accuracy is from the evaluate\nstage (whole-graph inference")


def _page(title: str, runs: dict[str, list[RunOutput]], plots: dict[str, Path]) -> str:
    figures = "".join(
        f"<figure><img alt='{name}' src='data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}'>"
        f"<figcaption>{html.escape(_CAPTIONS[name])}</figcaption></figure>" for name, p in plots.items())
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    total = sum(len(o) for o in runs.values())
    stopped = sum(len(failed(o)) for o in runs.values())
    failed_note = f" ({stopped} of them stopped without a model, shown as failed)" if stopped else ""
    last = sorted({o.run for outs in runs.values() for o in outs
                   if o.evaluation is not None and o.evaluation.summary.get("model_chosen_by") == BY_LAST_EPOCH})
    last_note = (f" Runs whose graph has no validation nodes ({html.escape(', '.join(last))}): the model of their "
                 f"last epoch, which nothing could choose against." if last else "")
    link_note = (" Link-prediction runs: MRR and Hits@K of the test pairs, each ranked among its negatives as OGB "
                 "ranks them (Hits@K against negatives shared by the split where it has no negatives per pair), "
                 "from the same stage, mean ± std over seeds." if any(o.task == "link" for outs in runs.values()
                                                                      for o in outs) else "")
    return f"""<!doctype html>
<html><head><meta charset="utf-8">{_GENERATOR}<title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;font-size:14px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
th{{background:#f3f3f3}}tr.failed td{{color:#a00}}figure{{display:inline-block;margin:1em;max-width:48%}}
img{{max-width:100%}}figcaption{{font-size:13px;color:#555}}</style></head><body>
<h1>{html.escape(title)}</h1><p>{total} training runs{failed_note}; generated {stamp}. Accuracy is from the evaluate
stage (whole-graph inference in full precision, model of the best validation epoch), mean ± std over seeds.
{link_note}{last_note}</p>
<h2>Runs</h2>{_table(runs)}<h2>Plots</h2>{figures}</body></html>
"""


def write_report(run_dirs: list[str | Path], out_dir: str | Path, title: str) -> Path:
    """Write the plot PNGs, then ``report.html``, into ``out_dir``. Every run directory is read and checked before
    anything is written; the files are made in a scratch folder there and moved into place only when all of them
    are complete, so a failure (a full or read-only disk) leaves an earlier report as it was."""
    _check_out(out_dir, run_dirs)
    runs = collect(run_dirs)
    out = Path(out_dir)
    absolute = Path(os.path.abspath(out))
    made = [p for p in (absolute, *absolute.parents) if not p.exists()]  # deepest first: removed on failure
    try:
        out.mkdir(parents=True, exist_ok=True)
        with scratch_directory(out / "report.html") as scratch:
            plots = write_plots(runs, scratch)
            page = scratch / "report.html"
            page.write_text(_page(title, runs, plots))
            for p in [*plots.values(), page]:
                os.replace(p, out / p.name)
            for name in set(PLOTS) - plots.keys():  # an earlier report's plot this one has not (of a task it lacks)
                stale = out / f"{name}.png"
                if stale.is_file() and not stale.is_symlink() and _ours(stale):
                    stale.unlink()
    except OSError as e:
        error = _write_error(out_dir, e)  # (its free space measured before the folders go)
        for p in made:  # the directories this call made, if nothing else is in them
            with contextlib.suppress(OSError):
                p.rmdir()
        raise error from e
    return out / "report.html"
