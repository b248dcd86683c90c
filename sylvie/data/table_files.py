"""Tables given as files the way data engineers hold them, read in chunks: Parquet, Arrow IPC/Feather, CSV or TSV
(optionally gzip), and ``.npy`` arrays. A path is one file or a folder of files of one kind (Spark's part files), read
in name order as one table. Nothing here holds more than one chunk of a file at a time; callers keep what they need
of each chunk (a column, converted) and let the rest go.

Every error names the file and, where it applies, the column and the first bad row (:func:`row_name`).
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from sylvie.errors import SylvieError, one_line

KINDS = {".parquet": "parquet", ".pq": "parquet", ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow",
         ".csv": "csv", ".tsv": "tsv", ".npy": "npy"}
_DELIMITER = {"csv": ",", "tsv": "\t"}
_CHUNK_BYTES = 16 << 20  # CSV text, or Parquet and Arrow data (uncompressed), per chunk
_BATCH_ROWS = 1 << 20  # rows of an .npy array per chunk


@dataclass(frozen=True)
class Chunk:
    """Rows ``first``.. of ``path`` (0-based, not counting a CSV header)."""

    path: Path
    first: int
    batch: pa.RecordBatch


def file_kind(path: Path, what: str) -> str:
    """The kind of ``path`` by its name (a trailing ``.gz`` allowed for CSV and TSV), else a SylvieError."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes[-1:] == [".gz"] and suffixes[-2:-1] in ([".csv"], [".tsv"]):
        return KINDS[suffixes[-2]]
    kind = KINDS.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise SylvieError(f"{path}: {what}: unknown file kind '{''.join(path.suffixes) or '(no extension)'}'; give "
                          f"Parquet (.parquet, .pq), Arrow/Feather (.arrow, .feather, .ipc), CSV or TSV (.csv, .tsv, "
                          f"either optionally .gz) or .npy")
    return kind


def listed(folder: Path) -> list[Path]:
    """What a folder given as a table holds, in name order: hidden files and Spark's ``_SUCCESS`` markers skipped."""
    return sorted(p for p in Path(folder).iterdir() if not p.name.startswith((".", "_")))


def files_of(path: str | Path, what: str, kinds: tuple[str, ...]) -> tuple[list[Path], str]:
    """The files of ``path`` (itself, or a folder's files: ``listed``) and their one kind, which must be among
    ``kinds``."""
    path = Path(path)
    if path.is_dir():
        entries = listed(path)
        folders = [p.name for p in entries if p.is_dir()]
        if folders:
            raise SylvieError(f"{path}: {what}: the folder holds folders ({', '.join(sorted(folders)[:3])}); give a "
                              f"folder of files of one kind (a partitioned layout's folders are not read)")
        files = [p for p in entries if p.is_file()]
        if not files:
            raise SylvieError(f"{path}: {what}: the folder holds no files")
    elif path.is_file():
        files = [path]
    else:
        raise SylvieError(f"{path}: {what}: no such file or folder; check the path (relative paths are from the "
                          f"directory the command runs in)")
    found = {file_kind(f, what) for f in files}
    if len(found) > 1:
        raise SylvieError(f"{path}: {what}: the folder mixes file kinds ({', '.join(sorted(found))}); keep one kind")
    kind = found.pop()
    if kind not in kinds:
        raise SylvieError(f"{files[0]}: {what}: a {kind} file cannot hold this table; give "
                          f"{' or '.join(sorted(set(kinds)))}")
    return files, kind


def is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def decoded(values):
    """A column (array or chunked) with a dictionary type (a pandas category column) as its values' type."""
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def filled(index) -> np.ndarray:
    """An Arrow integer array (or chunked array) with nulls as an int64 array with -1 for them."""
    return pc.fill_null(index, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def row_name(chunk_or_path, row: int) -> str:
    """``file, line L`` (CSV and TSV: the header is line 1) or ``file, row R`` (0-based) of row ``row`` of a file."""
    path = chunk_or_path.path if isinstance(chunk_or_path, Chunk) else Path(chunk_or_path)
    if isinstance(chunk_or_path, Chunk):
        row += chunk_or_path.first
    if file_kind(path, "") in _DELIMITER:
        return f"{path}, line {row + 2}"
    return f"{path}, row {row}"


def _csv_header(path: Path, kind: str) -> list[str]:
    with pacsv.open_csv(pa.input_stream(str(path), compression="detect"),
                        read_options=pacsv.ReadOptions(block_size=1 << 16),
                        parse_options=pacsv.ParseOptions(delimiter=_DELIMITER[kind]),
                        convert_options=pacsv.ConvertOptions(column_types={})) as reader:
        return reader.schema.names


def column_names(path: Path, kind: str) -> list[str]:
    """The columns of one file, in its order (a CSV's header)."""
    try:
        if kind == "parquet":
            return pq.ParquetFile(path).schema_arrow.names
        if kind == "arrow":
            return _arrow_schema(path).names
        return _csv_header(path, kind)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise SylvieError(f"{path}: not a readable {kind} file ({one_line(e)})") from None


def _arrow_reader(path: Path):
    """An Arrow IPC file (random access) or stream, memory-mapped: its batches are read in place, never copied."""
    try:
        return ipc.open_file(pa.memory_map(str(path)))
    except pa.ArrowInvalid:  # the streaming format
        return ipc.open_stream(pa.memory_map(str(path)))


def _arrow_schema(path: Path) -> pa.Schema:
    return _arrow_reader(path).schema


def match_columns(path: Path, names: list[str], wanted: list[str], what: str) -> list[str]:
    """The columns of ``names`` that ``wanted`` names, globs (``f*``) expanded in the file's order; a missing one is
    a SylvieError naming the file and the columns it has."""
    out = []
    for w in wanted:
        hits = [n for n in names if fnmatch.fnmatchcase(n, w)] if any(c in w for c in "*?[") else \
            [w] if w in names else []
        if not hits:
            shown = ", ".join(names[:12]) + (f", ... ({len(names)} columns)" if len(names) > 12 else "")
            raise SylvieError(f"{path}: {what}: no column '{w}' (the file has {shown}); name the column in the "
                              f"config")
        out += hits
    return out


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
           column_types: dict[str, pa.DataType] | None = None) -> Iterator[Chunk]:
    """The table's ``columns`` chunk by chunk, every file checked to have them. CSV: only an empty field is null (a
    value ``NA`` is the text NA); a column's type is ``column_types``' (the caller's: text for ids, labels and
    splits, float64 for features), else inferred from the file's first 16 MB."""
    for path in files:
        match_columns(path, column_names(path, kind), columns, what)
        first = 0
        try:
            for batch in _batches(path, kind, columns, column_types or {}):
                yield Chunk(path, first, batch)
                first += batch.num_rows
                del batch
                # what the chunk took, back to the system at once: Arrow's pool (mimalloc or jemalloc) keeps it for
                # reuse otherwise, and converting the products preset at 1/10 from Parquet peaked at 0.90 GB with
                # 1M-row chunks, 0.80 GB with 16 MB chunks and 0.60 GB with these releases too
                pa.default_memory_pool().release_unused()
        except pa.ArrowException as e:
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
            parse_options=pacsv.ParseOptions(delimiter=_DELIMITER[kind]),
            convert_options=pacsv.ConvertOptions(include_columns=columns, strings_can_be_null=True,
                                                 null_values=[""], column_types={k: v for k, v in column_types.items()
                                                                                 if k in columns}))
        with reader:
            yield from reader


def read_npy(path: Path, what: str) -> np.ndarray:
    """An ``.npy`` array, memory-mapped (read in place, chunk by chunk by whoever indexes it)."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SylvieError(f"{path}: {what}: not a readable .npy array ({one_line(e)})") from None


def ranges(total: int, step: int = _BATCH_ROWS) -> Iterator[slice]:
    """Slices of ``step`` rows covering ``range(total)``."""
    for start in range(0, total, step):
        yield slice(start, min(start + step, total))
