"""A model written by ``sylvie train``, loaded for inference: its checkpoint, checked against the data it meets."""
from __future__ import annotations

from pathlib import Path

import torch

from sylvie.config import section
from sylvie.errors import SylvieError
from sylvie.models import build_model

_MODEL_KEYS = ("model", "model_cfg", "train_cfg", "in_feats", "num_classes", "dataset_fingerprint", "summary")


def load_trained(model_path: str | Path) -> dict:
    p = Path(model_path)
    if not p.is_file():
        raise SylvieError(f"{p}: trained model not found; run `sylvie train` first")
    try:
        ckpt = torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:
        raise SylvieError(f"{p}: not a model written by `sylvie train` ({' '.join(str(e).split())[:300]}); rerun "
                          f"training") from e
    missing = [k for k in _MODEL_KEYS if k not in ckpt] if isinstance(ckpt, dict) else list(_MODEL_KEYS)
    if missing:  # another torch file: a training checkpoint (checkpoints/last.pt), say
        what = "a training checkpoint, " if isinstance(ckpt, dict) and "identity" in ckpt else ""
        raise SylvieError(f"{p}: {what}not a model written by `sylvie train` (no {', '.join(missing[:3])}); give "
                          f"the run's model.pt")
    return ckpt


def model_for_inference(ckpt: dict, model_path: str | Path, fingerprint: str, data: str | Path):
    """The checkpoint's model with its weights, in eval mode, after checking it was trained on ``data`` (whose
    dataset fingerprint is ``fingerprint``); and its model section."""
    if ckpt["dataset_fingerprint"] != fingerprint:
        raise SylvieError(f"{model_path}: trained on another dataset than {data} (fingerprints differ)")
    model_cfg = section("model", ckpt["model_cfg"], where=f"{model_path}: model_cfg")
    model = build_model(model_cfg, ckpt["in_feats"], ckpt["num_classes"])
    mismatch = _mismatch(model.state_dict(), ckpt["model"])
    if mismatch:
        cfg = ", ".join(f"{k} {v}" for k, v in ckpt["model_cfg"].items())
        raise SylvieError(f"{model_path}: its weights do not fit its saved model_cfg ({cfg}; in_feats "
                          f"{ckpt['in_feats']}, num_classes {ckpt['num_classes']}): {mismatch}; the file was edited "
                          f"or damaged: restore it or rerun `sylvie train`")
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:  # what the comparison above does not foresee, in one line
        raise SylvieError(f"{model_path}: its weights do not load into its saved model_cfg "
                          f"({' '.join(str(e).split())[:300]}); restore it or rerun `sylvie train`") from e
    model.eval()
    return model, model_cfg


def _mismatch(expected: dict, saved: dict) -> str | None:
    """How the saved weights differ from those the model needs, in words (None: they fit)."""
    def listed(names):
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    if not isinstance(saved, dict):
        return f"the weights are a {type(saved).__name__}, not a state_dict"
    missing = [k for k in expected if k not in saved]
    extra = [k for k in saved if k not in expected]
    shapes = [f"{k} is {list(saved[k].shape)} but the model_cfg needs {list(expected[k].shape)}"
              for k in expected if k in saved and tuple(getattr(saved[k], "shape", ())) != tuple(expected[k].shape)]
    parts = ([f"weights missing for {listed(missing)}"] if missing else []) + \
        ([f"weights not in the model: {listed(extra)}"] if extra else []) + \
        ([listed(shapes)] if shapes else [])
    return "; ".join(parts) or None
