"""Checkpoints: saved every N epochs by rank 0, resumed by every rank when the same run restarts.

A checkpoint carries the identity of its run: everything that shapes the training trajectory (model,
optimiser and exchange settings, seed, and the partition: dataset, method, seed and every shard's checksum).
It is resumed only when that identity matches and its epoch lies before the configured end; otherwise the
run starts afresh and says why.
"""
from __future__ import annotations

from pathlib import Path

import torch

from sylvie.atomic import atomic_path
from sylvie.config import resumable_keys, section
from sylvie.train.optimiser import schedule_follows_epochs

# knobs added after checkpoints carried an identity, per section: one at its default (the schema's) is left out of
# the identity, so that those checkpoints still resume
_LATER_KNOBS = {"train": ("mode", "boundary_sampling", "optimizer", "optimizer_args", "lr_schedule",
                          "lr_schedule_args", "warmup_epochs", "warmup_start_factor"),
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


def save_checkpoint(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path, identity: dict, epochs: int) -> tuple[dict | None, str | None]:
    """(the checkpoint at ``path``, None) if this run may resume it, else (None, why not; None if none)."""
    if not path.is_file():
        return None, None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file: start afresh rather than crash
        return None, f"it cannot be read ({type(e).__name__}: {e})"
    saved = state.get("identity") if isinstance(state, dict) else None
    if saved is None:
        return None, "it was written by an older version of sylvie"
    why = _difference(saved, identity)
    if why:
        return None, why
    if state["epoch"] + 1 >= epochs:
        return None, (f"it is after epoch {state['epoch'] + 1}, not before the configured end "
                      f"(train.epochs={epochs})")
    return state, None
