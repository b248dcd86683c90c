"""The files a table is read from, each checked before it is read: a file or a folder of part files, every entry a
readable regular file or refused by name (never skipped), and every file what its name says (not empty, not another
kind, not truncated or encrypted Parquet, not UTF-16 text).
"""
from __future__ import annotations

import errno
import gzip
import os
import stat
import zlib
from pathlib import Path

from sylvie.errors import SylvieError, one_line

KINDS = {".parquet": "parquet", ".pq": "parquet", ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow",
         ".csv": "csv", ".tsv": "tsv", ".npy": "npy"}
DELIMITERS = {"csv": ",", "tsv": "\t"}  # the kinds read as delimited text, and their delimiters
TEXT_KINDS = tuple(DELIMITERS)


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
        check_entry(p, what, in_folder=True)
    return entries


def _at(path, what: str) -> str:
    """The start of an error line about ``path``, read as ``what`` (where the config names it) if given."""
    return f"{path}: {what}: " if what else f"{path}: "


def check_entry(path: Path, what: str, in_folder: bool = False) -> None:
    """A SylvieError unless ``path`` (a folder's entry, ``in_folder``, or a file given) is a readable regular file,
    or a link to one."""
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
        if in_folder:
            raise SylvieError(f"{_at(path, what)}{kind}, not a file of the table; give regular files only (of a "
                              f"folder every entry is read but hidden and _-prefixed ones), or remove it")
        raise SylvieError(f"{_at(path, what)}{kind}, not a regular file: a table is read more than once (its "
                          f"columns, then its rows), which a pipe or a process substitution's /dev/fd/N cannot be; "
                          f"write the table to a regular file first, and give that file")
    if not os.access(path, os.R_OK):
        raise SylvieError(f"{_at(path, what)}not readable (permission denied); make it readable (chmod a+r)"
                          + (" or remove it" if in_folder else ""))


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


# how each kind of file begins (an Arrow stream from before Arrow 0.15 begins otherwise: ``_legacy_stream``)
_MAGIC = ((b"PAR1", "parquet"), (b"PARE", "parquet"), (b"ARROW1", "arrow"), (b"\xff\xff\xff\xff", "arrow"),
          (b"FEA1", "feather1"), (b"\x93NUMPY", "npy"), (b"\x1f\x8b", "gzip"), (b"PK\x03\x04", "zip"))
_SAID = {"parquet": "a Parquet file", "arrow": "an Arrow IPC/Feather file", "npy": "an .npy array",
         "feather1": "a Feather V1 file", "gzip": "gzip-compressed", "zip": "a zip archive (.npz, .xlsx, ...)",
         "csv": "CSV text", "tsv": "TSV text"}
_SUFFIX = {"parquet": ".parquet", "arrow": ".arrow", "npy": ".npy", "gzip": ".gz"}
# text in an encoding other than UTF-8, by its byte order mark (UTF-32's first: its LE mark begins as UTF-16's)
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))
_HEAD = 64  # bytes of a file looked at


def content_kind(head: bytes) -> str | None:
    """The kind of file whose first bytes are ``head`` (one of ``_MAGIC``'s), None for text or anything else."""
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def _legacy_stream(head: bytes, size: int) -> bool:
    """Whether ``head`` begins as an Arrow IPC stream from before Arrow 0.15 does: a message's length (4 bytes,
    little-endian; the message padded so that the two end on 8 bytes), where a stream now begins 0xFFFFFFFF."""
    length = int.from_bytes(head[:4], "little")
    return len(head) >= 8 and 0 < length <= size - 4 and (length + 4) % 8 == 0


def text_encoding(head: bytes) -> str | None:
    """The encoding of text beginning ``head`` where it is not UTF-8 (nor ASCII): UTF-16 or UTF-32 by a byte order
    mark, or by NUL bytes as every other byte (UTF-16LE, UTF-16BE) or three bytes of four (UTF-32LE, UTF-32BE)
    without one; "binary" for other NUL bytes (no text holds them); None otherwise."""
    found = next((name for bom, name in _BOMS if head.startswith(bom)), None)
    if found or b"\x00" not in head:
        return found
    head = head[:len(head) // 4 * 4]
    nul = [all(b == 0 for b in head[i::4]) for i in range(4)]
    if nul[1] and nul[2] and nul[3]:
        return "UTF-32LE"
    if nul[0] and nul[1] and nul[2]:
        return "UTF-32BE"
    if nul[1] and nul[3]:
        return "UTF-16LE"
    if nul[0] and nul[2]:
        return "UTF-16BE"
    return "binary"


def _text_head(path: Path, gz: bool, head: bytes) -> bytes:
    """The first bytes of a text file's text: ``head``, or those of its gzip content (none where it cannot be read:
    the reader says why)."""
    if not gz:
        return head
    try:
        with gzip.open(path, "rb") as f:
            return f.read(_HEAD)
    except (OSError, EOFError, zlib.error):
        return b""


def check_content(path: Path, kind: str, what: str) -> None:
    """A SylvieError naming ``path`` where it cannot hold a table of ``kind`` (its name's): empty, of another kind
    by its first bytes (a CSV named .parquet, a gzip file not named .gz), a Feather V1 file, or a Parquet file cut
    short."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - 4, 0))
            tail = f.read(4)
    except OSError as e:
        raise SylvieError(f"{path}: {what}: cannot be read ({one_line(e)})") from None
    if size == 0:
        raise SylvieError(f"{path}: {what}: the file is empty (0 bytes); write the table into it"
                          f"{' (at least its header line)' if kind in TEXT_KINDS else ''}, or remove it")
    found = content_kind(head)
    if found == "feather1":
        raise SylvieError(f"{path}: {what}: a Feather V1 file, an old format that cannot be read in chunks; write it "
                          f"again as Feather V2, e.g. pyarrow.feather.write_feather(pyarrow.feather.read_table(OLD), "
                          f"NEW) (pandas' to_feather writes V2)")
    if kind in TEXT_KINDS:
        gz = path.suffix.lower() == ".gz"
        if gz and found != "gzip":
            raise SylvieError(f"{path}: {what}: not gzip-compressed, though its name ends .gz; "
                              + (f"it is {_SAID[found]}: name it by its kind" if found else
                                 "rename it without the .gz"))
        if not gz and found == "gzip":
            raise SylvieError(f"{path}: {what}: gzip-compressed, though its name does not end .gz; rename it "
                              f"{path.name}.gz")
        if found is None or gz:
            _check_encoding(path, gz, _text_head(path, gz, head), what)
            return
    if kind == "arrow" and found is None and _legacy_stream(head, size):
        return  # read as a stream: Arrow still reads its old format
    if found != kind:
        rename = f"rename it to {_SUFFIX[found]}" if found in _SUFFIX else "convert it"
        raise SylvieError(f"{path}: {what}: " + (
            f"the file is {_SAID[found]}, not {_SAID[kind]} as its name says; {rename}" if found else
            f"not {_SAID[kind]} (it does not begin as one does): damaged, or of another kind than its name says; "
            f"write it again, or name it by its kind"))
    if kind == "parquet" and b"PARE" in (head[:4], tail):
        raise SylvieError(f"{path}: {what}: an encrypted Parquet file (Parquet modular encryption, its footer "
                          f"encrypted), which is not read: decrypt it first (read it with its keys and write it "
                          f"again without encryption)")
    if kind == "parquet" and tail != b"PAR1":
        raise SylvieError(f"{path}: {what}: the Parquet file is cut short (its end, the footer, is missing): "
                          f"copy or write it again")


def _check_encoding(path: Path, gz: bool, head: bytes, what: str) -> None:
    """A SylvieError where a CSV or TSV file's text (``head``, its first bytes) is not UTF-8 but UTF-16 or UTF-32
    (Excel's "Unicode text", PowerShell 5's redirection), or not text at all (NUL bytes)."""
    encoding = text_encoding(head)
    if encoding is None:
        return
    if encoding == "binary":
        raise SylvieError(f"{path}: {what}: not text (it holds NUL bytes, which CSV text does not): of another kind "
                          f"than its name says, or damaged; write the table again as UTF-8 CSV")
    raise SylvieError(f"{path}: {what}: the file is {encoding[:6]} text; save it as UTF-8 (e.g. "
                      f"{to_utf8(encoding, gz)})")


def to_utf8(encoding: str, gz: bool) -> str:
    """The command that writes a text file of ``encoding`` (gzip-compressed where ``gz``) as UTF-8."""
    return (f"zcat IN | iconv -f {encoding} -t UTF-8 | gzip > OUT" if gz else
            f"iconv -f {encoding} -t UTF-8 IN > OUT")
