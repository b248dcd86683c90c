"""A user's node table (a row a node) read into what a canonical graph needs of its nodes: their ids, features,
labels and split. Read in chunks (``table_files``): what is kept of a chunk is the converted columns, never the
text. Every error names the file, the column and the first bad row."""
from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sylvie.data.column_types import decoded, filled, is_large_list_view, is_list_view, is_text
from sylvie.data.input_files import files_of
from sylvie.data.own_graph import check_split
from sylvie.data.table_files import (
    Chunk,
    chunks,
    headers,
    is_glob,
    match_columns,
    num_rows,
    read_npy,
    row_name,
    table_columns,
)
from sylvie.errors import SylvieError
from sylvie.formats.splits import SPLITS

TABLE_KINDS = ("parquet", "arrow", "csv", "tsv")
log = logging.getLogger(__name__)
SPLIT_NAMES = {"train": 0, "val": 1, "valid": 1, "validation": 1, "test": 2}


@dataclass(frozen=True)
class NodeTable:
    """The nodes of a user's graph, in the table's row order."""

    keys: pa.Array | None  # each node's own id (int64 or large_string), where the table has a key column
    features: np.ndarray  # float32, a row a node
    labels: np.ndarray  # int64, -1: unlabelled
    class_names: list[str] | None  # the classes' names where the labels were strings (class i is class_names[i])
    masks: dict[str, np.ndarray] | None  # split -> bool mask; None: the table gives no split

    @property
    def num_nodes(self) -> int:
        return int(self.labels.shape[0])


class _Rows:
    """Where each row of a table read chunk by chunk came from (file and row in it, not the chunk's data), to name a
    bad row by file and line."""

    def __init__(self, path):
        self.path = path  # the table, as the config names it
        self.starts, self.places = [], []
        self.total = 0

    def add(self, chunk: Chunk) -> None:
        self.starts.append(self.total)
        self.places.append((chunk.path, chunk.first))
        self.total += chunk.batch.num_rows

    def name(self, row: int) -> str:
        i = int(np.searchsorted(self.starts, row, side="right")) - 1
        path, first = self.places[i]
        return row_name(path, first + row - self.starts[i])


def read_node_table(options, what: str = "node_table", node_type: str | None = None,
                    target: str | None = None) -> NodeTable:
    """The node table of a ``source: files`` dataset (its typed options). A typed graph's table of ``node_type``
    (``what``: ``node_tables.<type>``): its features are optional (a type without them has a matrix of no columns),
    and only the ``target`` type's table may carry the labels and split."""
    if not options.node_table:
        raise SylvieError("datasets: source files needs node_table, the node table's file or folder (a row a node: "
                          "features, label, split)")
    files, kind = files_of(options.node_table, what, TABLE_KINDS)
    names_of = headers(files, kind, what)  # each file's columns, read once
    names = names_of[0]
    features_file = options.features_file
    split_columns = [options.split_column] if options.split_column else list(options.mask_columns or [])
    labelled = node_type is None or node_type == target
    if not labelled:  # a type that is not the target: no labels, no split
        given = [c for c in (options.label_column, *split_columns) if c in names]
        if given:
            raise SylvieError(f"{files[0]}: {what}: column '{given[0]}' gives node type {node_type!r} labels or a "
                              f"split, but the target type is {target!r}; labels and splits belong to the target "
                              f"type: drop the column, or make {node_type!r} the target")
        split_columns = []
    roles = _roles(options, labelled, split_columns, f"{files[0]}: {what}")
    others = list(roles)
    table_columns(files, kind, others, what, names_of)
    # the features: named columns, or every column a glob matches but the ids, labels and split (a typed graph's
    # type may have none)
    wanted = list(options.feature_columns)
    if node_type is not None:  # a type may have no features: the columns its table lacks are said, not refused
        matched = [w for w in wanted if any(fnmatch.fnmatchcase(n, w) for n in names)]
        _warn_unmatched(files[0], what, node_type, [w for w in wanted if w not in matched], bool(matched), names)
        wanted = matched
    feature_columns = [] if features_file else _feature_columns(files, kind, names_of, wanted, roles, what)
    types = {} if kind not in ("csv", "tsv") else {  # CSV: as each column must be read, not as its first rows look
        **{c: pa.float64() for c in feature_columns}, **{c: pa.large_string() for c in others},
        **{c: pa.bool_() for c in (options.mask_columns or [])}}
    rows, total = _Rows(options.node_table), num_rows(files, kind)
    features = _FeatureRows(feature_columns, total)
    kept = {c: [] for c in others}
    for chunk in chunks(files, kind, list(dict.fromkeys(others + feature_columns)), what, types, names_of):
        rows.add(chunk)
        if not features_file:
            features.add(chunk)
        for c in kept:
            kept[c].append(chunk.batch.column(c))
    n = rows.total
    if n == 0:
        raise SylvieError(f"{options.node_table}: node_table: the table has no rows; a graph needs nodes")
    column = {c: _one_type(v, c, options.node_table) for c, v in kept.items()}
    if features_file:
        matrix = _features_from_npy(features_file, n, options.node_table)
    elif feature_columns:
        matrix = features.matrix()
    else:
        matrix = np.empty((n, 0), np.float32)
    if labelled:
        labels, class_names = _labels(column[options.label_column], options.label_column, rows)
    else:
        labels, class_names = np.full(n, -1, np.int64), None
    keys = _keys(column[options.node_key], options.node_key, rows) if options.node_key else None
    if not labelled:
        masks = None
    elif options.split_column:
        masks = _split_of_column(column[options.split_column], options.split_column, rows)
    elif options.mask_columns:
        masks = {s: _mask(column[c], c, rows) for s, c in zip(SPLITS, options.mask_columns, strict=True)}
    else:
        masks = None
    if masks is not None:
        check_split(masks, labels, rows.name, options.label_column, split_columns, options.node_table)
    return NodeTable(keys=keys, features=matrix, labels=labels, class_names=class_names, masks=masks)


def _warn_unmatched(path, what: str, node_type: str, unmatched: list[str], any_matched: bool,
                    names: list[str]) -> None:
    """A warning line naming a typed table's feature columns that match none of its columns, and, where none of
    its feature columns matched, that its type will learn an embedding instead of features."""
    if not unmatched:
        return
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    then = ("its other feature columns are read" if any_matched else
            f"node type {node_type!r} has no features, and the models learn an embedding for it "
            f"(model.embedding_width); give {what}: {{path: ..., feature_columns: []}} to say it has none")
    log.warning(f"{path}: {what}: feature_columns {unmatched} match no column of the table (it has {shown}): {then}")


def _roles(options, labelled: bool, split_columns: list[str], where: str) -> dict[str, str]:
    """The node table's columns other than the features, each with its role (the config's key naming it): a column
    named for two roles is a SylvieError naming both."""
    named = [("node_key", options.node_key)]
    if labelled:
        named.append(("label_column", options.label_column))
        named += [("split_column", c) for c in split_columns] if options.split_column else \
            [(f"mask_columns ({s})", c) for s, c in zip(SPLITS, split_columns, strict=False)]
    roles: dict[str, str] = {}
    for role, column in named:
        if column and column in roles:
            raise SylvieError(f"{where}: column '{column}' is named both as {roles[column]} and as {role}; a column "
                              f"has one role: name another column for one of them")
        if column:
            roles[column] = role
    return roles


def _feature_columns(files, kind: str, names_of: list[list[str]], wanted: list[str], roles: dict[str, str],
                     what: str) -> list[str]:
    """The feature columns ``wanted`` names (globs expanded in the file's order, the same in every file: each
    file's columns ``names_of``), each once: a glob leaves out the columns of other roles (``roles``); naming one,
    or one column twice, is a SylvieError naming both."""
    table_columns(files, kind, wanted, what, names_of)
    by: dict[str, str] = {}
    for w in wanted:
        for c in match_columns(files[0], names_of[0], [w], what):
            if c in roles:
                if is_glob(w):
                    continue
                leak = " (a label among the features leaks the answer)" if roles[c] == "label_column" else ""
                raise SylvieError(f"{files[0]}: {what}: column '{c}' is named both as {roles[c]} and in "
                                  f"feature_columns; a column has one role{leak}: drop it from feature_columns")
            if c in by:
                twice = f"'{w}' twice" if by[c] == w else f"both '{by[c]}' and '{w}'"
                raise SylvieError(f"{files[0]}: {what}: feature_columns names column '{c}' by {twice}; name each "
                                  f"feature once")
            by[c] = w
    return list(by)


def _one_type(arrays: list, name: str, where) -> pa.ChunkedArray:
    """A column's chunks as one column: of one type, which the files of a folder (CSV: each its own inference) may
    not agree on."""
    types = list(dict.fromkeys(a.type for a in arrays))
    if len(types) > 1:
        try:
            common = pa.unify_schemas([pa.schema([(name, t)]) for t in types],
                                      promote_options="permissive").field(name).type
            arrays = [a.cast(common) for a in arrays]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            raise SylvieError(f"{where}: node_table: column '{name}' has different types in different files or parts "
                              f"({', '.join(map(str, types))}); give it one type throughout") from None
    return pa.chunked_array(arrays, type=arrays[0].type)


class _FeatureRows:
    """The feature matrix, gathered chunk by chunk: from one list column, or from numeric columns (a dimension
    each). Preallocated where the table's row count is known from its metadata."""

    def __init__(self, columns: list[str], total: int | None):
        self.columns, self.total = columns, total
        self.parts, self.out, self.filled = [], None, 0
        self.dim = None  # a list column's width: its first row's

    def add(self, chunk: Chunk) -> None:
        block = self._convert(chunk)
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            col = self.columns[0] if len(self.columns) == 1 else \
                self.columns[int(np.flatnonzero(~np.isfinite(block[r]))[0])]
            raise SylvieError(f"{row_name(chunk, r)}: column '{col}': a feature is NaN, infinite, empty or beyond "
                              f"float32's range ({int(bad.sum())} such rows in this chunk); clean the features or "
                              f"drop those nodes")
        if block.shape[0] == 0:
            return
        if self.total is not None:
            if self.out is None:
                self.out = np.empty((self.total, block.shape[1]), np.float32)
            self.out[self.filled:self.filled + block.shape[0]] = block
        else:
            self.parts.append(block)
        self.filled += block.shape[0]

    def _convert(self, chunk: Chunk) -> np.ndarray:
        batch = chunk.batch
        if len(self.columns) == 1 and _is_list(batch.schema.field(self.columns[0]).type):
            col = batch.column(self.columns[0])
            lengths = pc.fill_null(pc.list_value_length(col), -1).to_numpy(zero_copy_only=False)
            if self.dim is None and len(lengths):
                self.dim = int(lengths[0])
            d = self.dim or 0
            odd = np.flatnonzero(lengths != d)
            if odd.size:
                r = int(odd[0])
                got = "no list" if lengths[r] < 0 else f"a list of {lengths[r]} features"
                raise SylvieError(f"{row_name(chunk, r)}: column '{self.columns[0]}': {got} where the first row has "
                                  f"{d}; every node needs as many")
            values = col.flatten() if pa.types.is_fixed_size_list(col.type) else pc.list_flatten(col)
            return _floats(values, chunk, self.columns[0]).reshape(-1, d)
        block = np.empty((batch.num_rows, len(self.columns)), np.float32)
        for j, name in enumerate(self.columns):
            block[:, j] = _floats(batch.column(name), chunk, name)
        return block

    def matrix(self) -> np.ndarray:
        return self.out if self.out is not None else np.concatenate(self.parts)


def _is_list(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is a list (Polars >= 1.0 may write a list view), read as a node's features."""
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or is_list_view(t)
            or is_large_list_view(t))


def _floats(values: pa.Array, chunk: Chunk, name: str) -> np.ndarray:
    """A numeric column as float32 (nulls NaN, caught as such by the caller); a text column is an error."""
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_boolean(values.type)
            or pa.types.is_null(values.type)):
        raise SylvieError(f"{chunk.path}: column '{name}' holds {values.type}, not numbers; features must be numeric "
                          f"(name the feature columns in feature_columns)")
    with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf: caught as non-finite
        return values.to_numpy(zero_copy_only=False).astype(np.float32)


def _features_from_npy(path, n: int, table) -> np.ndarray:
    arr = read_npy(path, "features_file")
    if arr.ndim != 2 or arr.dtype not in (np.float16, np.float32, np.float64):
        raise SylvieError(f"{path}: features_file: a {arr.dtype} array of shape {arr.shape}, not an N x D matrix of "
                          f"float16, float32 or float64")
    if arr.shape[0] != n:
        raise SylvieError(f"{path}: features_file has {arr.shape[0]} rows but the node table {table} has {n}; the "
                          f"columns differ in length: give a row a node, in the table's order")
    out = np.empty(arr.shape, np.float32)
    step = max(1, (64 << 20) // max(1, arr.shape[1] * 4))
    for start in range(0, arr.shape[0], step):
        with np.errstate(over="ignore"):
            out[start:start + step] = arr[start:start + step]
        bad = ~np.isfinite(out[start:start + step]).all(axis=1)
        if bad.any():
            raise SylvieError(f"{path}, row {start + int(np.flatnonzero(bad)[0])}: features_file: a feature is NaN, "
                              f"infinite or beyond float32's range; clean the features or drop those nodes")
    return out


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _labels(col: pa.ChunkedArray, name: str, rows: _Rows) -> tuple[np.ndarray, list[str] | None]:
    """int64 labels (-1: unlabelled) and, for text labels, the class names in sorted order."""
    col = decoded(col)
    t = col.type
    if is_text(t):
        numbers = _as_numbers(col)
        if numbers is None:  # class names
            names = pc.unique(col.drop_null()).to_pylist()
            names.sort()
            index = pc.index_in(col, value_set=pa.array(names, type=t))
            return filled(index), names
        col, t = numbers, numbers.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)):
        raise SylvieError(f"{rows.path}: column '{name}' holds {t}; labels are "
                          f"integers from 0 or class names")
    values = col.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls are NaN: unlabelled
    labelled = ~np.isnan(values)
    bad = labelled & (~np.isfinite(values) | (values < 0) | (values != np.floor(values)))
    if bad.any():
        r = _first_bad(bad)
        raise SylvieError(f"{rows.name(r)}: column '{name}': label {values[r]:g} is out of range ({int(bad.sum())} "
                          f"such rows); labels are integers from 0, and an unlabelled node's is empty")
    return np.where(labelled, values, -1).astype(np.int64), None


def _as_numbers(col: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """A text column (CSV's labels and splits are read as text) as int64 if every value is an integer, else as
    float64 if every value is a number; None if a value is neither (text, then)."""
    for t in (pa.int64(), pa.float64()):
        try:
            return col.cast(t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return None


def _keys(col: pa.ChunkedArray, name: str, rows: _Rows) -> pa.Array:
    """The node ids, int64 or large_string, each once."""
    col = decoded(col)
    t = col.type
    if pa.types.is_integer(t):
        keys = col.cast(pa.int64()).combine_chunks()
    elif is_text(t):
        keys = col.cast(pa.large_string()).combine_chunks()
    else:
        raise SylvieError(f"{rows.path}: column '{name}' holds {t}; node ids are integers or strings")
    if keys.null_count:
        r = _first_bad(keys.is_null().to_numpy(zero_copy_only=False))
        raise SylvieError(f"{rows.name(r)}: column '{name}': a node without an id; every node needs one")
    first = filled(pc.index_in(keys, value_set=keys))
    dup = first != np.arange(len(keys))
    if dup.any():
        r = _first_bad(dup)
        raise SylvieError(f"{rows.name(r)}: column '{name}': node id {keys[r].as_py()!r} appears again (first at "
                          f"{rows.name(int(first[r]))}; {int(dup.sum())} repeated ids); every node's id must be "
                          f"unique")
    return keys


def _split_of_column(col: pa.ChunkedArray, name: str, rows: _Rows) -> dict[str, np.ndarray]:
    col = decoded(col)
    t = col.type
    numbers = _as_numbers(col) if is_text(t) else None
    if numbers is not None and pa.types.is_integer(numbers.type):
        col, t = numbers, numbers.type
    if is_text(t):
        lowered = pc.utf8_lower(col)
        known = pa.array(list(SPLIT_NAMES), type=lowered.type)
        index = filled(pc.index_in(lowered, value_set=known))
        bad = (index < 0) & ~col.is_null().to_numpy(zero_copy_only=False)
        if bad.any():
            r = _first_bad(bad)
            raise SylvieError(f"{rows.name(r)}: column '{name}': split {pc.take(col, [r])[0].as_py()!r} is not train, "
                              f"val (valid, validation) or test; leave it empty for a node in no split")
        code = np.where(index < 0, -1, np.array(list(SPLIT_NAMES.values()))[np.maximum(index, 0)])
    elif pa.types.is_integer(t):
        code = filled(col)
        bad = (code < -1) | (code > 2)
        if bad.any():
            r = _first_bad(bad)
            raise SylvieError(f"{rows.name(r)}: column '{name}': split {int(code[r])} is not 0 (train), 1 (val), 2 "
                              f"(test) or -1 (none)")
    else:
        raise SylvieError(f"{rows.path}: column '{name}' holds {t}; a split column holds train, val, test "
                          f"(or 0, 1, 2)")
    return {s: code == i for i, s in enumerate(SPLITS)}


def _mask(col: pa.ChunkedArray, name: str, rows: _Rows) -> np.ndarray:
    t = col.type
    if not (pa.types.is_boolean(t) or pa.types.is_integer(t)):
        raise SylvieError(f"{rows.path}: column '{name}' holds {t}; a mask column is boolean (or 0 and 1)")
    values = pc.fill_null(col, False if pa.types.is_boolean(t) else 0).to_numpy(zero_copy_only=False)
    if not pa.types.is_boolean(t):
        bad = (values != 0) & (values != 1)
        if bad.any():
            r = _first_bad(bad)
            raise SylvieError(f"{rows.name(r)}: column '{name}': {int(values[r])} is not a mask value (true/false, "
                              f"1/0)")
    return values.astype(bool)
