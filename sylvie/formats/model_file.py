"""``model.pt`` in a run directory: the trained model ``sylvie train`` writes on rank 0 (the weights of the epoch with
the best validation accuracy; of the last epoch where the graph has no validation nodes) and ``sylvie evaluate``
loads, a checksummed ``torch.save`` of one dict. This module is the format's only writer and reader; a file of
another version is refused (rerun ``sylvie train``).
"""
# The dict's keys:
#     format_version       this format's version
#     model                the weights (the model's state_dict)
#     model_cfg            the config's model section, as a plain dict
#     train_cfg            the train section, ``seed`` the run's seed (no ``seeds``)
#     comm_cfg             the comm section; {} for a sampled run (its halo exchange settings do not apply)
#     sampling_cfg, cache_cfg, features_cfg   those sections, for a sampled run only
#     in_feats, num_classes, dataset_fingerprint   what the model was trained on (the partition's manifest)
#     graph_types          the graph's types (``GraphTypes.to_json``), nodes and feature width (null: none) of each
#                          type; its embedding tables are whole (absent in files of homogeneous graphs written before)
#     summary              the run's summary (best epoch and accuracies, num_parts, what the trainer adds);
#                          ``model_chosen_by``: which epoch's weights these are, ``BY_VALIDATION`` or ``BY_LAST_EPOCH``
#                          (absent in files written before it: by validation)
#     checksum             of all the other entries (``sylvie.formats.checksum``): a damaged file is refused; one
#                          written before files carried it is read unchecked, with a warning
#
# Version history: 1: ``format_version`` recorded. Files written before it have the same keys without it (and perhaps no
# ``comm_cfg``, read as {}): they are read as version 1.
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sylvie.atomic import atomic_path
from sylvie.errors import SylvieError, one_line, system_said
from sylvie.formats.checksum import checked, load_torch, with_checksum

FORMAT_VERSION = 1
FILE = "model.pt"
BY_VALIDATION = "best validation accuracy"  # summary["model_chosen_by"]: the epoch of the best validation accuracy
BY_LAST_EPOCH = "last epoch (no validation nodes)"  # the last evaluated epoch: the graph has no validation nodes
# the keys every version-1 file has (comm_cfg is absent from some written before the version)
_REQUIRED = ("model", "model_cfg", "train_cfg", "in_feats", "num_classes", "dataset_fingerprint", "summary")
_SAMPLED_SECTIONS = ("sampling", "cache", "features")
_OPTIONAL_SECTIONS = (*_SAMPLED_SECTIONS, "link")  # a sampled run's; a link-prediction run's


@dataclass(frozen=True)
class ModelFile:
    weights: dict  # the model's state_dict
    model_cfg: dict
    train_cfg: dict
    in_feats: int
    num_classes: int
    dataset_fingerprint: str
    summary: dict
    comm_cfg: dict = field(default_factory=dict)  # {} for a sampled run
    sampling_cfg: dict | None = None  # a sampled run's sections; None for a full-graph run
    cache_cfg: dict | None = None
    features_cfg: dict | None = None
    graph_types: dict | None = None  # {"types", "type_counts", "feature_widths"}
    link_cfg: dict | None = None  # a link-prediction run's link section (its model holds a decoder); None otherwise


def save_model(path: str | Path, model: ModelFile) -> None:
    """Write ``model`` to ``path`` atomically."""
    content = {"format_version": FORMAT_VERSION, "model": model.weights, "model_cfg": model.model_cfg,
               "train_cfg": model.train_cfg, "comm_cfg": model.comm_cfg,
               **{f"{s}_cfg": getattr(model, f"{s}_cfg") for s in _OPTIONAL_SECTIONS
                  if getattr(model, f"{s}_cfg") is not None},
               "in_feats": model.in_feats, "num_classes": model.num_classes,
               "dataset_fingerprint": model.dataset_fingerprint, "summary": model.summary,
               **({"graph_types": model.graph_types} if model.graph_types is not None else {})}
    import torch  # here, not at the top: `sylvie report` reads the names above and need not pay for starting torch

    with atomic_path(path) as tmp:
        torch.save(with_checksum(content), tmp)


def load_model(path: str | Path) -> ModelFile:
    """The model file at ``path`` (its weights on the CPU); a missing file, another file or one of another version
    is a clear error naming it."""
    p = Path(path)
    if not p.is_file():
        raise SylvieError(f"{p}: trained model not found; run `sylvie train` first")
    try:
        content = load_torch(p)
    except OSError as e:  # the system refused the read: the file may be a model; say what the system said
        raise SylvieError(f"{p}: cannot read the trained model: {system_said(e)[0]}; make it readable to you (or run "
                          f"as its owner) and try again") from None
    except Exception as e:
        raise SylvieError(f"{p}: not a model written by `sylvie train` ({one_line(e)}); rerun "
                          f"training") from e
    missing = [k for k in _REQUIRED if k not in content] if isinstance(content, dict) else list(_REQUIRED)
    if missing:  # another torch file: a training checkpoint (checkpoints/last.pt), say
        what = "a training checkpoint, " if isinstance(content, dict) and "identity" in content else ""
        raise SylvieError(f"{p}: {what}not a model written by `sylvie train` (no {', '.join(missing[:3])}); give "
                          f"the run's {FILE}")
    version = content.get("format_version", 1)  # written before the version was recorded: version 1
    if version != FORMAT_VERSION:
        raise SylvieError(f"{p}: a model file of format version {version!r}; this sylvie reads version "
                          f"{FORMAT_VERSION}: rerun `sylvie train` with this version of sylvie")
    content = checked(content, p, "sylvie train", "rerun `sylvie train` for this run to write it again",
                      f"a model file ({FILE})")
    return ModelFile(weights=content["model"], model_cfg=content["model_cfg"], train_cfg=content["train_cfg"],
                     in_feats=content["in_feats"], num_classes=content["num_classes"],
                     dataset_fingerprint=content["dataset_fingerprint"], summary=content["summary"],
                     comm_cfg=content.get("comm_cfg", {}), graph_types=content.get("graph_types"),
                     **{f"{s}_cfg": content.get(f"{s}_cfg") for s in _OPTIONAL_SECTIONS})
