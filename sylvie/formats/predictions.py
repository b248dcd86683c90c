"""What ``sylvie evaluate --predictions FILE`` writes: every node's predicted class, in node order. This module is
its only writer and reader.

``.npy``: an int64 array. ``.parquet``, ``.csv``, ``.tsv`` (optionally gzip): columns ``node`` (the user's own id
where the graph has one) and ``prediction`` (the class name where labels were names). An existing file is replaced
only where it is one of these, never a user's file.
"""
from __future__ import annotations

import csv
import gzip
import io
import stat
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from sylvie.atomic import atomic_path
from sylvie.errors import SylvieError, one_line

TABLE_SUFFIXES = (".parquet", ".csv", ".tsv", ".csv.gz", ".tsv.gz")
COLUMNS = ("node", "prediction")
MARK = {b"written_by": b"sylvie evaluate --predictions"}  # a Parquet file's key-value metadata: one of ours


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in (".npy", *TABLE_SUFFIXES):
        if name.endswith(s):
            return s
    raise SylvieError(f"--predictions {path}: unknown kind; name it .npy, .parquet, .csv or .tsv (.gz allowed)")


def check_predictions_path(path: str | Path) -> None:
    """Before any work: a name whose kind is known."""
    _suffix(Path(path))


def write_predictions(path: str | Path, pred: np.ndarray, keys: pa.Array | None = None,
                      class_names: list[str] | None = None) -> None:
    """Every node's predicted class, in node order, atomically; a table names nodes by ``keys`` and classes by
    ``class_names`` where given."""
    path = Path(path)
    suffix = _suffix(path)
    pred = pred.astype(np.int64, copy=False)
    if suffix == ".npy":
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, pred)
        return
    node = keys if keys is not None else pa.array(np.arange(pred.shape[0], dtype=np.int64))
    prediction = pa.array(class_names).take(pa.array(pred)) if class_names else pa.array(pred)
    table = pa.table({"node": node, "prediction": prediction}).replace_schema_metadata(MARK)
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            pq.write_table(table, tmp)
        else:
            options = pacsv.WriteOptions(delimiter="\t" if suffix.startswith(".tsv") else ",")
            with pa.output_stream(str(tmp), compression="gzip" if suffix.endswith(".gz") else None) as sink:
                pacsv.write_csv(table, sink, write_options=options)


def foreign(path: str | Path) -> str | None:
    """Why the existing file ``path`` is not predictions this module wrote, which evaluate may replace; None where it
    is: by its first bytes only (an .npy header, a CSV or TSV header line, a Parquet footer)."""
    path = Path(path)
    suffix = _suffix(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
        if suffix == ".npy":
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                if version not in read:
                    return f".npy version {version}"
                shape, _, dtype = read[version](f)
            return None if dtype == np.int64 and len(shape) == 1 else f"an array of {dtype}, shape {shape}"
        if suffix == ".parquet":
            schema = pq.read_schema(path)
            if tuple(schema.names) != COLUMNS or not MARK.items() <= (schema.metadata or {}).items():
                return f"a Parquet table with columns {', '.join(schema.names)}, without sylvie's mark"
            return None
        with (gzip.open if suffix.endswith(".gz") else open)(path, "rb") as f:
            line = f.readline(1 << 16).decode("utf-8-sig")
        header = next(csv.reader(io.StringIO(line), delimiter="\t" if suffix.startswith(".tsv") else ","), [])
    except UnicodeDecodeError:
        return "not text"
    except (OSError, ValueError, EOFError, pa.ArrowException) as e:
        return f"not readable as one: {one_line(e)}"
    return None if tuple(header) == COLUMNS else f"a table whose header is {line.strip()[:60]!r}"


def read_predictions(path: str | Path) -> np.ndarray:
    """The predictions of a ``.npy`` file written by ``write_predictions``: one int64 class per node."""
    path = Path(path)
    try:
        pred = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SylvieError(f"{path}: not predictions written by `sylvie evaluate --predictions` ({e}); rerun it") \
            from e
    if pred.dtype != np.int64 or pred.ndim != 1:
        raise SylvieError(f"{path}: {pred.dtype} array of shape {pred.shape}, not the int64 class of every node "
                          f"that `sylvie evaluate --predictions` writes; rerun it")
    return pred


def read_prediction_table(path: str | Path) -> pa.Table:
    """The table of a ``.parquet``, ``.csv`` or ``.tsv`` file written by ``write_predictions``."""
    path = Path(path)
    suffix = _suffix(path)
    try:
        if suffix == ".parquet":
            table = pq.read_table(path)
        else:
            table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(
                delimiter="\t" if suffix.startswith(".tsv") else ","))
    except (pa.ArrowException, OSError) as e:
        raise SylvieError(f"{path}: not predictions written by `sylvie evaluate --predictions` ({one_line(e)}); "
                          f"rerun it") from None
    if tuple(table.column_names) != COLUMNS:
        raise SylvieError(f"{path}: columns {table.column_names}, not {list(COLUMNS)}: not predictions written by "
                          f"`sylvie evaluate --predictions`; rerun it")
    return table
