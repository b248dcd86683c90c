"""Whether a training run can fit in this machine's memory, checked on every rank before it joins the others: a
model whose parameters, or a full-graph part whose layer outputs, cannot fit is refused with the estimate
(``memory_budget``), where torch would fail in an allocation halfway through set-up or the OOM killer would stop
the rank without a word."""
from __future__ import annotations

import os

import torch

from sylvie.formats.partition_manifest import graph_layout
from sylvie.graph_types import GraphTypes
from sylvie.memory_budget import check_fits, gigabytes
from sylvie.models.gnn import build_model
from sylvie.models.registry import hidden_width


def parameter_count(model, in_feats: int, num_classes: int, manifest: dict | None = None, rank: int = 0) -> int:
    """The parameters of the model the config's ``model`` section builds, counted without allocating them, on
    ``rank`` of the partition of ``manifest`` (its rows of the embedding tables; no manifest: a homogeneous graph of
    ``in_feats`` features)."""
    return sum(parameter_parts(model, in_feats, num_classes, manifest, rank))


def parameter_parts(model, in_feats: int, num_classes: int, manifest: dict | None = None,
                    rank: int = 0) -> tuple[int, int]:
    """``parameter_count``'s two terms: (the layers' weights, the rank's rows of the learnt embedding tables)."""
    if manifest is None:
        with torch.device("meta"):
            return sum(p.numel() for p in build_model(model, in_feats, num_classes).parameters()), 0
    layout = graph_layout(manifest)
    widths = layout["feature_widths"]
    with torch.device("meta"):
        typed = build_model(model, widths, num_classes, embedding_rows=[0] * len(widths),
                            types=GraphTypes.from_json(layout["types"], "the partition's manifest"))
    part = manifest["parts"][min(rank, len(manifest["parts"]) - 1)]
    rows = part.get("type_counts", [part["inner_nodes"]])
    width = model.embedding_width or max([w for w in widths if w is not None] or [model.hidden])
    learnt = sum(r for r, w in zip(rows, widths, strict=True) if w is None)
    return sum(p.numel() for p in typed.parameters()), learnt * width


def output_bytes(model, in_feats: int, num_classes: int, rows: int) -> int:
    """A lower bound of the layer outputs' share of a rank's peak: ``rows`` rows of the input and of every layer's
    output, float32, which the backward pass needs at once."""
    return rows * (in_feats + hidden_width(model) * (model.layers - 1) + num_classes) * 4


def check_training_fits(model, manifest: dict, rank: int, sampled: bool, device: str = "cpu") -> None:
    """Refuse the run on this rank when the lower bound of its memory (the parameters with their gradients and Adam's
    two moments, float32; a full-graph rank also its part's inner and halo rows' layer outputs), times the ranks sharing
    the memory, exceeds what is available: this machine's memory, or on a GPU (``device``) that GPU's free memory. The
    layer outputs are checked first, as they need no model built (a very deep model takes long to build)."""
    part = manifest["parts"][min(rank, len(manifest["parts"]) - 1)]
    rows = 0 if sampled else part["inner_nodes"] + part["halo_nodes"]
    in_feats, classes = manifest["num_features"], manifest["num_classes"]
    available, sharing, where = _budget(device, int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    on = f" x {sharing} ranks on {where}" if sharing > 1 else ""
    what = f"training on rank {rank}: {model.arch} {model.layers} x {model.hidden}"
    advice = "lower model.hidden (or heads, layers), or cut the graph into more parts over more machines"
    outputs = output_bytes(model, in_feats, classes, rows)
    layers = f" and {rows:,} rows' layer outputs ({gigabytes(outputs)})" if rows else ""
    check_fits(outputs * sharing, f"{what}, its {rows:,} rows' layer outputs{on}", advice, available, where)
    weights, embeddings = parameter_parts(model, in_feats, classes, manifest, rank)
    params = (weights + embeddings) * 4 * 4
    if embeddings > weights:  # the remedy names the knob of the larger term
        advice = (f"lower model.embedding_width (the learnt embeddings of the node types without features: "
                  f"{embeddings:,} values on this rank), or cut the graph into more parts over more machines")
    check_fits((params + outputs) * sharing,
               f"{what}, its parameters and optimiser state ({gigabytes(params)}){layers}{on}", advice, available,
               where)


def _budget(device: str, local_ranks: int) -> tuple[int | None, int, str]:
    """(bytes available, ranks sharing them, where) for a rank training on ``device``: this machine's memory shared
    by its local ranks, or the free memory of the rank's GPU shared by the local ranks on that GPU."""
    if device in ("cuda", "auto") and torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        gpu = int(os.environ.get("LOCAL_RANK", 0)) % gpus
        return torch.cuda.mem_get_info(gpu)[0], max(1, -(-local_ranks // gpus)), f"GPU {gpu}"
    return None, local_ranks, "this machine"
