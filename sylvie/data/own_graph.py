"""A graph of the user's own (``source: files`` or ``dgl``) in canonical form: its edges made undirected or kept
directed, self-loops and repeated edges dropped; nodes only the edges name given zero features and no label; the
labelled nodes split at random where the user gave no split."""
from __future__ import annotations

import logging

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, undirected_keys
from sylvie.data.synthetic import split_masks
from sylvie.errors import SylvieError
from sylvie.formats.splits import SPLITS

log = logging.getLogger(__name__)


def canonical_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int, directed: bool) -> tuple[np.ndarray,
                                                                                                  np.ndarray, dict]:
    """(src, dst, what was done). Undirected: both directions of every edge, once, sorted (``undirected_keys``, as
    the OGB loader symmetrises). Directed: the edges in their order, each first occurrence kept, self-loops
    dropped."""
    m = src.shape[0]
    loops = int(np.count_nonzero(src == dst))
    if not directed:
        src, dst = edges_of_keys(undirected_keys(src, dst, num_nodes), num_nodes)
        return src, dst, {"symmetrized": True, "self_loops_removed": loops}
    keys = src * num_nodes
    keys += dst
    keys[src == dst] = -1
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    first = np.empty(m, dtype=bool)
    first[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=first[1:])
    first &= ranked >= 0
    keep = np.sort(order[first])
    del keys, order, ranked, first
    return src[keep], dst[keep], {"symmetrized": False, "self_loops_removed": loops,
                                  "duplicates_removed": int(m - loops - keep.shape[0])}


def random_split(labels: np.ndarray, train_fraction: float, val_fraction: float, seed: int) -> dict[str, np.ndarray]:
    """Masks of a seeded random split of the labelled nodes: ``train_fraction`` of them train, ``val_fraction``
    validate, the rest test."""
    if train_fraction + val_fraction > 1:
        raise SylvieError(f"train_fraction {train_fraction:g} + val_fraction {val_fraction:g} exceed 1; the rest of "
                          f"the labelled nodes is the test split")
    labelled = np.flatnonzero(labels >= 0)
    parts = split_masks(np.random.default_rng(seed), labelled.shape[0], train_fraction, val_fraction)
    masks = {}
    for s, part in zip(SPLITS, parts, strict=True):
        masks[s] = np.zeros(labels.shape[0], dtype=bool)
        masks[s][labelled[part]] = True
        if not masks[s].any():
            raise SylvieError(f"the random split leaves split '{s}' empty ({labelled.shape[0]} labelled nodes, "
                              f"train_fraction {train_fraction:g}, val_fraction {val_fraction:g}); change the "
                              f"fractions or give the split (split_column or mask_columns)")
    return masks


def own_graph(name: str, *, src, dst, features, labels, class_names, masks, num_added: int, options,
              node_keys=None, info: dict | None = None) -> Graph:
    """The canonical graph of a user's nodes (``num_added`` more named only by edges, numbered after them) and
    edges."""
    n_table = features.shape[0]
    if num_added:
        features = np.concatenate([features, np.zeros((num_added, features.shape[1]), np.float32)])
        labels = np.concatenate([labels, np.full(num_added, -1, np.int64)])
        if masks is not None:
            masks = {s: np.concatenate([m, np.zeros(num_added, bool)]) for s, m in masks.items()}
    n = n_table + num_added
    if not (labels >= 0).any():
        raise SylvieError(f"no node has a label (column '{options.label_column}'); node classification needs "
                          f"labelled nodes")
    if masks is None:
        masks = random_split(labels, options.train_fraction, options.val_fraction, options.seed)
    rows = src.shape[0]
    src, dst, done = canonical_edges(src, dst, n, options.directed)
    info = info or {}
    warn_edges(info.get("edges") or info.get("graph_file") or name, rows, done["self_loops_removed"])
    num_classes = len(class_names) if class_names is not None else int(labels.max()) + 1
    warn_classes(f"{info.get('node_table') or info.get('graph_file') or name}: column '{options.label_column}'",
                 labels, num_classes, masks["train"], class_names)
    extra = {"class_names": class_names} if class_names is not None else {}
    return Graph(name=name, src=src, dst=dst, features=features, labels=labels,
                 train_mask=masks["train"], val_mask=masks["val"], test_mask=masks["test"], num_classes=num_classes,
                 info={**info, **done, "unknown_nodes_added": int(num_added), **extra}, node_keys=node_keys)


def warn_edges(where, rows: int, loops: int, relation: str | None = None) -> None:
    """A warning line where an edge list read without error leaves no edges (of the graph, or of a typed graph's
    ``relation``): it has none (a header only), or every edge is a self-loop (dropped)."""
    none = f"relation {relation!r} has no edges" if relation else \
        "every node is isolated, and the models learn from the features alone"
    if rows == 0:
        log.warning(f"{where}: the edge list has no edges (a header only, or an empty array): {none}; check the "
                    f"file if that is not meant")
    elif loops == rows:
        log.warning(f"{where}: every edge ({rows}) is a self-loop, and self-loops are dropped: "
                    f"{none if relation else 'the graph has no edges'}; check that edge_columns name the source and "
                    f"the destination")


def warn_classes(where: str, labels: np.ndarray, num_classes: int, train: np.ndarray,
                 class_names: list[str] | None) -> None:
    """A warning line where the labels read without error but are likely not what was meant: a class number with
    no node (labels 0, 1, 3: class 2), one class only, or a class with no node in the training split."""
    labelled = labels >= 0
    count = np.bincount(labels[labelled], minlength=num_classes)
    empty = np.flatnonzero(count == 0)
    if empty.size and class_names is None:
        shown = ", ".join(map(str, empty[:5].tolist())) + (f", ... ({empty.size} classes)" if empty.size > 5 else "")
        log.warning(f"{where}: no node has class {shown}, yet the classes are numbered 0..{num_classes - 1} by the "
                    f"largest label, so the model predicts {num_classes} classes; number the classes without gaps "
                    f"if that is not meant")
    if np.count_nonzero(count) == 1:
        only = int(np.flatnonzero(count)[0])
        log.warning(f"{where}: every labelled node has the one class "
                    f"{class_names[only] if class_names else only}: there is nothing to tell apart")
        return
    untrained = np.flatnonzero((count > 0) & (np.bincount(labels[labelled & train], minlength=num_classes) == 0))
    if untrained.size:
        names = [class_names[c] if class_names else str(c) for c in untrained[:5].tolist()]
        log.warning(f"{where}: class {', '.join(names)}{' ...' if untrained.size > 5 else ''} has nodes but none in "
                    f"the train split, so the model cannot learn it; put some of its nodes in the train split")


def check_split(masks: dict[str, np.ndarray], labels: np.ndarray, name_row, label_column: str,
                columns: list[str], table) -> None:
    """Every split has a node, no node is in two, and every node of a split has a label; else a SylvieError naming
    the ``table``, the column (``columns``: the split column, or the train, val and test mask columns) and the first
    bad row (``name_row``)."""
    where = dict(zip(SPLITS, columns * 3 if len(columns) == 1 else columns, strict=False))
    for s, m in masks.items():
        if not m.any():
            raise SylvieError(f"{table}: column '{where[s]}': split '{s}' is empty (no node in it); every split needs "
                              f"nodes, or leave the split out of the config for a random one")
    count = sum(m.astype(np.int8) for m in masks.values())
    if (count > 1).any():
        r = int(np.flatnonzero(count > 1)[0])
        raise SylvieError(f"{name_row(r)}: columns {', '.join(dict.fromkeys(columns))}: the node is in more than one "
                          f"split")
    unlabelled = (count > 0) & (labels < 0)
    if unlabelled.any():
        r = int(np.flatnonzero(unlabelled)[0])
        s = next(s for s, m in masks.items() if m[r])
        raise SylvieError(f"{name_row(r)}: column '{label_column}': the node is in split '{s}' but has no label "
                          f"({int(unlabelled.sum())} such nodes); label it or take it out of the split")
