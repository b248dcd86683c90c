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

# train knobs added after checkpoints carried an identity: one at its default (the schema's) is left out of the
# identity, so that those checkpoints still resume
_LATER_TRAIN_KNOBS = ("mode", "boundary_sampling", "optimizer", "optimizer_args", "lr_schedule", "lr_schedule_args",
                      "warmup_epochs", "warmup_start_factor")


def run_identity(model_cfg: dict, train_cfg: dict, comm_cfg: dict, manifest: dict,
                 extra: dict[str, dict] | None = None) -> dict:
    """What a checkpoint must match to be resumed (flat: ``section.key`` -> value); ``extra``: more sections
    (sampling, cache)."""
    ident = {f"model.{k}": v for k, v in model_cfg.items()}
    # the defaults of knobs added later are left out, so that checkpoints from before them still resume
    defaults = vars(section("train"))
    ident.update({f"train.{k}": v for k, v in train_cfg.items() if k not in resumable_keys("train")
                  and not (k in _LATER_TRAIN_KNOBS and v == defaults[k])})
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
