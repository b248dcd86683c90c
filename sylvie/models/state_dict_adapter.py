"""Model files written before the one layer stack, read as today's (torchtitan's ``state_dict_adapter``).

Then a model of one relation held its convolutions as ``convs.<layer>.<weight>``; every layer is now a
``RelationalConv`` (``convs.<layer>.convs.<relation>.<weight>``). And R-GCN's and R-GAT's ``self_loop`` meant their
self-loop weight, now ``loop_weight`` (``self_loop`` is the added edge for every architecture).
"""
from __future__ import annotations

import re

from sylvie.models.registry import RELATIONAL

_LAYER_KEY = re.compile(r"convs\.(\d+)\.(?!convs\.)(.*)")  # a layer's weight written before (no relation)
_ONE_RELATION = re.compile(r"^convs\.(\d+)\.convs\.0\.")  # today's layer's one relation


def current_model_cfg(cfg: dict) -> dict:
    """A saved ``model`` section as today's schema reads it."""
    if "loop_weight" in cfg or cfg.get("arch") not in RELATIONAL or "self_loop" not in cfg:
        return cfg
    return {**cfg, "loop_weight": cfg["self_loop"], "self_loop": None}


def current_weights(saved: dict, expected: dict) -> dict:
    """``saved`` with the keys of a one-relation layer written before renamed to today's, where ``expected`` (the
    model's ``state_dict``) has them."""
    if not isinstance(saved, dict):
        return saved
    out = {}
    for key, value in saved.items():
        match = None if key in expected else _LAYER_KEY.fullmatch(key)
        renamed = f"convs.{match[1]}.convs.0.{match[2]}" if match else key
        out[renamed if renamed in expected else key] = value
    return out


def one_relation_keys(state: dict) -> dict:
    """The weights of a model of one relation under the names of a stack of one convolution a layer
    (``convs.<layer>.<weight>``, as before and as DGL's examples name them): the inverse of ``current_weights``."""
    return {_ONE_RELATION.sub(r"convs.\1.", k): v for k, v in state.items()}
