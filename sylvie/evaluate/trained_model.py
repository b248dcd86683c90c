"""A model written by ``sylvie train``, loaded for inference: its checkpoint, checked against the data it meets."""
from __future__ import annotations

from pathlib import Path

import torch

from sylvie.config import section
from sylvie.errors import SylvieError
from sylvie.models import build_model


def load_trained(model_path: str | Path) -> dict:
    p = Path(model_path)
    if not p.is_file():
        raise SylvieError(f"{p}: trained model not found; run `sylvie train` first")
    try:
        return torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:
        raise SylvieError(f"{p}: not a model written by `sylvie train` ({e}); rerun training") from e


def model_for_inference(ckpt: dict, model_path: str | Path, fingerprint: str, data: str | Path):
    """The checkpoint's model with its weights, in eval mode, after checking it was trained on ``data`` (whose
    dataset fingerprint is ``fingerprint``); and its model section."""
    if ckpt["dataset_fingerprint"] != fingerprint:
        raise SylvieError(f"{model_path}: trained on another dataset than {data} (fingerprints differ)")
    model_cfg = section("model", ckpt["model_cfg"], where=f"{model_path}: model_cfg")
    model = build_model(model_cfg, ckpt["in_feats"], ckpt["num_classes"])
    model.load_state_dict(ckpt["model"])
    model.eval()
    return model, model_cfg
