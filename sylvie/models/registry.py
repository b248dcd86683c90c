"""The architectures by name: which convolution each relation runs, and which self-loops each adds by default."""
from __future__ import annotations

ARCHS = ("gcn", "sage", "gat", "rgcn", "rgat")
RELATIONAL = ("rgcn", "rgat")  # named compositions: a self-loop weight per node type by default, no added edges
ATTENTION = ("gat", "rgat")  # heads: a hidden layer's output is heads x hidden wide


def self_loop_edges(model) -> bool:
    """Whether the graph gets one self-loop edge per node (``model.self_loop``; None: the architecture's own)."""
    return model.self_loop if model.self_loop is not None else model.arch not in RELATIONAL


def loop_weight(model) -> bool:
    """Whether every layer has a self-loop weight per node type (``model.loop_weight``; None: the architecture's
    own)."""
    return model.loop_weight if model.loop_weight is not None else model.arch in RELATIONAL


def needs_global_out_degrees(model) -> bool:
    """Whether the layers normalise by each source's out-degree (GCN's symmetric normalisation): a rank then needs
    each relation's global out-degrees of its rows."""
    return model.arch == "gcn"


def hidden_width(model) -> int:
    """The width of a hidden layer's output (every head's, for attention)."""
    return model.hidden * (model.heads if model.arch in ATTENTION else 1)
