"""Checkpoints: saved every N epochs by rank 0, resumed by every rank when the same run restarts. A checkpoint carries
its run's identity (what shapes the trajectory: model, optimiser and exchange settings, seed, and the partition with
every shard's checksum) and a checksum of its content; it is resumed only when the identity matches and its epoch lies
before the end, and a damaged one is refused by name, never resumed nor written over.
"""
# A checkpoint of another identity is not resumed: the run starts afresh and says why. A damaged one (unreadable, or its
# checksum, ``sylvie.formats.checksum``, does not match) is left for the user to delete to start the run over; only the
# latest checkpoint is kept. One written before checkpoints carried a checksum is resumed as before, unchecked, and the
# run says so: refusing it would throw its epochs away on no sign of damage.
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from sylvie.atomic import atomic_path
from sylvie.config import resumable_keys, section
from sylvie.errors import SylvieError, one_line, system_said
from sylvie.formats.checksum import FIELD, checked, load_torch, with_checksum
from sylvie.train.optimiser import schedule_follows_epochs

# knobs added after checkpoints carried an identity, per section: one at its default (the schema's) is left out of
# the identity, so that those checkpoints still resume
_LATER_KNOBS = {"train": ("mode", "boundary_sampling", "optimizer", "optimizer_args", "lr_schedule",
                          "lr_schedule_args", "warmup_epochs", "warmup_start_factor", "task"),
                "model": ("num_bases", "embedding_width")}


def _without_later_defaults(name: str, cfg: dict) -> dict:
    """``cfg`` (section ``name``) less its resumable knobs and the knobs added later that are at their default."""
    later, defaults = _LATER_KNOBS.get(name, ()), vars(section(name))
    return {f"{name}.{k}": v for k, v in cfg.items()
            if k not in resumable_keys(name) and not (k in later and v == defaults[k])}


def run_identity(model_cfg: dict, train_cfg: dict, comm_cfg: dict, manifest: dict,
                 extra: dict[str, dict] | None = None) -> dict:
    """What a checkpoint must match to be resumed (flat: ``section.key`` -> value); ``extra``: more sections
    (sampling, cache)."""
    # the defaults of knobs added later are left out, so that checkpoints from before them still resume
    ident = {**_without_later_defaults("model", model_cfg), **_without_later_defaults("train", train_cfg)}
    if schedule_follows_epochs(train_cfg.get("lr_schedule"), train_cfg.get("lr_schedule_args")):
        ident["train.epochs"] = train_cfg["epochs"]  # the schedule's length: another epochs is another trajectory
    for name, cfg in {"comm": comm_cfg, **(extra or {})}.items():
        ident.update({f"{name}.{k}": v for k, v in cfg.items() if k not in resumable_keys(name)})
    ident.update({
        "partition.dataset_fingerprint": manifest["dataset_fingerprint"],
        "partition.method": manifest.get("method"), "partition.seed": manifest.get("seed"),
        "partition.num_parts": manifest["num_parts"],
        "partition.shards": [p["sha256"] for p in manifest["parts"]],
    })
    return ident


def run_key(identity: dict) -> str:
    """A short name of a run's ``run_identity`` (its settings, seed and partition): what metrics.jsonl's lines,
    model.pt's summary and eval.json carry as ``run``, so that the files of one run are known from another's."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _difference(saved: dict, wanted: dict) -> str | None:
    for key in sorted(set(saved) | set(wanted)):
        a, b = saved.get(key, "(unset)"), wanted.get(key, "(unset)")
        if a != b:
            if key == "partition.shards":
                return "the partition's shards differ (another partitioning, or the shards were rewritten)"
            if key == "partition.dataset_fingerprint":
                return "the partition was cut from another dataset"
            return f"{key} changed ({a} -> {b})"
    return None


# what to do about a damaged checkpoint
START_OVER = "this run cannot resume from it: delete it to train the run from its first epoch (no earlier " \
             "checkpoint is kept)"
UNCHECKED = "written before checkpoints carried a checksum, so it is resumed without that check"


def save_checkpoint(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(with_checksum(state), tmp)


def load_checkpoint(path: Path, identity: dict, epochs: int) -> tuple[dict | None, str | None]:
    """(the checkpoint at ``path``, None or ``UNCHECKED`` where it has no checksum) if this run may resume it, else
    (None, why not; None if there is none). A damaged checkpoint is a SylvieError naming it."""
    if not path.is_file():
        return None, None
    try:
        state = load_torch(path)
    except OSError as e:  # the system refused the read: say what it said
        said, do = system_said(e)
        raise SylvieError(f"{path}: cannot read the checkpoint: {said}; {do}") from None
    except Exception as e:  # a truncated or damaged file (or another file under its name)
        raise SylvieError(f"{path}: not a checkpoint that can be read ({one_line(e)}): the file is damaged; "
                          f"{START_OVER}") from None
    if not isinstance(state, dict):
        raise SylvieError(f"{path}: not a checkpoint written by `sylvie train` (a {type(state).__name__}, not a "
                          f"dict); {START_OVER}")
    unchecked = UNCHECKED if FIELD not in state else None
    state = checked(state, path, "sylvie train", START_OVER)
    saved = state.get("identity")
    if saved is None:
        return None, "it was written by an older version of sylvie"
    why = _difference(saved, identity)
    if why:
        return None, why
    if state["epoch"] + 1 > epochs:  # at the end: a finished run, resumed with nothing left to train
        return None, (f"it is after epoch {state['epoch'] + 1}, past the configured end (train.epochs={epochs})")
    return state, unchecked
