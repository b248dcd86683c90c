"""Gather the outputs of training runs (one directory per run and seed) for the report.

A run directory holds ``metrics.jsonl`` (``sylvie train``) and ``eval.json`` (``sylvie evaluate``), or, when its
training stopped without a model, ``metrics.jsonl`` of the epochs it ran and ``failed.json``. Runs are grouped by
what they are: their folder (the run directory's parent) and the settings ``eval.json`` records, all but the seed.
Every file is checked before anything is written: a missing, damaged or foreign file is a one-line error.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sylvie.errors import SylvieError
from sylvie.run_failure import RunFailure, read_run_failure


@dataclass
class RunOutput:
    run: str
    seed: int | None
    metrics: list[dict]
    evaluation: dict  # empty for a run that failed
    path: Path | None = None  # the run directory, as given
    failure: RunFailure | None = None  # why training stopped without a model (failed.json), or None

    def series(self, key: str) -> np.ndarray:
        return np.array([m.get(key) for m in self.metrics], dtype=float)  # missing or null: nan

    @property
    def name(self) -> str:
        """The run directory's name (``seed0``), for a run that is shown on its own."""
        return _absolute(self.path).name if self.path is not None else f"seed{self.seed}"

    def failure_text(self) -> str:
        """The failure in words: 'diverged at epoch 12', 'failed: non-finite loss at epoch 3'."""
        f = self.failure
        if f is None:
            return ""
        if f.reason == "diverged":
            return f"diverged at epoch {f.epoch}"
        return f"failed: non-finite loss at epoch {f.epoch}"


def finished(outputs: list[RunOutput]) -> list[RunOutput]:
    """The runs that trained to the end and were evaluated."""
    return [o for o in outputs if o.failure is None]


def failed(outputs: list[RunOutput]) -> list[RunOutput]:
    return [o for o in outputs if o.failure is not None]


# ---- reading and checking one run directory ------------------------------------------------------------------

_NUMBER = (int, float)
# What the report reads of eval.json: dotted key -> accepted types (None: null allowed); optional keys end in '?'
_EVAL_FIELDS = {
    "dataset": (str,), "num_parts": (int,), "test_acc": (*_NUMBER, type(None)), "val_acc": (*_NUMBER, type(None)),
    "model": (dict,), "model.arch": (str,), "train": (dict,), "train.seed": (int,), "comm?": (dict,),
    "comm.bits?": (int,), "comm.pipeline?": (bool,), "comm.staleness?": (int,), "comm.staleness_policy?": (str,),
    "sampling?": (dict,), "cache?": (dict,), "cache.policy?": (str,), "cache.alpha?": _NUMBER, "features?": (dict,),
}
# What the report reads of an epoch record (each optional but loss, all numbers or null)
_METRIC_FIELDS = ("epoch", "loss", "val_acc", "test_acc", "epoch_time", "compute_time", "comm_time", "codec_time",
                  "hidden_comm_time", "bits", "bytes_sent", "fp32_bytes_sent", "staleness", "input_rows_per_batch",
                  "cache_hit_rate", "rows_local", "rows_cached", "rows_remote")
# Our other JSON formats, by the keys that mark them: a file of one of them given as another is named as such
_OUR_FORMATS = (
    ({"reason", "epoch", "message"}, "a run failure record (failed.json)"),
    ({"format_version", "parts", "num_parts"}, "a partition manifest (manifest.json of `sylvie partition`)"),
    ({"kind", "fanouts", "batch_size", "parts"}, "a VIP analysis manifest (manifest.json of `sylvie vip`)"),
    ({"format_version", "fingerprint"}, "a dataset's meta.json (`sylvie download`)"),
    ({"epoch", "loss"}, "an epoch record of metrics.jsonl (`sylvie train`)"),
    ({"dataset", "model", "train", "test_acc"}, "an evaluation (eval.json of `sylvie evaluate`)"),
)


_TYPE_WORDS = {int: "an integer", str: "a string", dict: "an object", bool: "true or false"}


def _which_format(obj) -> str | None:
    if isinstance(obj, dict):
        for keys, what in _OUR_FORMATS:
            if keys <= obj.keys():
                return what
    return None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _read_text(path: Path, what: str, fix: str) -> str:
    """The file's text; a missing, unreadable or non-UTF-8 file is a one-line error."""
    if path.is_dir():
        raise SylvieError(f"{path}: {what} expected here, found a directory; {fix}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SylvieError(f"{path}: {what} not found; {fix}") from None
    except OSError as e:
        raise SylvieError(f"{path}: {what} cannot be read ({e.strerror or e}); {fix}") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SylvieError(f"{path}: not UTF-8 text (byte {e.start}), so no {what}: the file is damaged; "
                          f"{fix}") from e


def _type_problem(obj: dict, fields: dict) -> str | None:
    """The first field of ``fields`` that ``obj`` lacks or holds with another type, in words, or None."""
    for spec, types in fields.items():
        key, optional = spec.rstrip("?"), spec.endswith("?")
        value, present = obj, True
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                present = False
                break
            value = value[part]
        if not present:
            if optional:
                continue
            return f"no '{key}'"
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):  # true is no number
            wanted = "a number" if float in types else _TYPE_WORDS[types[0]]
            return f"'{key}' is {json.dumps(value)[:40]}, not {wanted}"
    return None


def _read_eval(run_dir: Path) -> dict:
    path = run_dir / "eval.json"
    fix = (f"rerun `sylvie evaluate` for this run (it writes {path.name}), or leave {run_dir} out of the report")
    text = _read_text(path, "evaluation (eval.json of `sylvie evaluate`)", fix)
    try:
        ev = json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise SylvieError(f"{path}: not valid JSON ({e}); the file is damaged or cut short: {fix}") from e
    if not isinstance(ev, dict):
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` (a JSON {type(ev).__name__}, not "
                          f"an object); {fix}")
    problem = _type_problem(ev, _EVAL_FIELDS)
    if problem:
        other = _which_format(ev)
        looks = f"; it looks like {other}" if other and "eval.json" not in other else ""
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` ({problem}{looks}); {fix}")
    return ev


def _read_metrics(run_dir: Path, required: bool) -> list[dict]:
    """The epoch records of ``metrics.jsonl``; for a run that failed (``required`` False) it may be missing or
    empty (it stopped in its first epoch)."""
    path = run_dir / "metrics.jsonl"
    fix = f"rerun `sylvie train` for this run (it writes {path.name}), or leave {run_dir} out of the report"
    if not required and not path.exists():
        return []
    text = _read_text(path, "metrics file (metrics.jsonl of `sylvie train`)", fix)
    records = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_constant=lambda c: float(c))  # NaN/Infinity: numbers, shown in words
        except ValueError as e:
            raise SylvieError(f"{path}: line {i} is not valid JSON ({e}); the file is damaged or cut short: "
                              f"{fix}") from e
        problem = (f"a JSON {type(rec).__name__}, not an object" if not isinstance(rec, dict) else
                   _type_problem(rec, {"loss": (*_NUMBER, type(None))}) or
                   _type_problem(rec, {f"{k}?": (*_NUMBER, type(None)) for k in _METRIC_FIELDS}))
        if problem:
            other = _which_format(rec)
            looks = f"; it looks like {other}" if other and "metrics.jsonl" not in other else ""
            raise SylvieError(f"{path}: line {i} is not an epoch record written by `sylvie train` ({problem}{looks}); "
                              f"{fix}")
        records.append(rec)
    if required and not records:
        raise SylvieError(f"{path}: holds no epochs (the file is empty); {fix}")
    return records


def read_run(run_dir: str | Path) -> RunOutput:
    """One run directory, checked: a finished run (eval.json) or one that failed (failed.json)."""
    given = Path(run_dir)
    if not given.exists():
        raise SylvieError(f"{given}: no such run directory; give the directories `sylvie train` wrote (e.g. "
                          f"results/gcn-p4/seed0)")
    if not given.is_dir():
        raise SylvieError(f"{given}: not a run directory (it is a file); give the directory that holds its "
                          f"metrics.jsonl and eval.json (e.g. results/gcn-p4/seed0)")
    failure = read_run_failure(given)
    if failure is not None:  # no model, no evaluation: the epochs it ran, and why it stopped
        m = re.fullmatch(r"seed(\d+)", _absolute(given).name)
        return RunOutput("", int(m[1]) if m else None, _read_metrics(given, required=False), {}, given, failure)
    ev = _read_eval(given)
    return RunOutput("", int(ev["train"]["seed"]), _read_metrics(given, required=True), ev, given)


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path)))


def location(output: RunOutput) -> Path:
    """The folder a run directory is in (symlinks resolved): with its settings, what tells runs apart."""
    return _absolute(output.path).parent.resolve()


# ---- grouping --------------------------------------------------------------------------------------------------

# Knobs that change how a run was watched, not what it computed or how fast: seeds differing only in them are one run
_NOT_WHAT_RUNS = {"train.seed", "train.progress", "train.log_every", "train.checkpoint_every", "train.timeout",
                  "train.startup_timeout"}


def run_settings(evaluation: dict) -> dict:
    """What a run is, as its eval.json records it (flat, ``section.knob``), without the seed."""
    flat = {"dataset": evaluation["dataset"], "parts": evaluation["num_parts"]}
    for sec in ("model", "train", "comm", "sampling", "cache", "features"):
        flat.update({f"{sec}.{k}": v for k, v in (evaluation.get(sec) or {}).items()})
    return {k: v for k, v in flat.items() if k not in _NOT_WHAT_RUNS}


@dataclass
class _Group:
    parent: Path
    settings: dict | None  # None: failed runs whose settings no eval.json records
    outputs: list[RunOutput] = field(default_factory=list)


def _path_labels(parents: set[Path]) -> dict[Path, str]:
    """Each folder by its name, or by as much of its path as tells it from other folders of the same name."""
    labels = {}
    for name in {p.name for p in parents}:
        same = sorted(p for p in parents if p.name == name)
        k = 1
        while len({Path(*p.parts[-k:]) for p in same}) < len(same):
            k += 1
        labels.update({p: str(Path(*p.parts[-k:])) for p in same})
    return labels


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _labels(groups: list[_Group]) -> list[str]:
    """Distinct labels: the folder (``_path_labels``), then, where a folder holds runs of several settings, the
    settings that differ between them."""
    by_path = _path_labels({g.parent for g in groups})
    labels = []
    for g in groups:
        siblings = [s for s in groups if s.parent == g.parent]
        label = by_path[g.parent]
        if len(siblings) > 1:
            if g.settings is None:
                label += " (failed runs, settings not recorded)"
            else:
                keys = sorted({k for s in siblings if s.settings is not None
                               for k in s.settings.keys() | g.settings.keys()
                               if s.settings.get(k, "(unset)") != g.settings.get(k, "(unset)")})
                shown = [f"{k.split('.')[-1]}={_show(g.settings.get(k, '(unset)'))}" for k in keys[:4]]
                label += f" ({', '.join(shown)}{', …' if len(keys) > 4 else ''})"
        labels.append(label)
    repeated, counts = {x for x in labels if labels.count(x) > 1}, {}
    for i, label in enumerate(labels):  # settings that differ only beyond the first four: number them
        if label in repeated:
            counts[label] = counts.get(label, 0) + 1
            labels[i] = f"{label} #{counts[label]}"
    return labels


def collect(run_dirs: list[str | Path]) -> dict[str, list[RunOutput]]:
    """Run group label -> its seeds' outputs (sorted by seed; runs that failed last). Every directory is read and
    checked first. A directory given twice (also through another path or a symlink) counts once; two directories
    recording the same seed of the same run are an error."""
    outputs, seen = [], {}
    for d in run_dirs:
        out = read_run(d)
        same = _absolute(out.path).resolve()
        if same in seen:
            also = "" if str(d) == str(seen[same]) else f" (also as {seen[same]})"
            print(f"sylvie report: {d}: given more than once{also}; it counts once", file=sys.stderr)
            continue
        seen[same] = d
        outputs.append(out)

    groups: dict[tuple, _Group] = {}
    for o in finished(outputs):
        settings = run_settings(o.evaluation)
        key = (location(o), json.dumps(settings, sort_keys=True))
        groups.setdefault(key, _Group(location(o), settings)).outputs.append(o)
    for o in failed(outputs):  # a failed run records no settings: it is a seed of the one run of its folder, if one
        where = location(o)
        here = [g for g in groups.values() if g.parent == where and g.settings is not None]
        group = here[0] if len(here) == 1 else groups.setdefault((where, None), _Group(where, None))
        group.outputs.append(o)

    ordered = list(groups.values())
    labels = _labels(ordered)
    for g, label in zip(ordered, labels):
        by_seed = {}
        for o in g.outputs:  # (a failed run's seed is only its folder's name: not checked)
            if o.failure is None and o.seed in by_seed:
                raise SylvieError(f"{by_seed[o.seed].path} and {o.path}: both record seed {o.seed} of the same run "
                                  f"(same settings, same folder {g.parent}); one is a copy of the other: give only "
                                  "one of them to `sylvie report`")
            if o.failure is None:
                by_seed[o.seed] = o
            o.run = label
        g.outputs.sort(key=lambda o: (o.failure is not None, -1 if o.seed is None else o.seed, str(o.path)))
    return {label: g.outputs for label, g in sorted(zip(labels, ordered), key=lambda x: x[0])}


# ---- what the table and the plots show -------------------------------------------------------------------------

def summarise(outputs: list[RunOutput]) -> dict:
    """One row of the comparison table: mean (and std) over the seeds that finished (at least one)."""
    outputs = finished(outputs)
    ev0 = outputs[0].evaluation
    test = np.array([o.evaluation["test_acc"] for o in outputs], dtype=float)  # null (no such nodes) -> nan
    val = np.array([o.evaluation["val_acc"] for o in outputs], dtype=float)

    def mean_of(key, default=0.0):
        if key not in outputs[0].metrics[0]:  # metrics written before the key existed, or of the other regime
            return default
        per_run = [o.series(key) for o in outputs]  # null (e.g. no hit rate without remote rows) -> nan
        values = np.concatenate([v[~np.isnan(v)] for v in per_run])
        return float(values.mean()) if values.size else default

    return {
        "dataset": ev0["dataset"], "parts": ev0["num_parts"], "arch": ev0["model"]["arch"],
        "seeds": len(outputs), "test_acc": float(test.mean()), "test_std": float(test.std()),
        "val_acc": float(val.mean()), "epochs": len(outputs[0].metrics),
        "epoch_time": mean_of("epoch_time"), "compute_time": mean_of("compute_time"),
        "comm_time": mean_of("comm_time"), "codec_time": mean_of("codec_time"),
        "bits": int(outputs[0].metrics[0].get("bits") or 32), "mb_sent": mean_of("bytes_sent") / 1e6,
        "compression": mean_of("fp32_bytes_sent", float("nan")) / max(mean_of("bytes_sent"), 1.0),
        "hidden_comm_time": mean_of("hidden_comm_time"), "stale_share": mean_of("staleness"),
        "exchange": exchange_mode(outputs[0].evaluation),
        "regime": "sampled" if "sampling" in ev0 else "full-graph",
        "rows_per_batch": mean_of("input_rows_per_batch", float("nan")),
        "cache_hit": mean_of("cache_hit_rate", float("nan")),
        "rows_local": mean_of("rows_local", float("nan")), "rows_cached": mean_of("rows_cached", float("nan")),
        "rows_remote": mean_of("rows_remote", float("nan")),
    }


def training_seconds(output: RunOutput) -> np.ndarray:
    """Seconds of training up to the end of each epoch (an epoch without a time counts 0; an infinite one stays
    infinite, never the largest float)."""
    return np.cumsum(np.nan_to_num(output.series("epoch_time"), nan=0.0, posinf=math.inf, neginf=-math.inf))


def accuracy_over_time(outputs: list[RunOutput]) -> tuple[np.ndarray, np.ndarray]:
    """Validation accuracy against training wall-clock, means over seeds: the seconds of training (epoch times,
    evaluation excluded) summed up to the end of each epoch, and that epoch's validation accuracy (nan when the
    epoch was not evaluated). Runs that failed are left out (with none finished: empty arrays)."""
    outputs = finished(outputs)
    if not outputs:
        return np.zeros(0), np.zeros(0)
    n = min(len(o.metrics) for o in outputs)
    seconds = np.mean([training_seconds(o)[:n] for o in outputs], axis=0)
    return seconds, np.mean([o.series("val_acc")[:n] for o in outputs], axis=0)


def accuracy_target(runs: dict[str, list[RunOutput]], share: float = 0.98) -> float:
    """A validation accuracy every run reaches: ``share`` of the lowest best (mean) validation accuracy of any
    run (runs that failed are left out)."""
    best = [np.nanmax(acc) for _, acc in map(accuracy_over_time, runs.values())
            if acc.size and not np.isnan(acc).all()]
    return share * min(best) if best else float("nan")


def time_to_accuracy(outputs: list[RunOutput], target: float) -> float:
    """Seconds of training until the mean validation accuracy first reaches ``target`` (nan if never)."""
    seconds, acc = accuracy_over_time(outputs)
    reached = np.nonzero(acc >= target)[0]
    return float(seconds[reached[0]]) if reached.size else float("nan")


def exchange_mode(evaluation: dict) -> str:
    """How a run moved data, in words: full-graph halo exchange sync, pipelined, pipelined K=5, adaptive K=5; for
    sampled runs the cache: vip cache α=0.2, no cache."""
    if "cache" in evaluation:
        cache = evaluation["cache"]
        if cache.get("policy") == "none" or not cache.get("alpha"):
            return "sampled, no cache"
        return f"sampled, {cache['policy']} cache α={cache['alpha']:g}"
    comm = evaluation.get("comm", {})
    if not comm.get("pipeline"):
        return "sync"
    k = comm.get("staleness", 0)
    name = "adaptive" if comm.get("staleness_policy") == "adaptive" else "pipelined"
    return f"{name} K={k}" if k else name
