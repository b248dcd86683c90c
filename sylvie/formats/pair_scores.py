"""What ``sylvie evaluate --score-pairs FILE`` writes (to ``--out``): each of the user's pairs with the trained link
model's score. This module is its only writer and reader.

``.parquet``, ``.csv`` or ``.tsv`` (optionally gzip), by the name: columns ``src`` and ``dst`` (the pair's ends as the
user named them), ``score`` (the decoder's logit) and ``probability`` (its sigmoid: the model's probability that the
edge exists), a row per given pair, in their order. An existing file is replaced only where it is one of these.
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

SUFFIXES = (".parquet", ".csv", ".tsv", ".csv.gz", ".tsv.gz")
COLUMNS = ("src", "dst", "score", "probability")
MARK = {b"written_by": b"sylvie evaluate --score-pairs"}  # a Parquet file's key-value metadata: one of ours


def suffix_of(path: str | Path) -> str:
    """The kind of a scores file by its name; a SylvieError for another."""
    name = Path(path).name.lower()
    for s in SUFFIXES:
        if name.endswith(s):
            return s
    raise SylvieError(f"--out {path}: with --score-pairs, --out names the scores file: .parquet, .csv or .tsv "
                      f"(.gz allowed)")


def write_pair_scores(path: str | Path, src: pa.Array, dst: pa.Array, score: np.ndarray) -> None:
    """The pairs (``src``, ``dst``: the user's ids) and their scores (logits), atomically."""
    path = Path(path)
    suffix = suffix_of(path)
    score = np.asarray(score, np.float32)
    probability = (1.0 / (1.0 + np.exp(-score.astype(np.float64)))).astype(np.float32)
    table = pa.table({"src": src, "dst": dst, "score": score, "probability": probability}).replace_schema_metadata(
        MARK)
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            pq.write_table(table, tmp)
        else:
            options = pacsv.WriteOptions(delimiter="\t" if suffix.startswith(".tsv") else ",")
            with pa.output_stream(str(tmp), compression="gzip" if suffix.endswith(".gz") else None) as sink:
                pacsv.write_csv(table, sink, write_options=options)


def foreign(path: str | Path) -> str | None:
    """Why the existing file ``path`` is not scores this module wrote (which evaluate may replace); None where it is."""
    path = Path(path)
    suffix = suffix_of(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
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


def read_pair_scores(path: str | Path) -> pa.Table:
    """The table of a scores file written by ``write_pair_scores``."""
    path = Path(path)
    suffix = suffix_of(path)
    try:
        if suffix == ".parquet":
            table = pq.read_table(path)
        else:
            table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(
                delimiter="\t" if suffix.startswith(".tsv") else ","))
    except (pa.ArrowException, OSError) as e:
        raise SylvieError(f"{path}: not scores written by `sylvie evaluate --score-pairs` ({one_line(e)}); rerun "
                          f"it") from None
    if tuple(table.column_names) != COLUMNS:
        raise SylvieError(f"{path}: columns {table.column_names}, not {list(COLUMNS)}: not scores written by "
                          f"`sylvie evaluate --score-pairs`; rerun it")
    return table
