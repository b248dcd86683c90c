"""A user's edge list read into int64 node numbers, chunk by chunk: row numbers of the node table as given, or the
nodes' own ids (``node_key``) mapped to their rows by Arrow's hash lookup. An edge naming a node the table lacks is an
error naming the file and row, or (``unknown_nodes: add``) a node of its own, numbered after the table's."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sylvie.data.column_types import decoded, filled, is_text
from sylvie.data.input_files import files_of
from sylvie.data.table_files import chunks, num_rows, ranges, read_npy, row_name
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
    """Node numbers of the nodes' ids. Integer ids: a binary search in their sorted order, built once. Text ids: Arrow's
    hash lookup (index_in), which builds a hash table of all N ids at every call, so the edges' ids are looked up
    in batches of at least N (``batch``): the work stays linear in the edges however many nodes there are."""

    def __init__(self, keys: pa.Array, add: bool | None):
        self.keys, self.type, self.add = keys, keys.type, add
        self.batch = max(len(keys), 1 << 20)
        if pa.types.is_integer(keys.type):
            values = keys.to_numpy()
            self.order = np.argsort(values, kind="stable")
            self.sorted = values[self.order]

    def numbers(self, values: pa.Array) -> np.ndarray:
        """int64 node numbers of ``values`` (of the ids' type), -1 where an id is not a node's."""
        if not pa.types.is_integer(self.type):
            return filled(pc.index_in(values, value_set=self.keys))
        v = values.to_numpy(zero_copy_only=False)
        if not self.sorted.shape[0]:
            return np.full(v.shape[0], -1, np.int64)
        at = np.minimum(np.searchsorted(self.sorted, v), self.sorted.shape[0] - 1)
        return np.where(self.sorted[at] == v, self.order[at], -1).astype(np.int64)


class _Column:
    """One endpoint column, filled chunk by chunk: node numbers where known at once, else (text ids) chunks waiting
    for a batched lookup; with ``unknown_nodes: add``, the rows naming unknown nodes are kept aside (their positions
    and ids) and numbered once every chunk is read."""

    def __init__(self, total: int | None):
        self.out = np.empty(total, np.int64) if total is not None else None
        self.parts, self.filled = [], 0
        self.unknown_rows, self.unknown_ids = [], []
        self.waiting, self.waiting_rows = [], 0  # (start, its ids' array, values, name_row, what) of each chunk

    def add(self, ids: np.ndarray) -> np.ndarray:
        """Append ``ids``; returns where they are held (written over by a later lookup)."""
        if self.out is not None:
            held = self.out[self.filled:self.filled + ids.shape[0]]
            held[:] = ids
        else:
            held = ids
            self.parts.append(ids)
        self.filled += ids.shape[0]
        return held

    def wait(self, values: pa.Array, lookup: _Lookup, name_row, what: str) -> None:
        """A chunk of text ids, looked up with the others once at least ``lookup.batch`` wait."""
        start = self.filled
        held = self.add(np.zeros(len(values), np.int64))
        self.waiting.append((start, held, values, name_row, what))
        self.waiting_rows += len(values)
        if self.waiting_rows >= lookup.batch:
            self.look_up(lookup)

    def look_up(self, lookup: _Lookup) -> None:
        if not self.waiting:
            return
        ids = lookup.numbers(pa.concat_arrays([w[2] for w in self.waiting]))
        at = 0
        for start, held, values, name_row, what in self.waiting:
            mine = ids[at:at + len(values)]
            at += len(values)
            _unknown(self, start, mine, values, lookup.add, name_row, what)
            held[:] = mine
        self.waiting, self.waiting_rows = [], 0

    def array(self) -> np.ndarray:
        if self.out is not None:
            return self.out[:self.filled]
        return np.concatenate(self.parts) if self.parts else np.empty(0, np.int64)


class IdColumn:
    """Ids of nodes named outside the edge list's two columns (a validation pair's negatives) read into node numbers
    chunk by chunk, with the edge list's checks: an id that is no node's is an error naming its file and row.
    ``keys``: the nodes' ids in row order (None: the ids are row numbers of the ``num_nodes`` nodes)."""

    def __init__(self, keys: pa.Array | None, num_nodes: int):
        self.lookup = _Lookup(keys, None) if keys is not None else None
        self.num_nodes, self.column = num_nodes, _Column(None)

    def add(self, values: pa.Array, name_row, what: str) -> None:
        """Append ``values`` (ids of the nodes' id type, or text), ``name_row(i)`` naming the row of value i."""
        _map(values, self.column, self.lookup, self.num_nodes, None, name_row, what)

    def array(self) -> np.ndarray:
        """Every value added, as int64 node numbers, in order."""
        if self.lookup is not None:
            self.column.look_up(self.lookup)
        return self.column.array()


def read_edge_rows(options, keys: pa.Array | None, num_nodes: int, dst: tuple | None = None,
                   what: str = "edges", src_type: str = "", known_only: bool = False) -> EdgeRows:
    """The edges of a ``source: files`` dataset as node numbers, the node table having ``num_nodes`` rows (ids
    ``keys`` in row order, or None: edges give row numbers). A typed graph's relation (``what``: where the config
    names its file) has its destinations in another node type's table: ``dst`` = (its keys, its rows, the type),
    ``keys`` and ``num_nodes`` the sources' type's, ``src_type`` (every id in its type's table: no unknown nodes
    added). ``known_only``: pairs whose every node must be one of the ``num_nodes`` (a link dataset's validation
    and test pairs: an unknown node is an error, whatever ``unknown_nodes`` says)."""
    if not options.edges:
        raise SylvieError("datasets: source files needs edges, the edge list's file or folder")
    files, kind = files_of(options.edges, what, EDGE_KINDS)
    add = None if known_only else options.unknown_nodes == "add" and dst is None  # None: no adding, nor advising it
    if dst is None:  # both columns name nodes of the one table: one lookup
        one = (_Lookup(keys, add) if keys is not None else None, num_nodes, "")
        lookups = [one, one]
    else:
        lookups = [(_Lookup(k, add) if k is not None else None, n, f" ({what}: node type {t!r})")
                   for k, n, t in ((keys, num_nodes, src_type), dst)]
    names = list(options.edge_columns)
    if kind != "npy" and names[0] == names[1]:
        raise SylvieError(f"{files[0]}: {what}: edge_columns names column '{names[0]}' both as the source and as the "
                          f"destination; name the two columns of an edge")
    if kind == "npy":
        arrays = [_npy_pairs(f) for f in files]
        columns = [_Column(sum(a.shape[0] for a in arrays)) for _ in range(2)]
        for f, pairs in zip(files, arrays, strict=True):
            for rows in ranges(pairs.shape[0]):
                for j, (col, (lookup, n, of)) in enumerate(zip(columns, lookups, strict=True)):
                    _map(pa.array(np.asarray(pairs[rows, j])), col, lookup, n, add,
                         lambda r, f=f, first=rows.start: row_name(f, first + r), f"column {j}{of}")
    else:
        columns = [_Column(num_rows(files, kind)) for _ in range(2)]
        types = {c: pa.large_string() for c in names} if kind in ("csv", "tsv") else None  # ids as written
        for chunk in chunks(files, kind, names, what, types):
            for name, col, (lookup, n, of) in zip(names, columns, lookups, strict=True):
                _map(chunk.batch.column(name), col, lookup, n, add,
                     lambda r, c=chunk: row_name(c, r), f"column '{name}'{of}")
    for col, (lookup, _, _) in zip(columns, lookups, strict=True):
        if lookup is not None:
            col.look_up(lookup)
    if dst is not None:  # every id checked against its type's table
        return EdgeRows(src=columns[0].array(), dst=columns[1].array(), num_added=0)
    return _number_unknown(columns, keys, num_nodes)


def _npy_pairs(path) -> np.ndarray:
    """An ``.npy`` edge list as (M, 2): given so, or as OGB's edge_index (2, M)."""
    arr = read_npy(path, "edges")
    if arr.ndim != 2 or 2 not in arr.shape or not np.issubdtype(arr.dtype, np.integer):
        raise SylvieError(f"{path}: edges: a {arr.dtype} array of shape {arr.shape}; an .npy edge list is integers of "
                          f"shape (M, 2), or (2, M) as OGB's edge_index")
    if arr.shape == (2, 2):
        raise SylvieError(f"{path}: edges: an array of shape (2, 2), which may be two edges as rows (M, 2) or as "
                          f"columns (2, M, OGB's edge_index): the two cannot be told apart; give these edges as a "
                          f"CSV or Parquet edge list with src and dst columns")
    return arr.T if arr.shape[0] == 2 else arr


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


def _map(values: pa.Array, col: _Column, lookup: _Lookup | None, n: int, add: bool | None, name_row,
         what: str) -> None:
    """Append one chunk of an endpoint column, as node numbers."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = decoded(values)  # a pandas category column: its values
    if values.null_count:
        r = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise SylvieError(f"{name_row(r)}: {what}: an edge without a node id")
    t = values.type
    text = is_text(t)
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
            rows = ("; set node_key if the edges use the nodes' own ids" if "node type" in what or add is None else
                    "; set node_key if the edges use the nodes' own ids, or unknown_nodes: add for nodes without a row")
            raise SylvieError(f"{name_row(r)}: {what}: node {int(ids[r])} is out of range: the node table has {n} "
                              f"rows, so edges name nodes 0..{n - 1} ({int(bad.sum())} such ids in this chunk){rows}")
        col.add(ids)
        return
    if text and pa.types.is_integer(lookup.type):  # a CSV's ids, the node table's integers
        values = _as_type(values, pa.int64(), name_row, what, "an integer, as the node table's ids are")
    values = values.cast(lookup.type)  # integers to text where the node table's ids are text
    if not pa.types.is_integer(lookup.type):
        col.wait(values, lookup, name_row, what)
        return
    ids = lookup.numbers(values)
    _unknown(col, col.filled, ids, values, add, name_row, what)
    col.add(ids)


def _unknown(col: _Column, start: int, ids: np.ndarray, values: pa.Array, add: bool | None, name_row,
             what: str) -> None:
    """The ids of a chunk (rows ``start``.. of the column) that are no node's (-1 in ``ids``): an error naming the
    first, or (``add``) kept aside to be numbered after the table's nodes (0 meanwhile)."""
    missing = ids < 0
    if not missing.any():
        return
    r = int(np.flatnonzero(missing)[0])
    if not add:
        advice = ("add its row to that type's table" if "node type" in what else
                  "the pairs to predict and their negatives name the graph's nodes only: add its row"
                  if add is None else "add its row, or set unknown_nodes: add to give it zero features and no label")
        raise SylvieError(f"{name_row(r)}: {what}: node {values[r].as_py()!r} is not in the node table "
                          f"({int(missing.sum())} such ids in this chunk); {advice}")
    at = np.flatnonzero(missing)
    col.unknown_rows.append(at + start)
    col.unknown_ids.append(values.take(pa.array(at)))
    ids[missing] = 0  # numbered once every chunk is read


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
