"""Which run directories make one run of the report, and its label.

Runs are grouped by what they are: their folder (the run directory's parent) and the settings ``eval.json`` records,
all but the seed; each group is one row of the table and one line of the plots, its seeds the directories in it.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from sylvie.errors import SylvieError
from sylvie.formats.eval_result import SECTIONS, EvalResult
from sylvie.report.run_output import RunOutput, failed, finished, read_run

log = logging.getLogger(__name__)

# Knobs that change how a run was watched, not what a finished run computed or how fast: seeds differing only in
# them (or written before one of them existed) are one run
_NOT_WHAT_RUNS = {"train.seed", "train.progress", "train.log_every", "train.checkpoint_every", "train.timeout",
                  "train.startup_timeout", "train.divergence_factor", "train.divergence_patience"}
# Knobs that change what runs, added later, at the value that means what runs written before them did: such a run
# is one with that value (a run at boundary_sampling 1 and one from before the knob are one run; one at 0.1 is not)
_BEFORE_THE_KNOB = {"train.boundary_sampling": 1.0}


def run_settings(evaluation: EvalResult) -> dict:
    """What a run is, as its eval.json records it (flat, ``section.knob``), without the seed."""
    flat = {"dataset": evaluation.dataset, "parts": evaluation.num_parts}
    for sec in SECTIONS:
        flat.update({f"{sec}.{k}": v for k, v in (getattr(evaluation, sec) or {}).items()})
    flat.update({f"link.{k}": v for k, v in (evaluation.link_cfg or {}).items()})  # a link run's decoder, loss, ...
    for key, value in _BEFORE_THE_KNOB.items():
        if getattr(evaluation, key.split(".")[0]) is not None:  # a number: 1 and 1.0 are one setting
            flat[key] = float(flat.get(key, value))
    return {k: v for k, v in flat.items() if k not in _NOT_WHAT_RUNS}


def location(output: RunOutput) -> Path:
    """The folder a run directory is in (symlinks resolved): with its settings, what tells runs apart."""
    return output.directory.parent.resolve()


def collect(run_dirs: list[str | Path]) -> dict[str, list[RunOutput]]:
    """Run group label -> its seeds' outputs (sorted by seed; runs that failed last). Every directory is read and
    checked first. A directory given twice (also through another path or a symlink) counts once; two directories
    recording the same seed of the same run are an error."""
    groups = _group(_read_once(run_dirs))
    labels = _labels(groups)
    for g, label in zip(groups, labels):
        _check_seeds(g)
        for o in g.outputs:
            o.run = label
        g.outputs.sort(key=lambda o: (o.failure is not None, -1 if o.seed is None else o.seed, str(o.path)))
    return {label: g.outputs for label, g in sorted(zip(labels, groups), key=lambda x: x[0])}


@dataclass
class _Group:
    parent: Path
    settings: dict | None  # None: failed runs whose settings no eval.json records
    outputs: list[RunOutput] = field(default_factory=list)


def _read_once(run_dirs: list[str | Path]) -> list[RunOutput]:
    """Every run directory, read and checked; one given more than once (by any path) is read once, with a note."""
    outputs, seen = [], {}
    for d in run_dirs:
        out = read_run(d)
        same = out.directory.resolve()
        if same in seen:
            also = "" if str(d) == str(seen[same]) else f" (also as {seen[same]})"
            log.warning(f"sylvie report: {d}: given more than once{also}; it counts once")
            continue
        seen[same] = d
        outputs.append(out)
    return outputs


def _group(outputs: list[RunOutput]) -> list[_Group]:
    """The runs: finished outputs by folder and settings; a failed run (no settings recorded) is a seed of the one
    run of its folder, if there is one, else of a group of the folder's failed runs."""
    groups: dict[tuple, _Group] = {}
    for o in finished(outputs):
        settings = run_settings(o.evaluation)
        key = (location(o), json.dumps(settings, sort_keys=True))
        groups.setdefault(key, _Group(location(o), settings)).outputs.append(o)
    for o in failed(outputs):
        where = location(o)
        here = [g for g in groups.values() if g.parent == where and g.settings is not None]
        group = here[0] if len(here) == 1 else groups.setdefault((where, None), _Group(where, None))
        group.outputs.append(o)
    return list(groups.values())


def _check_seeds(group: _Group) -> None:
    """Two finished directories of one run recording the same seed: one is a copy of the other, an error. (A failed
    run's seed is only its folder's name: not checked.)"""
    by_seed = {}
    for o in finished(group.outputs):
        if o.seed in by_seed:
            raise SylvieError(f"{by_seed[o.seed].path} and {o.path}: both record seed {o.seed} of the same run "
                              f"(same settings, same folder {group.parent}); one is a copy of the other: give only "
                              "one of them to `sylvie report`")
        by_seed[o.seed] = o


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
