"""``sylvie export``: a canonical graph written out as the files a user's own graph comes in (an edge list and a node
table: Parquet, Arrow or CSV/TSV, optionally gzip), which ``source: files`` reads back. For other tools, and to try the
files source on a known graph: its ids may be strings, its labels class names, its rows shuffled. Prints the
``datasets:`` entry that reads the files back."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from sylvie.atomic import atomic_path
from sylvie.data.graph import load_graph, pair_keys
from sylvie.errors import SylvieError
from sylvie.formats.splits import SPLITS

FORMATS = {"parquet": ".parquet", "arrow": ".arrow", "csv": ".csv", "tsv": ".tsv"}
_ROWS = 1 << 18  # rows a written batch


@dataclass(frozen=True)
class ExportLayout:
    """How the files name things (the columns ``source: files`` is then told of)."""

    file_format: str = "parquet"
    gzip: bool = False  # csv, tsv only
    edge_columns: tuple[str, str] = ("src", "dst")
    node_key: str = "node"
    label_column: str = "label"
    split_column: str = "split"
    feature_prefix: str = "f"  # csv, tsv: a column a dimension; parquet, arrow: one list column named 'feat'
    id_prefix: str | None = None  # ids as strings: the prefix, then the node's number
    class_names: tuple[str, ...] | None = None  # labels as these names
    shuffle_seed: int | None = None  # node table rows in a seeded random order
    pairs: bool = False  # one row an undirected edge (read back with directed: false), else every stored edge


def export_graph(dataset_dir: str | Path, out_dir: str | Path, layout: ExportLayout) -> dict:
    """Write ``edges.<ext>`` and ``nodes.<ext>`` of the canonical graph in ``dataset_dir`` into ``out_dir``; returns
    the ``datasets:`` entry (a mapping) that reads them back."""
    graph = load_graph(dataset_dir)
    if graph.typed:
        raise SylvieError(f"{dataset_dir}: a typed graph; this version exports graphs of one node type and one "
                          f"relation only (typed files come with source: files for typed graphs): nothing was written")
    n = graph.num_nodes
    if layout.class_names is not None and len(layout.class_names) != graph.num_classes:
        raise SylvieError(f"--class-names: {len(layout.class_names)} names for {graph.num_classes} classes")
    if layout.gzip and layout.file_format not in ("csv", "tsv"):
        raise SylvieError("--gzip: only CSV and TSV files are compressed here (Parquet compresses itself)")
    ids = _ids(n, layout.id_prefix)
    order = np.random.default_rng(layout.shuffle_seed).permutation(n) if layout.shuffle_seed is not None else \
        np.arange(n)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ext = FORMATS[layout.file_format] + (".gz" if layout.gzip else "")
    if layout.pairs:
        keys = pair_keys(np.asarray(graph.src), np.asarray(graph.dst), n)
        src, dst = keys // n, keys % n
    else:
        src, dst = np.asarray(graph.src), np.asarray(graph.dst)
    edge_batches = (pa.record_batch({layout.edge_columns[0]: ids.take(pa.array(src[s])),
                                     layout.edge_columns[1]: ids.take(pa.array(dst[s]))})
                    for s in _slices(src.shape[0]))
    edges_path = out_dir / f"edges{ext}"
    _write(edges_path, layout, edge_batches, pa.schema([(c, ids.type) for c in layout.edge_columns]))
    nodes_path = out_dir / f"nodes{ext}"
    batches = (_node_batch(graph, ids, order[s], layout) for s in _slices(n))
    first = _node_batch(graph, ids, order[:0], layout)
    _write(nodes_path, layout, batches, first.schema)
    return {"source": "files", "edges": str(edges_path), "edge_columns": list(layout.edge_columns),
            "directed": not layout.pairs, "node_table": str(nodes_path), "node_key": layout.node_key,
            "feature_columns": [f"{layout.feature_prefix}*"] if layout.file_format in ("csv", "tsv") else ["feat"],
            "label_column": layout.label_column, "split_column": layout.split_column}


def _ids(n: int, prefix: str | None) -> pa.Array:
    if prefix is None:
        return pa.array(np.arange(n, dtype=np.int64))
    width = len(str(max(n - 1, 0)))
    return pa.array([f"{prefix}{i:0{width}d}" for i in range(n)], type=pa.large_string())


def _slices(total: int):
    return [slice(s, min(s + _ROWS, total)) for s in range(0, max(total, 1), _ROWS)]


def _node_batch(graph, ids: pa.Array, rows: np.ndarray, layout: ExportLayout) -> pa.RecordBatch:
    labels = np.asarray(graph.labels)[rows]
    unlabelled = labels < 0
    if layout.class_names is not None:
        names = pa.array(list(layout.class_names), type=pa.large_string())
        label = names.take(pa.array(np.where(unlabelled, 0, labels), mask=unlabelled))
    else:
        label = pa.array(labels, mask=unlabelled)
    split = np.full(rows.shape[0], -1, np.int64)
    for i, s in enumerate(SPLITS):
        split[np.asarray(graph.masks[s])[rows]] = i
    split_names = pa.array(["train", "val", "test"]).take(pa.array(np.maximum(split, 0), mask=split < 0))
    features = np.ascontiguousarray(np.asarray(graph.features)[rows])
    columns = {layout.node_key: ids.take(pa.array(rows)), layout.label_column: label,
               layout.split_column: split_names}
    if layout.file_format in ("csv", "tsv"):
        columns.update({f"{layout.feature_prefix}{j}": features[:, j] for j in range(features.shape[1])})
    else:
        columns["feat"] = pa.FixedSizeListArray.from_arrays(pa.array(features.reshape(-1)), features.shape[1])
    return pa.record_batch(columns)


def _write(path: Path, layout: ExportLayout, batches, schema: pa.Schema) -> None:
    """The batches into ``path``, atomically (a temporary name, then renamed)."""
    with atomic_path(path) as tmp:
        if layout.file_format == "parquet":
            with pq.ParquetWriter(tmp, schema) as w:
                for b in batches:
                    w.write_batch(b)
        elif layout.file_format == "arrow":
            with ipc.new_file(tmp, schema) as w:
                for b in batches:
                    w.write_batch(b)
        else:
            options = pacsv.WriteOptions(delimiter="," if layout.file_format == "csv" else "\t")
            with pa.output_stream(str(tmp), compression="gzip" if layout.gzip else None) as sink, \
                    pacsv.CSVWriter(sink, schema, write_options=options) as w:
                for b in batches:
                    w.write_batch(b)
