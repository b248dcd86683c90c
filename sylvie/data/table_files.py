"""Tables given as files the way data engineers hold them, read in chunks: Parquet, Arrow IPC/Feather, CSV or TSV
(optionally gzip), and ``.npy``. A path is a file or a folder of part files read in name order; no more than one
chunk is held at a time. Every error names the file and, where it applies, the column and row.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from sylvie.data.column_types import decoded, is_utf8, read_as
from sylvie.data.csv_errors import csv_problem
from sylvie.data.input_files import DELIMITERS, check_content, check_entry, file_kind, to_utf8
from sylvie.errors import SylvieError, one_line

_SEPARATOR = {"\t": "tabs", ";": "semicolons", "|": "bars", ",": "commas"}
_CHUNK_BYTES = 16 << 20  # CSV text, or Parquet and Arrow data (uncompressed), per chunk
_BATCH_ROWS = 1 << 20  # rows of an .npy array per chunk


@dataclass(frozen=True)
class Chunk:
    """Rows ``first``.. of ``path`` (0-based, not counting a CSV header)."""

    path: Path
    first: int
    batch: pa.RecordBatch


def _plain(batch: pa.RecordBatch, path: Path, first: int, what: str) -> pa.RecordBatch:
    """``batch`` (rows ``first``.. of ``path``) with each column of its type as read (``_read_as``); bytes that
    are not UTF-8 text are a SylvieError naming the column and the row."""
    fields = batch.schema
    if all(read_as(f.type) == f.type for f in fields):
        return batch
    columns = []
    for f, values in zip(fields, batch.columns, strict=True):
        t = read_as(f.type)
        try:
            columns.append(values.cast(t) if t != f.type else values)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = decoded(values)
            r = next(r for r in range(len(values)) if not is_utf8(values[r].as_py()))
            raise SylvieError(f"{row_name(path, first + r)}: {what + ': ' if what else ''}column '{f.name}' holds "
                              f"bytes, and {values[r].as_py()!r} is not UTF-8 text; write the column as text "
                              f"(UTF-8): ids, labels and splits are integers or text") from None
    return pa.RecordBatch.from_arrays(columns, names=fields.names)


def row_name(chunk_or_path, row: int) -> str:
    """``file, line L`` (CSV and TSV: the header is line 1) or ``file, row R`` (0-based) of row ``row`` of a file."""
    path = chunk_or_path.path if isinstance(chunk_or_path, Chunk) else Path(chunk_or_path)
    if isinstance(chunk_or_path, Chunk):
        row += chunk_or_path.first
    if file_kind(path, "") in DELIMITERS:
        return f"{path}, line {row + 2}"
    return f"{path}, row {row}"


def _csv_header(path: Path, kind: str) -> list[str]:
    with pacsv.open_csv(pa.input_stream(str(path), compression="detect"),
                        read_options=pacsv.ReadOptions(block_size=1 << 16),
                        parse_options=pacsv.ParseOptions(delimiter=DELIMITERS[kind]),
                        convert_options=pacsv.ConvertOptions(column_types={})) as reader:
        return reader.schema.names


def column_names(path: Path, kind: str, what: str = "") -> list[str]:
    """The columns of one file, in its order (a CSV's header); ``what``: the table, as the config names it."""
    try:
        if kind == "parquet":
            return pq.ParquetFile(path).schema_arrow.names
        if kind == "arrow":
            return _arrow_schema(path).names
        return _csv_header(path, kind)
    except (pa.ArrowException, OSError, ValueError) as e:
        if kind in DELIMITERS and isinstance(e, pa.ArrowException):
            csv_problem(path, kind, e, what)
        said = what + ": " if what else ""
        if isinstance(e, UnicodeDecodeError):  # the header's names, decoded by pyarrow's Python side
            raise SylvieError(f"{path}, line 1: {said}the header is not UTF-8 text (byte 0x{e.object[e.start]:02x}): "
                              f"the file is in another encoding; save it as UTF-8 (e.g. from Latin-1: "
                              f"{to_utf8('LATIN1', path.suffix.lower() == '.gz')})") from None
        raise SylvieError(f"{path}: {said}not a readable {kind} file ({one_line(e)}); it is damaged, cut short or of "
                          f"another kind: write it again") from None


def _arrow_reader(path: Path):
    """An Arrow IPC file (random access) or stream, memory-mapped: its batches are read in place, never copied."""
    try:
        return ipc.open_file(pa.memory_map(str(path)))
    except pa.ArrowInvalid:  # the streaming format
        return ipc.open_stream(pa.memory_map(str(path)))


def _arrow_schema(path: Path) -> pa.Schema:
    return _arrow_reader(path).schema


def match_columns(path: Path, names: list[str], wanted: list[str], what: str) -> list[str]:
    """The columns of ``names`` that ``wanted`` names, globs (``f*``) expanded in the file's order; a missing one,
    or one the file has twice, is a SylvieError naming the file and the columns it has."""
    out = []
    for w in wanted:
        hits = [n for n in names if fnmatch.fnmatchcase(n, w)] if is_glob(w) else [w] if w in names else []
        if not hits:
            other = next((d for d in "\t;|," if len(names) == 1 and d in names[0]), None)
            if other:  # a TSV named .csv, a CSV named .tsv, or another separator
                raise SylvieError(f"{path}: {what}: the header is one column, {names[0]!r}, separated by "
                                  f"{_SEPARATOR[other]}: CSV (.csv) is comma-separated and TSV (.tsv) tab-separated; "
                                  f"name the file by its separator, or write it with commas")
            raise SylvieError(f"{path}: {what}: no column '{w}' (the file has {_shown(names)}); name the column in "
                              f"the config")
        twice = [n for n in dict.fromkeys(hits) if names.count(n) > 1]
        if twice:
            raise SylvieError(f"{path}: {what}: the file has {names.count(twice[0])} columns named '{twice[0]}', "
                              f"so which one is meant is unknown; rename them apart")
        out += hits
    return out


def _shown(names: list[str]) -> str:
    """A file's columns, as an error line shows them (the first 12)."""
    return ", ".join(names[:12]) + (f", ... ({len(names)} columns)" if len(names) > 12 else "")


def headers(files: list[Path], kind: str, what: str = "") -> list[list[str]]:
    """The columns of each file (``column_names``), read once for a stage's checks and reads of the table."""
    return [column_names(f, kind, what) for f in files]


def is_glob(name: str) -> bool:
    """Whether a configured column name is a glob (``f*``) rather than a name."""
    return any(c in name for c in "*?[")


def table_columns(files: list[Path], kind: str, wanted: list[str], what: str,
                  names_of: list[list[str]] | None = None) -> list[str]:
    """The columns ``wanted`` names (globs expanded, ``match_columns``), in the first file's order: the same in
    every file of a folder, else a SylvieError naming the file and the column it has or lacks that the first file
    does not: the files of a folder are one table. ``names_of``: each file's columns (``headers``), if read."""
    names_of = names_of or headers(files, kind, what)
    found = match_columns(files[0], names_of[0], wanted, what)
    for f, names in zip(files[1:], names_of[1:], strict=True):
        lacks = [c for c in found if c not in names]
        if lacks:
            raise _unlike_first(f, files[0], lacks[0], what, names, names_of[0], kind)
        extra = [c for c in match_columns(f, names, wanted, what) if c not in found]
        if extra:
            glob = next(w for w in wanted if fnmatch.fnmatchcase(extra[0], w))
            raise SylvieError(f"{f}: {what}: column '{extra[0]}' (matched by '{glob}') is not in {files[0].name}; "
                              f"the files of a folder are one table: give every file the same columns")
    return found


def _unlike_first(path: Path, first: Path, column: str, what: str, names: list[str], first_names: list[str],
                  kind: str) -> SylvieError:
    """The error for a file of a folder that lacks a column of the first file's (``first_names``), showing the
    columns it has (``names``): a CSV part whose first line shares no name with the first file's header has no
    header (``split -l`` leaves it in the first part only)."""
    said = f"{path}: {what}: no column '{column}', which {first.name} has"
    if kind in DELIMITERS and not set(names) & set(first_names):
        header = DELIMITERS[kind].join(first_names)
        return SylvieError(f"{said}, and its first line reads {DELIMITERS[kind].join(names)!r}, not the header: "
                           f"every part file needs the header line ({header!r}; split -l leaves it in the first "
                           f"part only): add it at the top of each")
    return SylvieError(f"{said} (the file has {_shown(names)}); the files of a folder are one table: give every "
                       f"file the same columns")


def num_rows(files: list[Path], kind: str) -> int | None:
    """Rows of the table, from the files' metadata (Parquet, an Arrow IPC file); None for CSV and Arrow streams
    (known only by reading)."""
    total = 0
    for f in files:
        try:
            if kind == "parquet":
                total += pq.ParquetFile(f).metadata.num_rows
            elif kind == "arrow":
                reader = _arrow_reader(f)
                if not isinstance(reader, ipc.RecordBatchFileReader):
                    return None
                total += sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
            else:
                return None
        except (pa.ArrowException, OSError, ValueError) as e:
            raise SylvieError(f"{f}: not a readable {kind} file ({one_line(e)})") from None
    return total


def chunks(files: list[Path], kind: str, columns: list[str], what: str,
           column_types: dict[str, pa.DataType] | None = None,
           names_of: list[list[str]] | None = None) -> Iterator[Chunk]:
    """The table's ``columns`` chunk by chunk, every file checked to have them (its columns ``names_of``' where
    the caller has read them, ``headers``). CSV: only an empty field is null (a value ``NA`` is the text NA); a
    column's type is ``column_types``' (the caller's: text for ids, labels and splits, float64 for features), else
    inferred from the file's first 16 MB. Text and bytes of any Arrow type are read as large_string
    (``_read_as``)."""
    for i, path in enumerate(files):
        names = names_of[i] if names_of else column_names(path, kind, what)
        if i == 0:
            first_names = names
        lacks = [c for c in columns if c not in names]
        if lacks and i:
            raise _unlike_first(path, files[0], lacks[0], what, names, first_names, kind)
        match_columns(path, names, columns, what)
        first = 0
        try:
            for batch in _batches(path, kind, columns, column_types or {}):
                yield Chunk(path, first, _plain(batch, path, first, what))
                first += batch.num_rows
                del batch
                # what the chunk took, back to the system at once: Arrow's pool (mimalloc or jemalloc) keeps it for
                # reuse otherwise: the conversion's peak was lowest with these releases
                # (benchmarks/records/2026-11-28_file-conversion_2core-vm.md)
                pa.default_memory_pool().release_unused()
        except (pa.ArrowException, OSError) as e:  # pyarrow's IO errors (a Parquet page unreadable) are OSError
            if kind in DELIMITERS and isinstance(e, pa.ArrowException):
                csv_problem(path, kind, e, what)
            if "decrypt" in str(e).lower():  # Parquet's modular encryption, the footer in plain text
                raise SylvieError(f"{path}: {what}: an encrypted Parquet file (its columns encrypted), which is not "
                                  f"read: decrypt it first (read it with its keys and write it again without "
                                  f"encryption)") from None
            where = f"{row_name(path, first)} or after"
            if "conversion error" in str(e).lower():  # CSV: a value that is not of its column's type
                raise SylvieError(f"{where}: {what}: {one_line(e)}; every value of a column must be of one kind "
                                  f"(numbers for features)") from None
            raise SylvieError(f"{where}: {what}: the file is damaged or not {kind} ({one_line(e)})") from None


def _rows_per_chunk(data_bytes: int, rows: int) -> int:
    """Rows of about ``_CHUNK_BYTES`` of data, given a table's size and rows: a node table of wide features has far
    fewer rows a chunk than an edge list."""
    return int(min(max(1024, _CHUNK_BYTES * max(rows, 1) // max(data_bytes, 1)), 1 << 22))


def _batches(path: Path, kind: str, columns: list[str], column_types: dict) -> Iterator[pa.RecordBatch]:
    if kind == "parquet":
        f = pq.ParquetFile(path)
        meta = f.metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        share = len(columns) / max(len(f.schema_arrow.names), 1)  # of the columns read
        yield from f.iter_batches(batch_size=_rows_per_chunk(int(size * share), meta.num_rows), columns=columns)
    elif kind == "arrow":  # mapped: the kept columns of a chunk pin file pages, not heap
        reader = _arrow_reader(path)
        batches = (reader.get_batch(i) for i in range(reader.num_record_batches)) \
            if isinstance(reader, ipc.RecordBatchFileReader) else reader
        for batch in batches:
            batch = batch.select(columns)
            step = _rows_per_chunk(max(batch.nbytes, 1), batch.num_rows)
            for start in range(0, batch.num_rows, step):
                yield batch.slice(start, step)
    else:
        reader = pacsv.open_csv(
            pa.input_stream(str(path), compression="detect"),
            read_options=pacsv.ReadOptions(block_size=_CHUNK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=DELIMITERS[kind]),
            convert_options=pacsv.ConvertOptions(include_columns=columns, strings_can_be_null=True,
                                                 null_values=[""], column_types={k: v for k, v in column_types.items()
                                                                                 if k in columns}))
        with reader:
            yield from reader


def read_npy(path: Path, what: str) -> np.ndarray:
    """An ``.npy`` array, memory-mapped (read in place, chunk by chunk by whoever indexes it)."""
    check_entry(Path(path), what)
    check_content(Path(path), "npy", what)
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as e:
        if "object" in str(e) or "pickle" in str(e):
            raise SylvieError(f"{path}: {what}: an array of Python objects, which is not read; save an array of "
                              f"numbers (numpy.save of an int64 or float32 array)") from None
        raise SylvieError(f"{path}: {what}: not a readable .npy array ({one_line(e)})") from None
    except (OSError, EOFError) as e:
        raise SylvieError(f"{path}: {what}: not a readable .npy array, damaged or cut short ({one_line(e)}); write "
                          f"it again") from None


def ranges(total: int, step: int = _BATCH_ROWS) -> Iterator[slice]:
    """Slices of ``step`` rows covering ``range(total)``."""
    for start in range(0, total, step):
        yield slice(start, min(start + step, total))
