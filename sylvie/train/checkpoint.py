"""Checkpoints: saved every N epochs by rank 0, resumed by every rank when the run restarts.

A checkpoint carries a fingerprint of what determines the training trajectory (model and optimiser
settings, seed, partition); a restart with different settings starts afresh instead of resuming.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from sylvie.atomic import atomic_path

# Knobs that may change between a run and its resumption without changing the trajectory.
RESUMABLE_KEYS = ("epochs", "checkpoint_every", "log_every", "device", "progress")


def run_fingerprint(model_cfg: dict, train_cfg: dict, partition_fingerprint: str, num_parts: int,
                    comm_cfg: dict | None = None) -> str:
    fixed = {k: v for k, v in train_cfg.items() if k not in RESUMABLE_KEYS}
    blob = json.dumps({"model": model_cfg, "train": fixed, "partition": partition_fingerprint, "parts": num_parts,
                       "comm": comm_cfg or {}}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def save_checkpoint(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path, fingerprint: str) -> dict | None:
    """The checkpoint at ``path`` if it exists and belongs to a run with this fingerprint."""
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    return state if state.get("fingerprint") == fingerprint else None
