"""A model written by ``sylvie train`` (its model file, ``sylvie.formats.model_file``), made ready for inference:
checked against the data it meets and against its own saved config."""
from __future__ import annotations

from pathlib import Path

from sylvie.config import section
from sylvie.errors import SylvieError, one_line
from sylvie.formats.model_file import ModelFile
from sylvie.graph_types import HOMOGENEOUS, GraphTypes
from sylvie.models.gnn import build_model
from sylvie.models.state_dict_adapter import current_model_cfg, current_weights


def model_for_inference(saved: ModelFile, model_path: str | Path, fingerprint: str, data: str | Path):
    """The saved model with its weights, in eval mode, after checking it was trained on ``data`` (whose dataset
    fingerprint is ``fingerprint``); and its model section."""
    if saved.dataset_fingerprint != fingerprint:
        raise SylvieError(f"{model_path}: trained on another dataset than {data} (fingerprints differ)")
    model_cfg = section("model", current_model_cfg(saved.model_cfg), where=f"{model_path}: model_cfg")
    layout = saved.graph_types
    if layout is None:  # a homogeneous graph's model, written before every model file kept its graph's types
        types, widths, counts = HOMOGENEOUS, [saved.in_feats], [0]
    else:
        types = GraphTypes.from_json(layout["types"], f"{model_path}: graph_types")
        widths, counts = layout["feature_widths"], layout["type_counts"]
    link = section("link", saved.link_cfg, where=f"{model_path}: link_cfg") if saved.link_cfg is not None else None
    model = build_model(model_cfg, widths, saved.num_classes, types=types, embedding_rows=counts, link=link)
    weights = current_weights(saved.weights, model.state_dict())
    mismatch = _mismatch(model.state_dict(), weights)
    if mismatch:
        cfg = ", ".join(f"{k} {v}" for k, v in saved.model_cfg.items())
        raise SylvieError(f"{model_path}: its weights do not fit its saved model_cfg ({cfg}; in_feats "
                          f"{saved.in_feats}, num_classes {saved.num_classes}): {mismatch}; the file was edited "
                          f"or damaged: restore it or rerun `sylvie train`")
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:  # what the comparison above does not foresee, in one line
        raise SylvieError(f"{model_path}: its weights do not load into its saved model_cfg "
                          f"({one_line(e)}); restore it or rerun `sylvie train`") from e
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
