"""Arrow's errors on a CSV or TSV file, which name a column by number or a row by its text, said as a line and a
column: the file is read again with Python's csv module, on the way to the error only."""
from __future__ import annotations

import csv
import gzip
import re
from pathlib import Path

from sylvie.data.input_files import DELIMITERS, to_utf8
from sylvie.errors import SylvieError


def csv_problem(path: Path, kind: str, e: Exception, what: str) -> None:
    """Arrow's error on a CSV, where it names a column by number or a row by its text, as a SylvieError naming the
    line and the column (found by reading the file again, on the way to the error only); else nothing."""
    text = str(e)
    utf8 = re.search(r"In CSV column #(\d+): .*invalid UTF8 data", text)
    if utf8:
        _not_utf8(path, kind, int(utf8[1]), what)
    value = re.search(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to (\w+): invalid value '(.*)'",
                      text, re.S)
    width = re.search(r"Expected (\d+) columns, got (\d+)", text)
    if not (value or width):
        return
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8-sig", errors="replace") as f:
        rows = csv.reader(f, delimiter=DELIMITERS[kind])
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


def _not_utf8(path: Path, kind: str, column: int, what: str) -> None:
    """A SylvieError naming the line, the column and the byte where a CSV's column ``column`` (Arrow's word: some
    value of it) is not UTF-8 text (Latin-1, Windows-1252: Excel's "CSV" on Windows); nothing where none is found
    (the file changed)."""
    gz = path.suffix.lower() == ".gz"
    opener = gzip.open if gz else open
    with opener(path, "rt", newline="", encoding="latin-1") as f:  # each byte one character: none is refused
        rows = csv.reader(f, delimiter=DELIMITERS[kind])
        header = next(rows, [])
        for row in rows:
            for j in [column, *range(len(row))]:  # Arrow's column first, then any
                raw = row[j].encode("latin-1") if j < len(row) else b""
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    name = header[j].encode("latin-1").decode("utf-8", "replace").lstrip("\ufeff") \
                        if j < len(header) else f"#{j}"
                    raise SylvieError(f"{path}, line {rows.line_num}: {what + ': ' if what else ''}column '{name}': "
                                      f"byte 0x{raw[bad.start]:02x} of {raw!r} is not UTF-8 text: the file is in "
                                      f"another encoding; save it as UTF-8 (e.g. from Latin-1: "
                                      f"{to_utf8('LATIN1', gz)})") from None
