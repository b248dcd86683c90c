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
    num_added: int  # nodes only the edges name (unknown_nodes add), numbered from the table's N on
    added: pa.Array | None = None  # their ids, where the nodes have ids (node_key): those of the src column first,
    # in order of appearance, then the dst column's


class _Lookup:
    """Node number of each of the nodes' ids, built once for the whole edge list (Arrow's index_in would build its
    hash table of all N ids again for every chunk): int64 ids by binary search in their sorted order, text ids by a
    pandas.Index (its hash table kept)."""

    def __init__(self, keys: pa.Array):
        self.type = keys.type
        if pa.types.is_integer(keys.type):
            values = keys.to_numpy()
            self.order = np.argsort(values, kind="stable")
            self.sorted = values[self.order]
        else:
            import pandas as pd

            self.index = pd.Index(keys.to_numpy(zero_copy_only=False), dtype=object)

    def numbers(self, values: pa.Array) -> np.ndarray:
        """int64 node numbers of ``values`` (of the ids' type), -1 where an id is not a node's."""
        if pa.types.is_integer(self.type):
            v = values.to_numpy(zero_copy_only=False)
            at = np.minimum(np.searchsorted(self.sorted, v), max(self.sorted.shape[0] - 1, 0))
            found = self.sorted[at] == v if self.sorted.shape[0] else np.zeros(v.shape[0], bool)
            return np.where(found, self.order[at] if self.sorted.shape[0] else 0, -1).astype(np.int64)
        return self.index.get_indexer(values.to_numpy(zero_copy_only=False)).astype(np.int64)


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
    lookup = _Lookup(keys) if keys is not None else None
    names = list(options.edge_columns)
    if kind == "npy":
        arrays = [_npy_pairs(f) for f in files]
        columns = [_Column(sum(a.shape[0] for a in arrays)) for _ in range(2)]
        for f, pairs in zip(files, arrays, strict=True):
            for rows in ranges(pairs.shape[0]):
                for j, col in enumerate(columns):
                    _map(pa.array(np.asarray(pairs[rows, j])), col, lookup, num_nodes, add,
                         lambda r, f=f, first=rows.start: row_name(f, first + r), f"column {j}")
    else:
        columns = [_Column(num_rows(files, kind)) for _ in range(2)]
        types = {c: pa.large_string() for c in names} if kind in ("csv", "tsv") else None  # ids as written
        for chunk in chunks(files, kind, names, "edges", types):
            for name, col in zip(names, columns, strict=True):
                _map(chunk.batch.column(name), col, lookup, num_nodes, add,
                     lambda r, c=chunk: row_name(c, r), f"column '{name}'")
    return _number_unknown(columns, keys, num_nodes)


def _npy_pairs(path) -> np.ndarray:
    """An ``.npy`` edge list as (M, 2): given so, or as OGB's edge_index (2, M)."""
    arr = read_npy(path, "edges")
    if arr.ndim != 2 or 2 not in arr.shape or not np.issubdtype(arr.dtype, np.integer):
        raise SylvieError(f"{path}: edges: a {arr.dtype} array of shape {arr.shape}; an .npy edge list is integers of "
                          f"shape (M, 2), or (2, M) as OGB's edge_index")
    return arr.T if arr.shape[0] == 2 and arr.shape[1] != 2 else arr


def _as_type(values: pa.Array, t: pa.DataType, name_row, what: str, advice: str) -> pa.Array:
    """``values`` cast to ``t`` (text read from a CSV to integers, integers to text), or a SylvieError naming the
    first value that does not convert."""
    try:
        return values.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    for r in range(len(values)):  # the first value that does not cast (only on the way to an error)
        try:
            values.slice(r, 1).cast(t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SylvieError(f"{name_row(r)}: {what}: {values[r].as_py()!r} is not {advice}") from None
    raise SylvieError(f"{name_row(0)}: {what}: {values.type} does not convert to {t}")


def _map(values: pa.Array, col: _Column, lookup: _Lookup | None, n: int, add: bool, name_row, what: str) -> None:
    """Append one chunk of an endpoint column, as node numbers."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):  # a pandas category column
        values = values.cast(values.type.value_type)
    if values.null_count:
        r = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise SylvieError(f"{name_row(r)}: {what}: an edge without a node id")
    t = values.type
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    if not (text or pa.types.is_integer(t)):
        raise SylvieError(f"{name_row(0)}: {what} holds {t}; node ids are integers or text")
    if lookup is None:
        if text:
            values = _as_type(values, pa.int64(), name_row, what, "a row number of the node table; set node_key to "
                              "the node table's id column, so that the edges' ids are looked up there")
        ids = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        bad = (ids < 0) | ((ids >= n) if not add else False)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise SylvieError(f"{name_row(r)}: {what}: node {int(ids[r])} is out of range: the node table has {n} "
                              f"rows, so edges name nodes 0..{n - 1} ({int(bad.sum())} such ids in this chunk); set "
                              f"node_key if the edges use the nodes' own ids, or unknown_nodes: add for nodes without "
                              f"a row")
        col.add(ids)
        return
    if text and pa.types.is_integer(lookup.type):  # a CSV's ids, the node table's integers
        values = _as_type(values, pa.int64(), name_row, what, "an integer, as the node table's ids are")
    values = values.cast(lookup.type)  # integers to text where the node table's ids are text
    ids = lookup.numbers(values)
    missing = ids < 0
    if missing.any():
        r = int(np.flatnonzero(missing)[0])
        if not add:
            raise SylvieError(f"{name_row(r)}: {what}: node {values[r].as_py()!r} is not in the node table "
                              f"({int(missing.sum())} such ids in this chunk); add its row, or set unknown_nodes: add "
                              f"to give it zero features and no label")
        at = np.flatnonzero(missing)
        col.unknown_rows.append(at + col.filled)
        col.unknown_ids.append(values.take(pa.array(at)))
        ids[missing] = 0  # numbered once every chunk is read
    col.add(ids)


def _number_unknown(columns: list[_Column], keys: pa.Array | None, n: int) -> EdgeRows:
    src, dst = (c.array() for c in columns)
    if keys is None:  # row numbers beyond the table (unknown_nodes add): the nodes n..max
        top = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        if top > n:
            named = np.unique(np.concatenate([src[src >= n], dst[dst >= n]])).shape[0]
            if named < top - n:
                raise SylvieError(f"edges: unknown_nodes add: the edges name {named} nodes beyond the node table's "
                                  f"{n} rows but reach number {top - 1}: {top - n - named} numbers between would "
                                  f"become nodes of no edge; number the nodes without gaps, or set node_key so "
                                  f"that ids are looked up")
        return EdgeRows(src=src, dst=dst, num_added=max(0, top - n))
    unknown = [a for c in columns for a in c.unknown_ids]
    if not unknown:
        return EdgeRows(src=src, dst=dst, num_added=0)
    added = pc.unique(pa.concat_arrays(unknown))  # in order of first appearance, src before dst
    for c, arr in zip(columns, (src, dst), strict=True):
        if c.unknown_rows:
            ids = pa.concat_arrays(c.unknown_ids)
            arr[np.concatenate(c.unknown_rows)] = n + pc.index_in(ids, value_set=added).to_numpy().astype(np.int64)
    return EdgeRows(src=src, dst=dst, num_added=len(added), added=added)
