"""A user's edge list read into int64 node numbers, chunk by chunk: row numbers of the node table as given, or the
nodes' own ids (``node_key``) mapped to their rows by Arrow's hash lookup. An edge naming a node the table lacks is an
error naming the file and row, or (``unknown_nodes: add``) a node of its own, numbered after the table's."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sylvie.data.table_files import chunks, files_of, num_rows, ranges, read_npy, row_name
from sylvie.errors import SylvieError

EDGE_KINDS = ("parquet", "arrow", "csv", "tsv", "npy")


@dataclass(frozen=True)
class EdgeRows:
    """The edge list's rows as node numbers (before self-loops, duplicates and directions are dealt with)."""

    src: np.ndarray  # int64
    dst: np.ndarray  # int64
    added: pa.Array | None  # ids of the nodes only the edges name (unknown_nodes add), numbered from the table's N on
    num_added: int  # how many such nodes


class _Column:
    """One endpoint column, filled chunk by chunk; with ``unknown_nodes: add``, the rows naming unknown nodes are
    kept aside (their positions and ids) and numbered once every chunk is read."""

    def __init__(self, total: int | None):
        self.out = np.empty(total, np.int64) if total is not None else None
        self.parts, self.filled = [], 0
        self.unknown_rows, self.unknown_ids = [], []

    def add(self, ids: np.ndarray) -> None:
        if self.out is not None:
            self.out[self.filled:self.filled + ids.shape[0]] = ids
        else:
            self.parts.append(ids)
        self.filled += ids.shape[0]

    def array(self) -> np.ndarray:
        if self.out is not None:
            return self.out[:self.filled]
        return np.concatenate(self.parts) if self.parts else np.empty(0, np.int64)


def read_edge_rows(options, keys: pa.Array | None, num_nodes: int) -> EdgeRows:
    """The edges of a ``source: files`` dataset as node numbers, the node table having ``num_nodes`` rows (ids
    ``keys`` in row order, or None: edges give row numbers)."""
    if not options.edges:
        raise SylvieError("datasets: source files needs edges, the edge list's file or folder")
    files, kind = files_of(options.edges, "edges", EDGE_KINDS)
    add = options.unknown_nodes == "add"
    total = num_rows(files, kind) if kind != "npy" else None
    columns = [_Column(total) for _ in range(2)]
    names = list(options.edge_columns)
    if kind == "npy":
        for f in files:
            pairs = _npy_pairs(f)
            for rows in ranges(pairs.shape[0]):
                for j, col in enumerate(columns):
                    _map(pa.array(np.asarray(pairs[rows, j])), col, keys, num_nodes, add,
                         lambda r, f=f, first=rows.start: row_name(f, first + r), f"column {j}")
    else:
        for chunk in chunks(files, kind, names, "edges"):
            for name, col in zip(names, columns, strict=True):
                _map(chunk.batch.column(name), col, keys, num_nodes, add,
                     lambda r, c=chunk: row_name(c, r), f"column '{name}'")
    return _number_unknown(columns, keys, num_nodes)


def _npy_pairs(path) -> np.ndarray:
    """An ``.npy`` edge list as (M, 2): given so, or as OGB's edge_index (2, M)."""
    arr = read_npy(path, "edges")
    if arr.ndim != 2 or 2 not in arr.shape or not np.issubdtype(arr.dtype, np.integer):
        raise SylvieError(f"{path}: edges: a {arr.dtype} array of shape {arr.shape}; an .npy edge list is integers of "
                          f"shape (M, 2), or (2, M) as OGB's edge_index")
    return arr.T if arr.shape[0] == 2 and arr.shape[1] != 2 else arr


def _map(values: pa.Array, col: _Column, keys: pa.Array | None, n: int, add: bool, name_row, what: str) -> None:
    """Append one chunk of an endpoint column, as node numbers."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        r = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise SylvieError(f"{name_row(r)}: {what}: an edge without a node id")
    t = values.type
    if keys is None:
        if not pa.types.is_integer(t):
            raise SylvieError(f"{name_row(0)}: {what} holds {t}, not row numbers of the node table; set node_key to "
                              f"the node table's id column, so that these ids are looked up there")
        ids = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        bad = (ids < 0) | ((ids >= n) if not add else False)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise SylvieError(f"{name_row(r)}: {what}: node {int(ids[r])} is out of range: the node table has {n} rows, "
                              f"so edges name nodes 0..{n - 1} ({int(bad.sum())} such ids in this chunk); set node_key "
                              f"if the edges use the nodes' own ids, or unknown_nodes: add for nodes without a row")
        col.add(ids)
        return
    if pa.types.is_integer(t) != pa.types.is_integer(keys.type) or not (
            pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise SylvieError(f"{name_row(0)}: {what} holds {t} but the node table's ids ({keys.type}) are "
                          f"{'integers' if pa.types.is_integer(keys.type) else 'strings'}; the two must name nodes "
                          f"the same way")
    values = values.cast(keys.type)
    index = pc.index_in(values, value_set=keys)
    missing = index.is_null().to_numpy(zero_copy_only=False)
    ids = pc.fill_null(index, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if missing.any():
        r = int(np.flatnonzero(missing)[0])
        if not add:
            raise SylvieError(f"{name_row(r)}: {what}: node {values[r].as_py()!r} is not in the node table "
                              f"({int(missing.sum())} such ids in this chunk); add its row, or set unknown_nodes: add "
                              f"to give it zero features and no label")
        at = np.flatnonzero(missing)
        col.unknown_rows.append(at + col.filled)
        col.unknown_ids.append(values.take(pa.array(at)))
    col.add(ids)


def _number_unknown(columns: list[_Column], keys: pa.Array | None, n: int) -> EdgeRows:
    src, dst = (c.array() for c in columns)
    if keys is None:  # row numbers beyond the table (unknown_nodes add): the nodes n..max
        top = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        return EdgeRows(src=src, dst=dst, added=None, num_added=max(0, top - n))
    unknown = [a for c in columns for a in c.unknown_ids]
    if not unknown:
        return EdgeRows(src=src, dst=dst, added=None, num_added=0)
    added = pc.unique(pa.concat_arrays(unknown))  # in order of first appearance, src before dst
    for c, arr in zip(columns, (src, dst), strict=True):
        if c.unknown_rows:
            ids = pa.concat_arrays(c.unknown_ids)
            arr[np.concatenate(c.unknown_rows)] = n + pc.index_in(ids, value_set=added).to_numpy().astype(np.int64)
    return EdgeRows(src=src, dst=dst, added=added, num_added=len(added))
