"""``sylvie export``: a canonical graph written out as the files a user's own graph comes in (an edge list and a
node table: Parquet, Arrow or CSV/TSV, optionally gzip), which ``source: files`` reads back; it prints that
``datasets:`` entry. For other tools, and to try the files source on a known graph. Written as every stage writes
(``output_dir``): all or nothing, replacing only an earlier export.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from sylvie.atomic import atomic_path, to_json
from sylvie.data.graph import load_graph, pair_keys
from sylvie.errors import SylvieError
from sylvie.formats.node_keys import read_node_keys
from sylvie.formats.splits import SPLITS
from sylvie.output_dir import EXPORT, check_replaceable

FORMATS = {"parquet": ".parquet", "arrow": ".arrow", "csv": ".csv", "tsv": ".tsv"}
FORMAT_VERSION = 1  # of export.json
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
    feature_prefix: str | None = None  # csv, tsv: a column a dimension (default 'f'); parquet, arrow: one 'feat'
    id_prefix: str | None = None  # ids as strings: the prefix, then the node's number
    class_names: tuple[str, ...] | None = None  # labels as these names
    shuffle_seed: int | None = None  # node table rows in a seeded random order
    pairs: bool = False  # one row an undirected edge (read back with directed: false), else every stored edge

    @property
    def text(self) -> bool:
        """CSV or TSV: a column a feature dimension, and an empty field read back as no value."""
        return self.file_format in ("csv", "tsv")

    @property
    def prefix(self) -> str:
        """The CSV feature columns' prefix (``--feature-prefix``, default 'f')."""
        return "f" if self.feature_prefix is None else self.feature_prefix


def export_graph(dataset_dir: str | Path, out_dir: str | Path, layout: ExportLayout) -> dict:
    """Write ``edges.<ext>``, ``nodes.<ext>`` and ``export.json`` of the canonical graph in ``dataset_dir`` into the
    folder ``out_dir``; returns the ``datasets:`` entry (a mapping) that reads them back. Every check is made before
    anything is written."""
    inputs = (dataset_dir,)
    check_replaceable(out_dir, EXPORT, inputs)  # not the dataset, nor around or in it; no one else's files
    graph = load_graph(dataset_dir)
    if graph.typed:
        raise SylvieError(f"{dataset_dir}: a typed graph; this version exports graphs of one node type and one "
                          f"relation only (typed files come with source: files for typed graphs): nothing was written")
    n = graph.num_nodes
    check_layout(layout, int(np.asarray(graph.features).shape[1]))
    ids = _ids(dataset_dir, graph, layout)
    class_names = _class_names(dataset_dir, graph, layout)
    order = np.random.default_rng(layout.shuffle_seed).permutation(n) if layout.shuffle_seed is not None else \
        np.arange(n)
    ext = FORMATS[layout.file_format] + (".gz" if layout.gzip else "")
    if layout.pairs:
        keys = pair_keys(np.asarray(graph.src), np.asarray(graph.dst), n)
        src, dst = keys // n, keys % n
    else:
        src, dst = np.asarray(graph.src), np.asarray(graph.dst)
    edge_batches = (pa.record_batch({layout.edge_columns[0]: ids.take(pa.array(src[s])),
                                     layout.edge_columns[1]: ids.take(pa.array(dst[s]))})
                    for s in _slices(src.shape[0]))
    out_dir = Path(out_dir)
    edges, nodes = f"edges{ext}", f"nodes{ext}"
    entry = {"source": "files", "edges": str(out_dir / edges), "edge_columns": list(layout.edge_columns),
             "directed": not layout.pairs, "node_table": str(out_dir / nodes), "node_key": layout.node_key,
             "feature_columns": [f"{layout.prefix}*"] if layout.text else ["feat"],
             "label_column": layout.label_column, "split_column": layout.split_column}
    with atomic_path(out_dir, directory=True, kind=EXPORT, inputs=inputs) as tmp:
        _write(tmp / edges, layout, edge_batches, pa.schema([(c, ids.type) for c in layout.edge_columns]))
        batches = (_node_batch(graph, ids, class_names, order[s], layout) for s in _slices(n))
        first = _node_batch(graph, ids, class_names, order[:0], layout)
        _write(tmp / nodes, layout, batches, first.schema)
        (tmp / EXPORT.marker).write_text(to_json({
            "format_version": FORMAT_VERSION, "dataset": graph.name, "fingerprint": graph.info["fingerprint"],
            "exported_from": str(dataset_dir), "datasets_entry": entry}, indent=2) + "\n")
    return entry


def check_layout(layout: ExportLayout, num_features: int) -> None:
    """Refuse what the files could not be read back as: a column in two roles, a flag the format ignores, a seed
    that is none. ``num_features``: the graph's feature width (a CSV's feature columns' names)."""
    if layout.shuffle_seed is not None and layout.shuffle_seed < 0:
        raise SylvieError(f"--shuffle {layout.shuffle_seed}: a seed is a whole number from 0; give e.g. --shuffle "
                          f"{-layout.shuffle_seed}")
    if not layout.text:
        for flag, given, why in (("--gzip", layout.gzip, "compresses itself"),
                                 ("--feature-prefix", layout.feature_prefix is not None,
                                  "writes the features as one list column 'feat'")):
            if given:
                raise SylvieError(f"{flag}: only CSV and TSV files use it ({layout.file_format} {why}); drop {flag} "
                                  f"or give --format csv")
    if any(c in layout.prefix for c in "*?["):
        raise SylvieError(f"--feature-prefix {layout.prefix!r}: the printed config selects the feature columns by the "
                          f"glob '{layout.prefix}*', in which *, ? and [ are wildcards; give a prefix without them")
    names = {"--node-key": layout.node_key, "--label-column": layout.label_column,
             "--split-column": layout.split_column}
    edge = {"--edge-columns SRC": layout.edge_columns[0], "--edge-columns DST": layout.edge_columns[1]}
    for flag, name in {**names, **edge}.items():
        if not name:
            raise SylvieError(f"{flag}: an empty column name; give the column a name")
    if layout.edge_columns[0] == layout.edge_columns[1]:
        raise SylvieError(f"--edge-columns: the source and the destination are both '{layout.edge_columns[0]}', one "
                          f"column in two roles; give two names, e.g. --edge-columns src dst")
    flags = list(names)
    for i, a in enumerate(flags):
        for b in flags[i + 1:]:
            if names[a] == names[b]:
                raise SylvieError(f"{a} and {b} are both '{names[a]}': one column of the node table in two roles "
                                  f"(the other's values would be lost); give each its own name")
    for flag, name in names.items():
        rest = name[len(layout.prefix):] if name.startswith(layout.prefix) else ""
        if layout.text and rest.isdigit() and str(int(rest)) == rest and int(rest) < num_features:
            raise SylvieError(f"{flag} '{name}' is also the name of feature column {int(rest)} (--feature-prefix "
                              f"'{layout.prefix}', then the dimension): one column in two roles; give another "
                              f"{flag} or --feature-prefix")
        if not layout.text and name == "feat":
            raise SylvieError(f"{flag} 'feat' is also the name of the features' column ({layout.file_format} writes "
                              f"them as one list column 'feat'): one column in two roles; give another {flag}")


def _check_class_names(names: tuple[str, ...], num_classes: int, layout: ExportLayout, given: str) -> None:
    """Names that read back as the same classes: one a class, each once, not all numbers, none empty in a CSV.
    ``given``: where the names come from, and what to do instead, for the message."""
    if len(names) != num_classes:
        raise SylvieError(f"{given}: {len(names)} names for {num_classes} classes; give one name a class, in class "
                          f"order")
    seen = {}
    for i, name in enumerate(names):
        if name in seen:
            raise SylvieError(f"{given}: '{name}' names both class {seen[name]} and class {i}, which would merge the "
                              f"two classes; give each class its own name")
        seen[name] = i
        if layout.text and name == "":
            raise SylvieError(f"{given}: class {i}'s name is empty, and an empty field of a {layout.file_format} "
                              f"file is read back as no label; give it a name")
    try:
        pa.array(list(names), type=pa.large_string()).cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return
    raise SylvieError(f"{given}: every name is a number ({', '.join(names[:3])}, ...), and `source: files` reads "
                      f"labels that are all numbers back as class numbers, not names; give names that are not numbers")


def _ids(dataset_dir, graph, layout: ExportLayout) -> pa.Array:
    """Every node's id in the files: ``--id-prefix`` then its number where given, else the dataset's own ids
    (``node_keys.arrow``) where it has them, else its number."""
    n = graph.num_nodes
    if layout.id_prefix is not None:
        width = len(str(max(n - 1, 0)))
        return pa.array([f"{layout.id_prefix}{i:0{width}d}" for i in range(n)], type=pa.large_string())
    own = read_node_keys(dataset_dir, n, graph.info.get("node_keys_sha256"))
    if own is None:
        return pa.array(np.arange(n, dtype=np.int64))
    if layout.text and pa.types.is_large_string(own.type) and pc.any(pc.equal(own, "")).as_py():
        raise SylvieError(f"{Path(dataset_dir) / 'node_keys.arrow'}: a node's own id is empty, and an empty field of "
                          f"a {layout.file_format} file is read back as no id; give --id-prefix (ids made of the "
                          f"nodes' numbers) or export --format parquet")
    return own


def _class_names(dataset_dir, graph, layout: ExportLayout) -> tuple[str, ...] | None:
    """The labels' names in the files: ``--class-names`` where given, else the dataset's own (meta.json's
    ``class_names``) where it has them; None: the labels as numbers."""
    if layout.class_names is not None:
        _check_class_names(tuple(layout.class_names), graph.num_classes, layout, "--class-names")
        return tuple(layout.class_names)
    own = graph.info.get("class_names")
    if own is None:
        return None
    _check_class_names(tuple(own), graph.num_classes, layout,
                       f"{Path(dataset_dir) / 'meta.json'} class_names (give --class-names instead)")
    return tuple(own)


def _slices(total: int):
    return [slice(s, min(s + _ROWS, total)) for s in range(0, max(total, 1), _ROWS)]


def _node_batch(graph, ids: pa.Array, class_names: tuple[str, ...] | None, rows: np.ndarray,
                layout: ExportLayout) -> pa.RecordBatch:
    labels = np.asarray(graph.labels)[rows]
    unlabelled = labels < 0
    if class_names is not None:
        names = pa.array(list(class_names), type=pa.large_string())
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
    if layout.text:
        columns.update({f"{layout.prefix}{j}": features[:, j] for j in range(features.shape[1])})
    else:
        columns["feat"] = pa.FixedSizeListArray.from_arrays(pa.array(features.reshape(-1)), features.shape[1])
    return pa.record_batch(columns)


def _write(path: Path, layout: ExportLayout, batches, schema: pa.Schema) -> None:
    """The batches into ``path`` (in the export's temporary folder)."""
    if layout.file_format == "parquet":
        with pq.ParquetWriter(path, schema) as w:
            for b in batches:
                w.write_batch(b)
    elif layout.file_format == "arrow":
        with ipc.new_file(path, schema) as w:
            for b in batches:
                w.write_batch(b)
    else:
        options = pacsv.WriteOptions(delimiter="," if layout.file_format == "csv" else "\t")
        with pa.output_stream(str(path), compression="gzip" if layout.gzip else None) as sink, \
                pacsv.CSVWriter(sink, schema, write_options=options) as w:
            for b in batches:
                w.write_batch(b)
