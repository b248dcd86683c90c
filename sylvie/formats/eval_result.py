"""What ``sylvie evaluate`` writes as ``eval.json``; this module is its only writer and reader.

One JSON object: the dataset, the task, the evaluator, how inference ran, each split's accuracy (a link run's: its
headline ranking metric, and all its ranking metrics under ``link``), the run's sections, the training summary, and a
checksum (a damaged or edited file is refused). Files without ``format_version`` are read as version 1; another
version is refused: rerun ``sylvie evaluate``. Files without ``task`` (written before link prediction) are node
classification's. Fields: below.
"""
# eval.json's fields:
#
#     format_version          this format's version
#     dataset                 the dataset's name
#     task                    "node" (node classification) or "link" (link prediction); absent in files written
#                             before link prediction: "node"
#     evaluator               node: "ogb" (OGB's Evaluator, for ogbn-* datasets) or "accuracy"; link: "ogb" (OGB's
#                             Evaluator, for ogbl-* datasets) or "ranking" (sylvie.runtime.ranking)
#     inference               how inference ran, in words ("whole graph, one process", "partition-parallel, 4 ranks")
#     train_acc, val_acc, test_acc   node: accuracy on each split's nodes (``SPLITS``); link: the split's headline
#                             ranking metric (``HEADLINE``): its MRR where its pairs have negatives of their own, else
#                             (negatives shared by the split, as ogbl-collab's) its Hits@50 (so a reader of accuracies
#                             keeps one number per split); null where a split has no nodes or pairs, or is not ranked
#                             (a link run's train split)
#     link                    a link run's only: split -> its ranking metrics, each a number or null (no pairs):
#                             {"val": {"mrr", "hits@1", "hits@10", "hits@50", "hits@100", "auc"}, "test": {...}};
#                             which appear depends on the protocol: per-pair negatives give mrr, hits@K and auc,
#                             negatives shared by the split give hits@K and auc (no mrr)
#     model, train, comm      the run's sections as the model file records them (comm {} for a sampled run)
#     link_cfg                a link run's link section (decoder, loss, negatives, ...), as the model file records
#                             it (``link`` names the metrics); absent for a node run
#     sampling, cache, features      a sampled run's sections (absent for a full-graph run)
#     ...                     the training summary's fields, at the top level: best_epoch, best_val_acc,
#                             test_acc_at_best_val, num_parts, setup_bytes and what the trainer adds
#     checksum                of all the other fields (``sylvie.formats.checksum``)
from __future__ import annotations

import json
import math
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sylvie.atomic import json_safe, write_json
from sylvie.errors import SylvieError
from sylvie.formats.checked_json import loads_strict, read_text, schema_problem
from sylvie.formats.checksum import FIELD, checked, with_checksum
from sylvie.formats.recognise import EVAL_RESULT_KEYS, looks_like
from sylvie.formats.splits import SPLITS

FORMAT_VERSION = 1
FILE = "eval.json"
MARKER_KEYS = EVAL_RESULT_KEYS  # what marks a JSON object as an evaluation
_MOST_BYTES = 16 << 20  # an eval.json is a few kB: a file larger is not one (and is not read whole to say so)
_SAMPLED_SECTIONS = ("sampling", "cache", "features")
SECTIONS = ("model", "train", "comm", *_SAMPLED_SECTIONS)  # the run's config sections it records (EvalResult's fields)
TASKS = ("node", "link")
HEADLINE = ("mrr", "hits@50")  # a link split's {split}_acc: the first of these it has
_LINK_METRIC = re.compile(r"mrr|auc|hits@[1-9][0-9]*")  # the names of a link split's metrics
# What reading needs of eval.json (JSON Schema; accuracies null where a split has no nodes)
_ACCURACY, _OBJECT = {"type": ["number", "null"]}, {"type": "object"}
SCHEMA = {
    "type": "object", "required": ["dataset", "num_parts", "test_acc", "val_acc", "model", "train"],
    "properties": {
        "dataset": {"type": "string"}, "evaluator": {"type": "string"}, "inference": {"type": "string"},
        "num_parts": {"type": "integer"}, **{f"{s}_acc": _ACCURACY for s in SPLITS},
        "model": {"type": "object", "required": ["arch"], "properties": {"arch": {"type": "string"}}},
        "train": {"type": "object", "required": ["seed"], "properties": {"seed": {"type": "integer"}}},
        "comm": {"type": "object", "properties": {"bits": {"type": "integer"}, "pipeline": {"type": "boolean"},
                                                  "staleness": {"type": "integer"},
                                                  "staleness_policy": {"type": "string"}}},
        "sampling": _OBJECT, "features": _OBJECT, "link_cfg": _OBJECT,
        "cache": {"type": "object", "properties": {"policy": {"type": "string"}, "alpha": {"type": "number"}}},
        "task": {"enum": list(TASKS)},
        "link": {"type": "object", "propertyNames": {"enum": list(SPLITS)},
                 "additionalProperties": {"type": "object", "additionalProperties": _ACCURACY,
                                          "propertyNames": {"pattern": f"^({_LINK_METRIC.pattern})$"}}},
    },
    "if": {"required": ["task"], "properties": {"task": {"const": "link"}}}, "then": {"required": ["link"]},
}
_OWN_KEYS = {"format_version", "dataset", "task", "evaluator", "inference", "link", "link_cfg", *SECTIONS,
             *(f"{s}_acc" for s in SPLITS), FIELD}


def headline(metrics: dict[str, float]) -> float:
    """A link split's one number, its ``{split}_acc`` in eval.json: the first of ``HEADLINE`` its ``metrics`` have
    (MRR, else Hits@50); nan where it has neither."""
    return next((float(metrics[k]) for k in HEADLINE if k in metrics), math.nan)


def link_accuracies(link: dict[str, dict[str, float]]) -> dict[str, float]:
    """A link run's ``accuracies`` (``EvalResult``): each split's ``headline``, nan for a split not ranked."""
    return {s: headline(link[s]) if s in link else math.nan for s in SPLITS}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@dataclass(frozen=True)
class EvalResult:
    dataset: str
    evaluator: str | None  # node: "ogb" or "accuracy"; link: "ogb" or "ranking"; None: not recorded
    inference: str | None  # how inference ran, in words; None: not recorded (written before there were two ways)
    # split -> accuracy on its nodes, nan where the split has no nodes; a link run's: ``link_accuracies(link)``
    accuracies: dict[str, float]
    model: dict
    train: dict
    summary: dict  # the training summary (num_parts among it); top-level fields in the file
    comm: dict = field(default_factory=dict)  # {} for a sampled run
    sampling: dict | None = None  # a sampled run's sections; None for a full-graph run
    cache: dict | None = None
    features: dict | None = None
    task: str = "node"  # "node" or "link"
    # a link run's ranking metrics: split ("val", "test") -> {"mrr", "hits@K", "auc"} (nan: no pairs); None for node
    link: dict[str, dict[str, float]] | None = None
    link_cfg: dict | None = None  # a link run's link section (the model file's link_cfg); None: a node run's

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"EvalResult.task {self.task!r}: one of {', '.join(TASKS)}")
        if (self.link is None) != (self.task == "node"):
            raise ValueError(f"EvalResult of task {self.task}: link metrics for a link run, none for a node run")
        if self.link is None:
            return
        for split, metrics in self.link.items():
            odd = [k for k in metrics if not _LINK_METRIC.fullmatch(k)]
            if split not in SPLITS or odd:
                raise ValueError(f"EvalResult.link: {split!r} -> {sorted(metrics)}; splits are {', '.join(SPLITS)}, "
                                 "metrics mrr, auc and hits@K")
        expected = link_accuracies(self.link)
        if not all(_same(float(self.accuracies[s]), expected[s]) for s in SPLITS):
            raise ValueError(f"EvalResult of a link run: accuracies {self.accuracies} are not each split's headline "
                             f"metric {expected} (link_accuracies(link))")

    @property
    def num_parts(self) -> int:
        return self.summary["num_parts"]

    def content(self) -> dict:
        """eval.json's object (non-finite accuracies as they are: ``write_json`` makes them null)."""
        clash = _OWN_KEYS & self.summary.keys()
        if clash:
            raise ValueError(f"the training summary's {sorted(clash)} would overwrite eval.json's own fields")
        return {"format_version": FORMAT_VERSION, "dataset": self.dataset, "task": self.task,
                "evaluator": self.evaluator, "inference": self.inference,
                **{f"{s}_acc": self.accuracies[s] for s in SPLITS},
                **({"link": self.link} if self.link is not None else {}),
                **({"link_cfg": self.link_cfg} if self.link_cfg is not None else {}),
                "model": self.model, "train": self.train, "comm": self.comm,
                **{s: getattr(self, s) for s in _SAMPLED_SECTIONS if getattr(self, s) is not None}, **self.summary}


def write_eval_result(path: str | Path, result: EvalResult) -> dict:
    """Write ``result`` to ``path`` atomically; returns the object written."""
    content = result.content()
    write_json(path, with_checksum(json_safe(content)))
    return content


def foreign(path: str | Path) -> str | None:
    """Why the existing file ``path`` is not an eval.json this module wrote, which evaluate may replace; None where
    it is one: a JSON object of eval.json's fields (its checksum not checked: a damaged or pre-checksum one of ours is
    still replaced, as its reader's error says to do). Read only up to ``_MOST_BYTES``; a user's file is never
    replaced."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
        with open(path, "rb") as f:
            head = f.read(_MOST_BYTES + 1)
        if len(head) > _MOST_BYTES:
            return f"over {_MOST_BYTES >> 20} MiB"
        obj = json.loads(head)
    except OSError as e:
        return f"not readable: {e.strerror or e}"
    except ValueError:
        return "not JSON"
    if not isinstance(obj, dict) or not MARKER_KEYS <= obj.keys() or schema_problem(obj, SCHEMA):
        return "not of its fields"
    return None


def read_eval_result(path: str | Path, fix: str | None = None) -> EvalResult:
    """The evaluation in ``path``, checked; a missing, damaged, foreign or edited file, or one of another version,
    is a one-line error naming it and ending with ``fix`` (what to do; by default: rerun ``sylvie evaluate``)."""
    path = Path(path)
    fix = fix or f"rerun `sylvie evaluate` (it writes {path.name})"
    obj = loads_strict(read_text(path, "evaluation (eval.json of `sylvie evaluate`)", fix), path, fix)
    if not isinstance(obj, dict):
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` (a JSON {type(obj).__name__}, "
                          f"not an object); {fix}")
    version = obj.get("format_version", 1)  # written before the version was recorded: version 1
    if MARKER_KEYS <= obj.keys() and version != FORMAT_VERSION:  # an evaluation, of another version
        raise SylvieError(f"{path}: an evaluation of format version {json.dumps(version)[:40]}; this sylvie reads "
                          f"version {FORMAT_VERSION}: {fix}")
    problem = schema_problem(obj, SCHEMA)
    if problem:
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` ({problem}"
                          f"{looks_like(obj, FILE)}); {fix}")
    obj = checked(obj, path, "sylvie evaluate", fix, FILE)
    acc = {s: obj.get(f"{s}_acc") for s in SPLITS}
    link = obj.get("link")
    if link is not None:
        link = {s: {k: _number(v) for k, v in metrics.items()} for s, metrics in link.items()}
    try:
        return EvalResult(dataset=obj["dataset"], evaluator=obj.get("evaluator"), inference=obj.get("inference"),
                          accuracies={s: _number(a) for s, a in acc.items()},
                          model=obj["model"], train=obj["train"], comm=obj.get("comm", {}),
                          summary={k: v for k, v in obj.items() if k not in _OWN_KEYS},
                          **{s: obj.get(s) for s in _SAMPLED_SECTIONS}, task=obj.get("task", "node"), link=link,
                          link_cfg=obj.get("link_cfg"))
    except ValueError as e:  # (its checksum held: written so by hand, or by a writer that was wrong)
        raise SylvieError(f"{path}: not an evaluation written by `sylvie evaluate` ({e}); {fix}") from None


def _number(value) -> float:
    """A metric as read: null (nothing measured) is nan."""
    return math.nan if value is None else float(value)
