"""``source: dgl``: a graph saved by ``dgl.save_graphs``, its node data holding features, labels and (optionally) the
split. Read with DGL, in the download stage only (no later stage needs DGL); where DGL is not installed, the error
says how to install it."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from sylvie.data.graph import Graph
from sylvie.data.own_graph import check_split, own_graph
from sylvie.errors import SylvieError, one_line
from sylvie.formats.splits import SPLITS

DEFAULT_MASKS = ("train_mask", "val_mask", "test_mask")
log = logging.getLogger(__name__)
INSTALL = "pip install dgl==1.1.3 packaging (the CPU build is enough)"


def _load_graphs(path: Path):
    try:
        import dgl
    except ImportError:
        raise SylvieError(f"{path}: source dgl reads the file with DGL, which is not installed here: {INSTALL}, then "
                          f"rerun; or save the graph as Parquet files and use source: files") from None
    if path.is_dir():
        raise SylvieError(f"{path}: graph_file is a folder; name the file dgl.save_graphs wrote in it")
    if not path.is_file():
        raise SylvieError(f"{path}: graph_file: no such file")
    try:
        graphs, _ = dgl.load_graphs(str(path))
    except Exception as e:  # DGL raises DGLError, its C API errors and pickling errors for a file it cannot read
        raise SylvieError(f"{path}: not a graph file written by dgl.save_graphs ({one_line(e)})") from None
    if not graphs:
        raise SylvieError(f"{path}: the file holds no graph")
    g = graphs[0]
    if len(g.ntypes) > 1 or len(g.canonical_etypes) > 1:
        raise SylvieError(f"{path}: its first graph is typed ({_count(len(g.ntypes), 'node type')}: "
                          f"{', '.join(g.ntypes)}; {_count(len(g.canonical_etypes), 'relation')}); source dgl "
                          f"reads a graph of one node type and one relation: save dgl.to_homogeneous(g) (its types "
                          f"then are lost), or write each type and relation as a table for source: files "
                          f"(node_tables, relations: docs/datasets.md)")
    return g


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def count_nodes(options) -> int:
    """The nodes of the graph in ``options.graph_file`` (read with DGL)."""
    return int(_load_graphs(Path(options.graph_file)).num_nodes())


def _ndata(g, name: str, path: Path) -> np.ndarray:
    if name not in g.ndata:
        have = ", ".join(sorted(g.ndata)) or "none"
        raise SylvieError(f"{path}: the graph has no node data '{name}' (it has {have}); name it in the config")
    return g.ndata[name].detach().cpu().numpy()


def load_dgl_file(name: str, options) -> Graph:
    """The canonical graph of the first graph in ``options.graph_file``."""
    if not options.graph_file:
        raise SylvieError("datasets: source dgl needs graph_file, a file written by dgl.save_graphs")
    path = Path(options.graph_file)
    g = _load_graphs(path)
    n = int(g.num_nodes())
    parts = [_ndata(g, c, path).reshape(n, -1) for c in options.feature_columns]
    with np.errstate(over="ignore"):
        features = np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.float32)
    bad = ~np.isfinite(features).all(axis=1)
    if bad.any():
        raise SylvieError(f"{path}: node data {', '.join(options.feature_columns)}: node {int(np.flatnonzero(bad)[0])} "
                          f"has a NaN, infinite or beyond-float32 feature ({int(bad.sum())} such nodes)")
    labels = _labels(_ndata(g, options.label_column, path).reshape(-1), options.label_column, path)
    names = list(options.mask_columns or (DEFAULT_MASKS if all(m in g.ndata for m in DEFAULT_MASKS) else ()))
    some = [m for m in DEFAULT_MASKS if m in g.ndata]
    if not names and some:
        lacking = [m for m in DEFAULT_MASKS if m not in g.ndata]
        log.warning(f"{path}: the graph has node data {' and '.join(some)} but no {' or '.join(lacking)}: its masks "
                    f"are not used, the labelled nodes are split at random (train_fraction, val_fraction); to use "
                    f"them, add the missing mask or name three in mask_columns")
    masks = {s: _mask(_ndata(g, m, path).reshape(-1), m, path) for s, m in zip(SPLITS, names, strict=False)} \
        if names else None
    if masks is not None:
        check_split(masks, labels, lambda r: f"{path}, node {r}", options.label_column, names, path)
    src, dst = (t.numpy().astype(np.int64) for t in g.edges())
    return own_graph(name, src=src, dst=dst, features=features, labels=labels, class_names=None, masks=masks,
                     num_added=0, options=options, info={"graph_file": str(path)})


def _mask(values: np.ndarray, name: str, path: Path) -> np.ndarray:
    """A split's mask from node data ``name``: booleans, or numbers that are all 0 or 1."""
    if values.dtype != np.bool_:
        bad = (values != 0) & (values != 1)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise SylvieError(f"{path}: node data '{name}': node {r} has {values[r]:g}, not a mask value "
                              f"({int(bad.sum())} such nodes); a mask is boolean, or 0 and 1")
    return values.astype(bool)


def _labels(values: np.ndarray, column: str, path: Path) -> np.ndarray:
    """int64 labels: integers from 0; -1 (integer tensors) or NaN (float tensors) for an unlabelled node."""
    values = values.astype(np.float64)
    unlabelled = np.isnan(values) | (values == -1)
    bad = ~unlabelled & ((values < 0) | (values != np.floor(values)))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise SylvieError(f"{path}: node data '{column}': node {r} has label {values[r]:g}, out of range "
                          f"({int(bad.sum())} such nodes); labels are integers from 0, -1 or NaN for none")
    return np.where(unlabelled, -1, values).astype(np.int64)
