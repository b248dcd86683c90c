"""The HTML report: a comparison table and the plots, in one self-contained page."""
from __future__ import annotations

import base64
import html
import math
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from sylvie.atomic import atomic_path
from sylvie.output_dir import check_location
from sylvie.report.collect import RunOutput, accuracy_target, collect, summarise, time_to_accuracy
from sylvie.report.plots import write_plots

_CAPTIONS = {
    "loss": "Training loss per epoch, mean over seeds.",
    "accuracy": "Validation (solid) and test (dashed) accuracy per epoch, mean over seeds.",
    "time_to_accuracy": "Validation accuracy against seconds of training (the epochs' times summed, evaluation "
                        "excluded), mean over seeds: what each regime and exchange buys in wall-clock. The dashed "
                        "line is the target of the table's \"s to target\" column: 98% of the lowest best "
                        "validation accuracy of any run, so every run reaches it.",
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
            ("seeds", "seeds", "{}"), ("test_acc", "test acc", "{:.2%}"), ("test_std", "± std", "{:.2%}"),
            ("val_acc", "val acc", "{:.2%}"), ("epochs", "epochs", "{}"), ("epoch_time", "s/epoch", "{:.4f}"),
            ("time_to_target", "s to target", "{:.2f}"),
            ("comm_time", "comm waited s/epoch", "{:.4f}"), ("hidden_comm_time", "comm hidden s/epoch", "{:.4f}"),
            ("codec_time", "codec s/epoch", "{:.4f}"), ("regime", "regime", "{}"), ("exchange", "exchange", "{}"),
            ("stale_share", "stale epochs", "{:.0%}"),
            ("bits", "bits", "{}"), ("mb_sent", "MB sent/epoch", "{:.3f}"), ("compression", "vs fp32", "{:.1f}x"),
            ("rows_per_batch", "input rows/batch", "{:.0f}"), ("cache_hit", "cache hits", "{:.0%}")]


def _fmt(fmt: str, v) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "–"
    return html.escape(fmt.format(v))


def _table(runs: dict[str, list[RunOutput]]) -> str:
    head = "".join(f"<th>{html.escape(t)}</th>" for _, t, _ in _COLUMNS)
    rows, target = [], accuracy_target(runs)
    for name, outputs in runs.items():
        row = {"run": name, **summarise(outputs), "time_to_target": time_to_accuracy(outputs, target)}
        rows.append("<tr>" + "".join(f"<td>{_fmt(f, row[k])}</td>" for k, _, f in _COLUMNS) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def write_report(run_dirs: list[str | Path], out_dir: str | Path, title: str) -> Path:
    """Write the plot PNGs, then ``report.html``, into ``out_dir``; each file appears atomically."""
    check_location(out_dir, inputs=tuple(run_dirs), stage="sylvie report")
    runs = collect(run_dirs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".plots-", dir=out_dir) as scratch:
        plots = write_plots(runs, Path(scratch))
        figures = "".join(
            f"<figure><img alt='{name}' src='data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}'>"
            f"<figcaption>{html.escape(_CAPTIONS[name])}</figcaption></figure>" for name, p in plots.items())
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;font-size:14px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
th{{background:#f3f3f3}}figure{{display:inline-block;margin:1em;max-width:48%}}img{{max-width:100%}}
figcaption{{font-size:13px;color:#555}}</style></head><body>
<h1>{html.escape(title)}</h1><p>{len(run_dirs)} training runs; generated {stamp}. Accuracy is from the evaluate
stage (whole-graph inference in full precision, model of the best validation epoch), mean ± std over seeds.</p>
<h2>Runs</h2>{_table(runs)}<h2>Plots</h2>{figures}</body></html>
"""
        for p in plots.values():
            os.replace(p, out_dir / p.name)
    with atomic_path(out_dir / "report.html") as tmp_html:
        tmp_html.write_text(page)
    return out_dir / "report.html"
