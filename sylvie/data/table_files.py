"""Tables given as files the way data engineers hold them, read in chunks: Parquet, Arrow IPC/Feather, CSV or TSV
(optionally gzip), and ``.npy`` arrays. A path is one file or a folder of files of one kind (Spark's part files), read
in name order as one table. Nothing here holds more than one chunk of a file at a time; callers keep what they need
of each chunk (a column, converted) and let the rest go.

Every error names the file and, where it applies, the column and the first bad row (:func:`row_name`).
"""
from __future__ import annotations

import csv
import errno
import fnmatch
import gzip
import os
import re
import stat
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
_SEPARATOR = {"\t": "tabs", ";": "semicolons", "|": "bars", ",": "commas"}
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


def listed(folder: Path, what: str = "") -> list[Path]:
    """The files of a folder given as a table, in name order: hidden files and Spark's ``_SUCCESS`` markers skipped,
    every other entry a readable regular file (a link to one is read) or a SylvieError naming it: a folder given
    as a table is read whole, so that nothing in it is left out without a word."""
    entries = sorted(p for p in Path(folder).iterdir() if not p.name.startswith((".", "_")))
    folders = [p.name for p in entries if p.is_dir()]
    if folders:
        raise SylvieError(f"{_at(folder, what)}the folder holds folders ({', '.join(folders[:3])}); give a folder of "
                          f"files of one kind (a partitioned layout's folders are not read)")
    for p in entries:
        check_entry(p, what)
    return entries


def _at(path, what: str) -> str:
    """The start of an error line about ``path``, read as ``what`` (where the config names it) if given."""
    return f"{path}: {what}: " if what else f"{path}: "


def check_entry(path: Path, what: str) -> None:
    """A SylvieError unless ``path`` (a folder's entry or a file given) is a readable regular file, or a link to
    one."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if not os.path.lexists(path):
            raise SylvieError(f"{_at(path, what)}no such file or folder; check the path (relative paths are from the "
                              f"directory the command runs in)") from None
        if e.errno == errno.ELOOP:
            raise SylvieError(f"{_at(path, what)}a symbolic link that leads back to itself (a loop); replace it "
                              f"with the file it should name, or remove it") from None
        if e.errno == errno.ENOENT:
            raise SylvieError(f"{_at(path, what)}a symbolic link to {os.readlink(path)}, which does not exist; "
                              f"restore its target, or remove the link") from None
        raise SylvieError(f"{_at(path, what)}cannot be read ({one_line(e)})") from None
    if not stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        raise SylvieError(f"{_at(path, what)}{kind}, not a file of the table; give regular files only (of a folder "
                          f"every entry is read but hidden and _-prefixed ones), or remove it")
    if not os.access(path, os.R_OK):
        raise SylvieError(f"{_at(path, what)}not readable (permission denied); make it readable (chmod a+r) or "
                          f"remove it")


def files_of(path: str | Path, what: str, kinds: tuple[str, ...]) -> tuple[list[Path], str]:
    """The files of ``path`` (itself, or a folder's files: ``listed``) and their one kind, which must be among
    ``kinds``, each checked to hold what its name says (``check_content``)."""
    path = Path(path)
    if path.is_dir():
        files = listed(path, what)
        if not files:
            raise SylvieError(f"{path}: {what}: the folder holds no files")
    else:
        check_entry(path, what)
        files = [path]
    found = {file_kind(f, what) for f in files}
    if len(found) > 1:
        raise SylvieError(f"{path}: {what}: the folder mixes file kinds ({', '.join(sorted(found))}); keep one kind")
    kind = found.pop()
    if kind not in kinds:
        raise SylvieError(f"{files[0]}: {what}: a {kind} file cannot hold this table; give "
                          f"{' or '.join(sorted(set(kinds)))}")
    for f in files:
        check_content(f, kind, what)
    return files, kind


# how each kind of file begins (a legacy Arrow stream, before Arrow 0.15, began otherwise: not read)
_MAGIC = ((b"PAR1", "parquet"), (b"ARROW1", "arrow"), (b"\xff\xff\xff\xff", "arrow"), (b"FEA1", "feather1"),
          (b"\x93NUMPY", "npy"), (b"\x1f\x8b", "gzip"), (b"PK\x03\x04", "zip"))
_SAID = {"parquet": "a Parquet file", "arrow": "an Arrow IPC/Feather file", "npy": "an .npy array",
         "feather1": "a Feather V1 file", "gzip": "gzip-compressed", "zip": "a zip archive (.npz, .xlsx, ...)",
         "csv": "CSV text", "tsv": "TSV text"}
_SUFFIX = {"parquet": ".parquet", "arrow": ".arrow", "npy": ".npy", "gzip": ".gz"}


def content_kind(head: bytes) -> str | None:
    """The kind of file whose first bytes are ``head`` (one of ``_MAGIC``'s), None for text or anything else."""
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def check_content(path: Path, kind: str, what: str) -> None:
    """A SylvieError naming ``path`` where it cannot hold a table of ``kind`` (its name's): empty, of another kind
    by its first bytes (a CSV named .parquet, a gzip file not named .gz), a Feather V1 file, or a Parquet file cut
    short."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - 4, 0))
            tail = f.read(4)
    except OSError as e:
        raise SylvieError(f"{path}: {what}: cannot be read ({one_line(e)})") from None
    if size == 0:
        raise SylvieError(f"{path}: {what}: the file is empty (0 bytes); write the table into it"
                          f"{' (at least its header line)' if kind in _DELIMITER else ''}, or remove it")
    found = content_kind(head)
    if found == "feather1":
        raise SylvieError(f"{path}: {what}: a Feather V1 file, an old format that cannot be read in chunks; write it "
                          f"again as Feather V2, e.g. pyarrow.feather.write_feather(pyarrow.feather.read_table(OLD), "
                          f"NEW) (pandas' to_feather writes V2)")
    if kind in _DELIMITER:
        gz = path.suffix.lower() == ".gz"
        if gz and found != "gzip":
            raise SylvieError(f"{path}: {what}: not gzip-compressed, though its name ends .gz; "
                              + (f"it is {_SAID[found]}: name it by its kind" if found else
                                 "rename it without the .gz"))
        if not gz and found == "gzip":
            raise SylvieError(f"{path}: {what}: gzip-compressed, though its name does not end .gz; rename it "
                              f"{path.name}.gz")
        if found is None or gz:
            return
    if found != kind:
        rename = f"rename it to {_SUFFIX[found]}" if found in _SUFFIX else "convert it"
        raise SylvieError(f"{path}: {what}: " + (
            f"the file is {_SAID[found]}, not {_SAID[kind]} as its name says; {rename}" if found else
            f"not {_SAID[kind]} (it does not begin as one does): damaged, or of another kind than its name says; "
            f"write it again, or name it by its kind"))
    if kind == "parquet" and tail != b"PAR1":
        raise SylvieError(f"{path}: {what}: the Parquet file is cut short (its end, the footer, is missing): "
                          f"copy or write it again")


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


def _csv_problem(path: Path, kind: str, e: Exception, what: str) -> None:
    """Arrow's error on a CSV, where it names a column by number or a row by its text, as a SylvieError naming the
    line and the column (found by reading the file again, on the way to the error only); else nothing."""
    text = str(e)
    value = re.search(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to (\w+): invalid value '(.*)'",
                      text, re.S)
    width = re.search(r"Expected (\d+) columns, got (\d+)", text)
    if not (value or width):
        return
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8-sig", errors="replace") as f:
        rows = csv.reader(f, delimiter=_DELIMITER[kind])
        header = next(rows, [])
        for row in rows:
            if value and int(value[1]) < len(row) and row[int(value[1])] == value[3]:
                col = header[int(value[1])] if int(value[1]) < len(header) else f"#{value[1]}"
                said = {"double": "a number", "bool": "true/false or 1/0"}.get(value[2], value[2])
                raise SylvieError(f"{path}, line {rows.line_num}: {what + ': ' if what else ''}column '{col}': "
                                  f"{value[3]!r} is not {said}; every value of a column must be of its kind")
            if width and len(row) != len(header):
                raise SylvieError(f"{path}, line {rows.line_num}: {what + ': ' if what else ''}{len(row)} fields "
                                  f"where the header has {len(header)}; quote a field that holds "
                                  f"{'a comma' if kind == 'csv' else 'a tab'}, or fix the line")


def column_names(path: Path, kind: str) -> list[str]:
    """The columns of one file, in its order (a CSV's header)."""
    try:
        if kind == "parquet":
            return pq.ParquetFile(path).schema_arrow.names
        if kind == "arrow":
            return _arrow_schema(path).names
        return _csv_header(path, kind)
    except (pa.ArrowException, OSError, ValueError) as e:
        if kind in _DELIMITER and isinstance(e, pa.ArrowException):
            _csv_problem(path, kind, e, "")
        raise SylvieError(f"{path}: not a readable {kind} file ({one_line(e)}); it is damaged, cut short or of "
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
            shown = ", ".join(names[:12]) + (f", ... ({len(names)} columns)" if len(names) > 12 else "")
            other = next((d for d in "\t;|," if len(names) == 1 and d in names[0]), None)
            if other:  # a TSV named .csv, a CSV named .tsv, or another separator
                raise SylvieError(f"{path}: {what}: the header is one column, {names[0]!r}, separated by "
                                  f"{_SEPARATOR[other]}: CSV (.csv) is comma-separated and TSV (.tsv) tab-separated; "
                                  f"name the file by its separator, or write it with commas")
            raise SylvieError(f"{path}: {what}: no column '{w}' (the file has {shown}); name the column in the "
                              f"config")
        twice = [n for n in dict.fromkeys(hits) if names.count(n) > 1]
        if twice:
            raise SylvieError(f"{path}: {what}: the file has {names.count(twice[0])} columns named '{twice[0]}', "
                              f"so which one is meant is unknown; rename them apart")
        out += hits
    return out


def is_glob(name: str) -> bool:
    """Whether a configured column name is a glob (``f*``) rather than a name."""
    return any(c in name for c in "*?[")


def table_columns(files: list[Path], kind: str, wanted: list[str], what: str) -> list[str]:
    """The columns ``wanted`` names (globs expanded, ``match_columns``), in the first file's order: the same in
    every file of a folder, else a SylvieError naming the file and the column it has or lacks that the first file
    does not: the files of a folder are one table."""
    found = match_columns(files[0], column_names(files[0], kind), wanted, what)
    for f in files[1:]:
        names = column_names(f, kind)
        lacks = [c for c in found if c not in names]
        if lacks:
            raise _unlike_first(f, files[0], lacks[0], what)
        extra = [c for c in match_columns(f, names, wanted, what) if c not in found]
        if extra:
            glob = next(w for w in wanted if fnmatch.fnmatchcase(extra[0], w))
            raise SylvieError(f"{f}: {what}: column '{extra[0]}' (matched by '{glob}') is not in {files[0].name}; "
                              f"the files of a folder are one table: give every file the same columns")
    return found


def _unlike_first(path: Path, first: Path, column: str, what: str) -> SylvieError:
    return SylvieError(f"{path}: {what}: no column '{column}', which {first.name} has; the files of a folder are "
                       f"one table: give every file the same columns")


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
        names = column_names(path, kind)
        lacks = [c for c in columns if c not in names]
        if lacks and path != files[0]:
            raise _unlike_first(path, files[0], lacks[0], what)
        match_columns(path, names, columns, what)
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
            if kind in _DELIMITER:
                _csv_problem(path, kind, e, what)
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
