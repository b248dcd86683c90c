"""Atomic outputs: write under a temporary name in the same directory, then rename, so a failed stage leaves nothing
half-written at the final path.

The temporary name ``.<name>.tmp-<pid>_<host>_<random>`` says who writes it: the next write of the same output
removes one left by a dead writer on this host, and nothing else. A full disk is said, naming the path.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import socket
from pathlib import Path

from sylvie.errors import SylvieError
from sylvie.output_dir import OutputKind, replace_directory

LOW_SPACE_BYTES = 64 << 20  # below this much free space, a failed write is reported as a full disk
def host_key() -> str:
    """This host and pid namespace, in temporary names: a pid means one process only within one pid namespace, so
    two containers that share a hostname (and a disk) never take each other's live writer for a dead one."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:  # no /proc (not Linux): the hostname alone
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}|{namespace}".encode()).hexdigest()[:6]


_HOST = host_key()
_TEMP_TAIL = re.compile(r"(\d+)_([0-9a-f]{6})_[0-9a-f]{8}")  # after ".<name>.tmp-": pid, host, random


def _temp_prefix(final: Path) -> str:
    return f".{final.name}.tmp-"


def _new_temp(final: Path, directory: bool) -> Path:
    """A new, empty temporary file or directory beside ``final``, named for this process and host."""
    while True:
        tmp = final.parent / f"{_temp_prefix(final)}{os.getpid()}_{_HOST}_{secrets.token_hex(4)}"
        try:
            if directory:
                tmp.mkdir()
            else:
                os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return tmp
        except FileExistsError:
            continue


def _writer_alive(pid: int) -> bool:
    """Whether process ``pid`` (of this host) still runs; a zombie does not, anything unclear does."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, or the pid cannot be signalled: alive, to be safe
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries an earlier, killed write of ``path`` left beside it: exactly our temporary-name
    pattern for this output, written by a process of this host that is no longer running. Returns what was
    removed."""
    final = Path(path)
    prefix = _temp_prefix(final)
    try:
        names = os.listdir(final.parent)
    except OSError:
        return []
    removed = []
    for name in names:
        m = _TEMP_TAIL.fullmatch(name[len(prefix):]) if name.startswith(prefix) else None
        if m is None or m.group(2) != _HOST or int(m.group(1)) == os.getpid() or _writer_alive(int(m.group(1))):
            continue
        leftover = final.parent / name
        try:
            if leftover.is_symlink():  # never a temporary of ours
                continue
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        except FileNotFoundError:  # removed meanwhile, by another run of this stage
            continue
        except OSError:
            continue  # left for the next run; the write itself does not need it gone
        removed.append(leftover)
    return removed


@contextlib.contextmanager
def scratch_directory(beside: str | os.PathLike):
    """A temporary directory named for the output ``beside`` (as ``atomic_path`` names its temporaries, so that a
    killed process's is removed by the next write of that output), removed with what is left in it on leaving: for
    outputs of several files that are moved into place one by one once all are written."""
    final = Path(beside)
    remove_leftovers(final)
    tmp = _new_temp(final, directory=True)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def disk_full_error(path: Path, error: BaseException) -> SylvieError | None:
    """A clear error if ``error`` (from writing ``path``) came from a full disk or quota, else None.

    torch.save reports a full disk as ``basic_ios::clear: iostream error`` (no errno), so a failed write is
    also taken as 'disk full' when the file system has almost no space left."""
    full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
    free = _free_bytes(path.parent)
    if not full and isinstance(error, (OSError, RuntimeError)) and free is not None and free < LOW_SPACE_BYTES:
        full = True
    if not full:
        return None
    left = f"{free / 1e6:.1f} MB free" if free is not None else "no space left"
    return SylvieError(f"{path}: could not be written: the disk is full ({left} on the file system of "
                       f"{path.parent}); free some space or write to another disk, then rerun")


def _naming_the_output(error: OSError, final: Path) -> None:
    """Make ``error`` name ``final`` where it names ``final``'s temporary (or a file in it): the user asked for
    ``final``, and the temporary is gone once the error is out."""
    prefix = str(final.parent / _temp_prefix(final))
    for attr in ("filename", "filename2"):
        name = getattr(error, attr)
        if isinstance(name, str) and name.startswith(prefix):
            rest = name[len(prefix):]
            setattr(error, attr, str(final) + (rest[rest.index(os.sep):] if os.sep in rest else ""))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, directory: bool = False, kind: OutputKind | None = None,
                inputs: tuple = ()):
    """Yield a temporary path beside ``path``; on success move it into place, on error remove it. Temporaries of
    earlier writes of ``path`` whose writer was killed are removed first (``remove_leftovers``).

    A directory needs its ``kind``: an existing directory at ``path`` is replaced only if it is an earlier
    output of that kind (and ``path`` is none of ``inputs`` nor a parent of one)."""
    final = Path(path)
    if directory and kind is None:
        raise ValueError("atomic_path(directory=True) needs the kind of output it replaces")
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(final)
    try:
        tmp = _new_temp(final, directory)
    except OSError as e:
        _naming_the_output(e, final)
        raise
    try:
        try:
            yield tmp
            if directory:
                replace_directory(tmp, final, kind, inputs)
            else:
                os.replace(tmp, final)
        except (OSError, RuntimeError) as e:
            full = disk_full_error(final, e)
            if full is None:
                if isinstance(e, OSError):
                    _naming_the_output(e, final)
                raise
            raise full from e
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


class HashingFile:
    """A file open for writing (``raw``) that takes the sha256 of what is written to it as it is written
    (``hash.hexdigest()``: what :func:`file_sha256` of the file gives, without reading it back). For writers that
    take a Python file (``pyarrow.PythonFile``); closing it leaves ``raw`` open."""

    def __init__(self, raw):
        self.raw, self.hash, self.closed = raw, hashlib.sha256(), False

    def write(self, data) -> int:
        self.hash.update(data)
        return self.raw.write(data)

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.raw.tell()

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def json_safe(obj):
    """``obj`` with every non-finite float (NaN, inf) replaced by None, so that it is valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def to_json(obj, **kwargs) -> str:
    """Strict JSON text of ``obj`` (non-finite floats become null)."""
    return json.dumps(json_safe(obj), allow_nan=False, **kwargs)


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(to_json(obj, indent=2) + "\n")


def write_jsonl(path: str | os.PathLike, records: list[dict]) -> None:
    """One strict-JSON object per line, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text("".join(to_json(r) + "\n" for r in records))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def read_json(path: str | os.PathLike, what: str):
    """Read a JSON file, turning a missing or malformed file into a clear error."""
    p = Path(path)
    if not p.is_file():
        raise SylvieError(f"{p}: {what} not found; run the stage that produces it first")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise SylvieError(f"{p}: {what} is not valid JSON ({e}); delete it and rerun its stage") from e
    except UnicodeDecodeError as e:  # another file (a binary one) under this name
        raise SylvieError(f"{p}: {what} is not a JSON text file (byte {e.start} is not UTF-8); delete it and "
                          f"rerun its stage") from e
    except OSError as e:
        raise SylvieError(f"{p}: {what} cannot be read ({e.strerror or e}); check the file's permissions") from e
