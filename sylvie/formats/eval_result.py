"""What ``sylvie evaluate`` writes as ``eval.json``; this module is its only writer and reader.

One JSON object: the dataset, the evaluator, how inference ran, each split's accuracy, the run's sections, the
training summary, and a checksum (a damaged or edited file is refused). Files without ``format_version`` are read as
version 1; another version is refused: rerun ``sylvie evaluate``. Fields: below.
"""
# eval.json's fields:
#
#     format_version          this format's version
#     dataset                 the dataset's name
#     evaluator               "ogb" (OGB's Evaluator, for ogbn-* datasets) or "accuracy"
#     inference               how inference ran, in words ("whole graph, one process", "partition-parallel, 4 ranks")
#     train_acc, val_acc, test_acc   accuracy on each split's nodes (``SPLITS``); null where a split has no nodes
#     model, train, comm      the run's sections as the model file records them (comm {} for a sampled run)
#     sampling, cache, features      a sampled run's sections (absent for a full-graph run)
#     ...                     the training summary's fields, at the top level: best_epoch, best_val_acc,
#                             test_acc_at_best_val, num_parts, setup_bytes and what the trainer adds
#     checksum                of all the other fields (``sylvie.formats.checksum``)
from __future__ import annotations

import json
import math
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
        "sampling": _OBJECT, "features": _OBJECT,
        "cache": {"type": "object", "properties": {"policy": {"type": "string"}, "alpha": {"type": "number"}}},
    },
}
_OWN_KEYS = {"format_version", "dataset", "evaluator", "inference", *SECTIONS, *(f"{s}_acc" for s in SPLITS),
             FIELD}


@dataclass(frozen=True)
class EvalResult:
    dataset: str
    evaluator: str | None  # "ogb" or "accuracy"; None: not recorded
    inference: str | None  # how inference ran, in words; None: not recorded (written before there were two ways)
    accuracies: dict[str, float]  # split -> accuracy on its nodes; nan where the split has no nodes
    model: dict
    train: dict
    summary: dict  # the training summary (num_parts among it); top-level fields in the file
    comm: dict = field(default_factory=dict)  # {} for a sampled run
    sampling: dict | None = None  # a sampled run's sections; None for a full-graph run
    cache: dict | None = None
    features: dict | None = None

    @property
    def num_parts(self) -> int:
        return self.summary["num_parts"]

    def content(self) -> dict:
        """eval.json's object (non-finite accuracies as they are: ``write_json`` makes them null)."""
        clash = _OWN_KEYS & self.summary.keys()
        if clash:
            raise ValueError(f"the training summary's {sorted(clash)} would overwrite eval.json's own fields")
        return {"format_version": FORMAT_VERSION, "dataset": self.dataset, "evaluator": self.evaluator,
                "inference": self.inference, **{f"{s}_acc": self.accuracies[s] for s in SPLITS},
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
    return EvalResult(dataset=obj["dataset"], evaluator=obj.get("evaluator"), inference=obj.get("inference"),
                      accuracies={s: math.nan if a is None else float(a) for s, a in acc.items()},
                      model=obj["model"], train=obj["train"], comm=obj.get("comm", {}),
                      summary={k: v for k, v in obj.items() if k not in _OWN_KEYS},
                      **{s: obj.get(s) for s in _SAMPLED_SECTIONS})
