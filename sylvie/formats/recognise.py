"""Which of our JSON formats a file is, by each format's marker keys, so a reader given the wrong one names it ("it
looks like a partition manifest"). The epoch record's and evaluation's keys live here, and their modules read them
from here (imports go one way).
"""
from __future__ import annotations

# an epoch record of metrics.jsonl: the keys every line has
EPOCH_RECORD_KEYS = frozenset({"epoch", "loss"})
# an evaluation (eval.json): the keys that mark a JSON object as one (eval_result reads them from here)
EVAL_RESULT_KEYS = frozenset({"dataset", "model", "train", "test_acc"})


def _formats() -> tuple[tuple[frozenset, str], ...]:
    """(marker keys, the format in words), the first that fits a file's keys being what it is. Built on use: the
    format modules read through this one."""
    from dataclasses import fields

    from sylvie.formats.run_failure import RunFailure
    from sylvie.output_dir import CANONICAL_GRAPH, PARTITION, VIP

    return (
        (frozenset(f.name for f in fields(RunFailure)), "a run failure record (failed.json)"),
        (frozenset(PARTITION.marker_keys), "a partition manifest (manifest.json of `sylvie partition`)"),
        (frozenset(VIP.marker_keys), "a VIP analysis manifest (manifest.json of `sylvie vip`)"),
        (frozenset(CANONICAL_GRAPH.marker_keys), "a dataset's meta.json (`sylvie download`)"),
        (EPOCH_RECORD_KEYS, "an epoch record of metrics.jsonl (`sylvie train`)"),
        (EVAL_RESULT_KEYS, "an evaluation (eval.json of `sylvie evaluate`)"),
    )


def looks_like(obj, expected: str) -> str:
    """'; it looks like <format>' where ``obj`` (a file's parsed JSON) is another of our formats than the file
    ``expected`` (its name: 'eval.json', 'metrics.jsonl'), else ''."""
    if isinstance(obj, dict):
        for keys, what in _formats():
            if keys <= obj.keys():
                return f"; it looks like {what}" if expected not in what else ""
    return ""
