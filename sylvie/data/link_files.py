"""A user's own edge split (``source: files``, link prediction): each edge's split in a column of the edge list
(``edge_split_column``), or the validation and test pairs in files of their own (``val_edges``, ``test_edges``;
``edges`` then holds the training edges); each validation and test pair's negatives, where given, in a list column
of node ids (``negatives_column``), else drawn once (``link_split.draw_negatives``).

Read with the edge list's checks (ids looked up in the node table; a bad row named by its file and row). A
validation or test pair that is also a training edge ((u, v), or either way in an undirected graph) would be seen by
message passing: refused naming the first, or (``leaked_edges: keep``) kept with a warning giving the count.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sylvie.data.column_types import decoded, filled, is_text
from sylvie.data.edge_files import EDGE_KINDS, EdgeRows, IdColumn, read_edge_rows
from sylvie.data.graph import Graph, edges_of_keys, pair_keys
from sylvie.data.input_files import files_of
from sylvie.data.link_split import draw_negatives, in_sorted, positive_keys
from sylvie.data.node_table import SPLIT_NAMES
from sylvie.data.table_files import Chunk, chunks, num_rows, read_npy, row_name
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TRAIN, LinkPairs
from sylvie.formats.splits import SPLITS

log = logging.getLogger(__name__)

# a split column's values: the node split column's names, and their numbers (written as text in a CSV)
_CODES = {**SPLIT_NAMES, "0": 0, "1": 1, "2": 2}
_ACCEPTED = "train, val (valid, validation), test, or 0, 1, 2"


def given(options) -> bool:
    """Whether a dataset's options give an edge split of the user's own (a column, or files per split)."""
    return bool(options.edge_split_column or options.val_edges or options.test_edges)


@dataclass
class _Table:
    """Files read as one table (a file, or a folder's files in name order), to name its row r by file and row."""

    files: list[Path]
    kind: str
    what: str  # where the config names it: edges, val_edges, test_edges
    column: str | None  # a column every file has, counted to find each file's rows (None: an .npy edge list)
    starts: np.ndarray | None = None

    def name(self, row: int) -> str:
        if self.starts is None:  # on the way to an error only
            self.starts = np.cumsum([0] + [self._rows(f) for f in self.files])
        f = int(np.searchsorted(self.starts, row, side="right")) - 1
        return row_name(self.files[f], row - int(self.starts[f]))

    def _rows(self, path: Path) -> int:
        if self.kind == "npy":
            shape = read_npy(path, self.what).shape
            return shape[1] if shape[0] == 2 else shape[0]
        known = num_rows([path], self.kind)
        if known is not None:
            return known
        types = {self.column: pa.large_string()}
        return sum(c.batch.num_rows for c in chunks([path], self.kind, [self.column], self.what, types))


@dataclass(frozen=True)
class EdgeSplitRows:
    """A user's edge split as read: the training edges' rows (the graph's edges, before ``own_graph`` makes them
    canonical) and the validation and test pairs in file order, with their negatives where given."""

    train_src: np.ndarray
    train_dst: np.ndarray
    src: np.ndarray  # the validation and test pairs (int64 node numbers), in file order
    dst: np.ndarray
    split: np.ndarray  # int8: 1 val, 2 test
    negatives: np.ndarray | None  # int64 [pairs, k], where the files give them
    tables: tuple[_Table, ...]  # where the pairs came from: pair i is row ``rows[i]`` of ``tables[table[i]]``
    table: np.ndarray
    rows: np.ndarray
    source: str  # edge_split_column, or val_edges (files per split)

    def place(self, i: int) -> str:
        """File and row of validation or test pair ``i``."""
        return self.tables[int(self.table[i])].name(int(self.rows[i]))


class _Negatives:
    """The negatives list column of the validation and test pairs, read chunk by chunk: every pair's list of one
    length, its ids node numbers (``IdColumn``)."""

    def __init__(self, column: str, keys: pa.Array | None, num_nodes: int):
        self.column, self.ids = column, IdColumn(keys, num_nodes)
        self.k: int | None = None
        self.first = ""  # the row whose length the others must have
        self.pairs = 0

    def add(self, chunk: Chunk, evaluated: np.ndarray) -> None:
        """The lists of the chunk's rows where ``evaluated`` (its validation and test pairs; a training edge's list,
        if any, is not read)."""
        values = decoded(chunk.batch.column(self.column))
        t = values.type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
            raise SylvieError(f"{row_name(chunk, 0)}: column '{self.column}' holds {t}; negatives_column is a list "
                              f"column of node ids, a list per validation and test pair")
        at = np.flatnonzero(evaluated)
        if not at.size:
            return
        lists = values.take(pa.array(at))
        if lists.null_count:
            r = int(at[np.flatnonzero(lists.is_null().to_numpy(zero_copy_only=False))[0]])
            raise SylvieError(f"{row_name(chunk, r)}: column '{self.column}': a validation or test pair without its "
                              f"negatives; give every validation and test pair its list")
        lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
        if self.k is None:
            self.k, self.first = int(lengths[0]), row_name(chunk, int(at[0]))
            if not self.k:
                raise SylvieError(f"{self.first}: column '{self.column}': an empty list of negatives; give every "
                                  f"validation and test pair the same number (at least one) of negative "
                                  f"destinations")
        bad = lengths != self.k
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SylvieError(f"{row_name(chunk, int(at[i]))}: column '{self.column}': {int(lengths[i])} negatives "
                              f"where {self.first} has {self.k}; every validation and test pair's list must be of "
                              f"one length")
        row_of = np.repeat(at, lengths)
        self.ids.add(pc.list_flatten(lists), lambda r: row_name(chunk, int(row_of[r])), f"column '{self.column}'")
        self.pairs += at.size

    def array(self) -> np.ndarray:
        return self.ids.array().reshape(self.pairs, self.k or 0)


def _listing(options, files: list[Path], kind: str, what: str) -> None:
    """A negatives column needs a file kind with list columns."""
    if options.negatives_column and kind not in ("parquet", "arrow"):
        raise SylvieError(f"{files[0]}: {what}: negatives_column '{options.negatives_column}': a {kind} file has no "
                          f"list columns; write the pairs as Parquet or Arrow, with the negatives a list column of "
                          f"node ids")


def _split_codes(values: pa.Array, name_row, column: str) -> np.ndarray:
    """int8 split codes (``SPLITS``' order) of one chunk of an edge split column; a value none of ``_CODES``, or
    none at all, is a SylvieError naming the row and the value."""
    values = decoded(values)
    t = values.type
    if values.null_count:
        r = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise SylvieError(f"{name_row(r)}: column '{column}': an edge without a split; give every edge one of "
                          f"{_ACCEPTED}")
    if is_text(t):
        known = pa.array(list(_CODES), type=pa.large_string())
        index = filled(pc.index_in(pc.utf8_trim_whitespace(pc.utf8_lower(values.cast(pa.large_string()))),
                                   value_set=known))
        code = np.array(list(_CODES.values()), np.int64)[np.maximum(index, 0)]
        code[index < 0] = -1
    elif pa.types.is_integer(t):
        code = values.to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        raise SylvieError(f"{name_row(0)}: column '{column}' holds {t}; an edge split column holds {_ACCEPTED}")
    bad = (code < 0) | (code > 2)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise SylvieError(f"{name_row(r)}: column '{column}': split {values[r].as_py()!r} is none of {_ACCEPTED} "
                          f"({int(bad.sum())} such rows in this chunk)")
    return code.astype(np.int8)


def read_edge_split(options, keys: pa.Array | None, num_nodes: int, edges: EdgeRows) -> EdgeSplitRows:
    """The edge split the files of ``options`` give: ``edges`` (the edge list, read by ``read_edge_rows``) split by
    its ``edge_split_column``, or the training edges beside ``val_edges`` and ``test_edges`` read here. ``keys``,
    ``num_nodes``: the nodes' ids (None: row numbers) and count, those the edge list added included."""
    negatives = _Negatives(options.negatives_column, keys, num_nodes) if options.negatives_column else None
    if options.edge_split_column:
        return _split_column(options, edges, negatives)
    if not (options.val_edges and options.test_edges):
        given_key = "val_edges" if options.val_edges else "test_edges"
        raise SylvieError(f"{given_key}: {getattr(options, given_key)}: val_edges and test_edges come together (the "
                          f"validation and the test pairs); give both")
    if not edges.src.shape[0]:
        raise SylvieError(f"{options.edges}: edges: no training edges; with val_edges and test_edges, edges holds the "
                          f"training edges (which pass the messages): give some")
    parts, tables = [], []
    for t, (split, key) in enumerate(((1, "val_edges"), (2, "test_edges"))):
        path = getattr(options, key)
        files, kind = files_of(path, key, EDGE_KINDS)
        _listing(options, files, kind, key)
        rows = read_edge_rows(dataclasses.replace(options, edges=path), keys, num_nodes, what=key, known_only=True)
        m = rows.src.shape[0]
        if not m:
            raise SylvieError(f"{path}: {key}: no pairs; link prediction evaluates on the {SPLITS[split]} pairs: "
                              f"give some")
        if negatives is not None:
            for chunk in chunks(files, kind, [options.negatives_column], key):
                negatives.add(chunk, np.ones(chunk.batch.num_rows, dtype=bool))
        tables.append(_Table(files, kind, key, None if kind == "npy" else options.edge_columns[0]))
        parts.append((rows.src, rows.dst, np.full(m, split, np.int8), np.full(m, t, np.int8), np.arange(m)))
    src, dst, split, table, at = (np.concatenate(c) for c in zip(*parts, strict=True))
    return EdgeSplitRows(train_src=edges.src, train_dst=edges.dst, src=src, dst=dst, split=split,
                         negatives=negatives.array() if negatives is not None else None, tables=tuple(tables),
                         table=table, rows=at, source="val_edges")


def _split_column(options, edges: EdgeRows, negatives: _Negatives | None) -> EdgeSplitRows:
    """The edge list split by its ``edge_split_column`` (read alongside its rows, in the same order)."""
    column = options.edge_split_column
    files, kind = files_of(options.edges, "edges", EDGE_KINDS)
    if kind == "npy":
        raise SylvieError(f"{files[0]}: edges: edge_split_column '{column}': an .npy edge list has no column but its "
                          f"two ends; give the edges as Parquet, Arrow or CSV with the column, or val_edges and "
                          f"test_edges")
    _listing(options, files, kind, "edges")
    wanted = [column] + ([options.negatives_column] if negatives is not None else [])
    types = {column: pa.large_string()} if kind in ("csv", "tsv") else None
    codes = []
    for chunk in chunks(files, kind, wanted, "edges", types):
        code = _split_codes(chunk.batch.column(column), lambda r, c=chunk: row_name(c, r), column)
        if negatives is not None:
            negatives.add(chunk, code != TRAIN)
        codes.append(code)
    code = np.concatenate(codes) if codes else np.zeros(0, np.int8)
    if code.shape[0] != edges.src.shape[0]:  # the files changed between the two reads
        raise SylvieError(f"{options.edges}: edges: {code.shape[0]} split values for {edges.src.shape[0]} edges; the "
                          f"files changed while they were read: rerun")
    for s, name in enumerate(SPLITS):
        if not (code == s).any():
            does = ("trains on them, and messages pass along them" if s == TRAIN else
                    f"evaluates on the {name} pairs")
            raise SylvieError(f"{options.edges}: column '{column}': no edge is in split '{name}'; link prediction "
                              f"{does}: give some edges the split {name}")
    train, evaluated = code == TRAIN, np.flatnonzero(code != TRAIN)
    return EdgeSplitRows(train_src=edges.src[train], train_dst=edges.dst[train], src=edges.src[evaluated],
                         dst=edges.dst[evaluated], split=code[evaluated],
                         negatives=negatives.array() if negatives is not None else None,
                         tables=(_Table(files, kind, "edges", column),),
                         table=np.zeros(evaluated.shape[0], np.int8), rows=evaluated, source="edge_split_column")


def _node(graph: Graph, i: int):
    """Node ``i`` as the user names it (its id where the nodes have ids)."""
    return graph.node_keys[i].as_py() if graph.node_keys is not None else i


def with_link_pairs(graph: Graph, rows: EdgeSplitRows, options, where: str) -> Graph:
    """``graph`` (``own_graph``'s, of the training edges ``rows`` gives) with its pairs (``graph.link``): the
    training pairs (an undirected graph's once each, src < dst; a directed graph's its edges), then the validation
    and test pairs in file order with their negatives (given, or drawn: ``draw_negatives``). A validation or test
    pair that is a training edge is refused, or kept (``leaked_edges: keep``) with a warning."""
    n = graph.num_nodes
    undirected = not options.directed
    leaked = in_sorted(rows.src * n + rows.dst, np.sort(graph.src * n + graph.dst))  # an undirected graph's: both ways
    if leaked.any():
        i = int(np.flatnonzero(leaked)[0])
        either = " (in either direction: the graph is undirected)" if undirected else ""
        if options.leaked_edges == "error":
            pair = f"({_node(graph, int(rows.src[i]))!r}, {_node(graph, int(rows.dst[i]))!r})"
            raise SylvieError(f"{rows.place(i)}: the {SPLITS[int(rows.split[i])]} pair {pair} is also a training "
                              f"edge{either}, which message passing would see ({int(leaked.sum())} such pairs); take "
                              f"it out of the training edges, or set leaked_edges: keep to keep such pairs")
        log.warning(f"{where}: {int(leaked.sum())} validation and test pairs are also training edges{either}, first "
                    f"{rows.place(i)} (leaked_edges: keep): message passing sees them, which flatters their scores")
    if undirected:
        train_src, train_dst = edges_of_keys(pair_keys(graph.src, graph.dst, n), n)
    else:
        train_src, train_dst = np.asarray(graph.src, np.int64), np.asarray(graph.dst, np.int64)
    if not train_src.shape[0]:
        raise SylvieError(f"{options.edges}: no training edge is left once self-loops are dropped; link prediction "
                          f"trains on them: give some")
    negatives = rows.negatives
    if negatives is None:
        positives = positive_keys(np.concatenate([train_src, rows.src]), np.concatenate([train_dst, rows.dst]), n,
                                  undirected)
        negatives = draw_negatives(rows.src, rows.dst, positives, n, options.eval_negatives, options.seed, where,
                                   name_pair=rows.place)
    m = train_src.shape[0]
    link = LinkPairs(src=np.concatenate([train_src, rows.src]), dst=np.concatenate([train_dst, rows.dst]),
                     split=np.concatenate([np.full(m, TRAIN, np.int8), rows.split]), negatives=negatives,
                     undirected=undirected)
    said = {"from": rows.source, "negatives": "given" if rows.negatives is not None else options.eval_negatives,
            "seed": int(options.seed), "leaked_kept": int(leaked.sum())}
    extra = {k: str(getattr(options, k)) for k in ("val_edges", "test_edges") if getattr(options, k)}
    return dataclasses.replace(graph, link=link, info={**graph.info, **extra, "edge_split": said})
