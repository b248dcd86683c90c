"""Where a stage may write: never over what it did not write.

Checked before any work and again at replacement: an output is never ``/``, home, the working directory or its
parents, nor an input, its parent or inside it; an existing directory is replaced only when empty or holding exactly
what the same kind of stage writes (its marker file). Anything else is refused, naming the foreign entries.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from sylvie.errors import SylvieError

log = logging.getLogger(__name__)

# Snakemake's marker in a directory output (its time stamp): part of the output, replaced with it, as the new
# output is newer than what it marked
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"


@dataclass(frozen=True)
class OutputKind:
    """What one stage writes into its output directory."""
    what: str           # in words, e.g. "canonical graph"
    stage: str          # the command that writes it
    marker: str | None  # the file that identifies it (JSON with every key in ``marker_keys``), if any
    marker_keys: tuple[str, ...]
    entries: str        # regular expression every file name must match
    subdirs: str = r"(?!)"  # regular expression of the folders it writes (default: none)

    def writes_file(self, name: str) -> bool:
        """Whether a file of this name is one this kind writes (or Snakemake's marker of a directory output)."""
        return re.fullmatch(self.entries, name) is not None or name == SNAKEMAKE_TIMESTAMP

    def _ours(self, directory: Path, name: str) -> bool:
        path = directory / name
        if path.is_symlink():
            return False
        return (path.is_file() and self.writes_file(name)) or \
            (path.is_dir() and re.fullmatch(self.subdirs, name) is not None)

    def foreign_entries(self, directory: Path) -> list[str]:
        """Names in ``directory`` this kind does not write (empty: the directory is ours to replace)."""
        names = sorted(os.listdir(directory))
        foreign = [n for n in names if not self._ours(directory, n)]
        if set(names) - {SNAKEMAKE_TIMESTAMP} and not foreign and self.marker:
            try:
                marker = json.loads((directory / self.marker).read_text())
                if not all(k in marker for k in self.marker_keys):
                    foreign.append(f"{self.marker} (not one written by {self.stage})")
            except (OSError, ValueError):
                if (directory / self.marker).exists():
                    foreign.append(f"{self.marker} (not readable)")
                else:  # files of our names, which nothing says we wrote (a user's own nodes.csv)
                    named = [n for n in names if n != SNAKEMAKE_TIMESTAMP]
                    shown = ", ".join(named) if len(named) <= 3 else f"{named[0]} and {len(named) - 1} more"
                    foreign.append(f"{shown} but no {self.marker}, which {self.stage} writes with them")
        return foreign


CANONICAL_GRAPH = OutputKind("canonical graph", "sylvie download", "meta.json", ("format_version", "fingerprint"),
                             r"nodes\.arrow|edges\.arrow|meta\.json|node_keys\.arrow")
# A run directory is written into, never replaced: what training, evaluation and the emulated cluster put there,
# and the temporary files of a write that was killed.
RUN = OutputKind("run directory", "sylvie train", None, (), r"model\.pt|metrics\.jsonl|eval\.json|failed\.json|"
                 r"train\.lock|node\d+\.log|\..+\.tmp-\w+", subdirs=r"checkpoints|tensorboard")
VIP = OutputKind("VIP analysis", "sylvie vip", "manifest.json", ("kind", "fanouts", "batch_size", "parts"),
                 r"manifest\.json|vip-\d+\.npy")
PARTITION = OutputKind("partition", "sylvie partition", "manifest.json", ("format_version", "parts", "num_parts"),
                       r"manifest\.json|part-\d+\.arrow|topology\.arrow")
# the files `sylvie export` writes, and export.json, which tells a folder of them from a user's own files
EXPORT = OutputKind("graph export", "sylvie export", "export.json", ("format_version", "dataset", "fingerprint"),
                    r"export\.json|(edges|nodes)\.(parquet|arrow|csv|tsv)(\.gz)?")


def identify(directory: str | os.PathLike) -> str | None:
    """Which of our outputs ``directory`` is, in words naming the file that tells ("a partition directory
    (manifest.json of `sylvie partition`)"); None when it is none of them."""
    d = Path(directory)
    for kind in (VIP, PARTITION, CANONICAL_GRAPH, EXPORT):
        try:
            marker = json.loads((d / kind.marker).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(marker, dict) and all(k in marker for k in kind.marker_keys):
            return f"a {kind.what} directory ({kind.marker} of `{kind.stage}`)"
    written = [n for n in ("model.pt", "metrics.jsonl") if (d / n).is_file()]
    if written:
        return f"a run directory ({written[0]} of `{RUN.stage}`)"
    return None


def resolved_path(path: str | os.PathLike) -> Path:
    """``path`` absolute (``~`` expanded), its links followed as far as they lead; never an error: a link that
    leads back to itself or to nothing is left as it is, for the reader of that path to name in its own line."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _contains(parent: Path, child: Path) -> bool:
    return parent == child or parent in child.parents


def _refusals(target: Path, inputs: tuple) -> list[str]:
    """Why writing to ``target`` (resolved) could overwrite something that is not an output; empty: it may."""
    reasons = []
    if target.parent == target:
        reasons.append("the root of the file system")
    home = resolved_path(Path.home())
    if _contains(target, home):
        reasons.append("the home directory" if target == home else f"a parent of the home directory {home}")
    cwd = resolved_path(os.getcwd())
    if _contains(target, cwd):
        reasons.append("the current directory" if target == cwd else f"a parent of the current directory {cwd}")
    for given in inputs:
        src = resolved_path(given)
        if target == src:
            reasons.append(f"this stage's input {given}")
        elif _contains(target, src):
            reasons.append(f"a parent of this stage's input {given}")
        elif _contains(src, target):
            reasons.append(f"inside this stage's input {given}")
    return reasons


def _suggestion(out, target: Path, inputs: tuple) -> Path | str:
    """A path that does not exist yet and that check_location accepts, for the refused ``out``: the same name next
    to the outermost input holding it (or being it), else a directory inside ``out``."""
    holders = sorted((i for i in inputs if _contains(resolved_path(i), target)),
                     key=lambda i: len(resolved_path(i).parts))
    if holders:  # written as the user wrote the input, where that names it
        given = Path(os.path.normpath(holders[0]))
        base = (given if given.name not in ("", ".", "..") else resolved_path(given)).parent / target.name
    else:
        base = Path(out) / "new-output"
    for n in range(1, 100):
        candidate = base if n == 1 else base.with_name(f"{base.stem}-{n}{base.suffix}")
        if not candidate.exists() and not _refusals(resolved_path(candidate), inputs):
            return candidate
    return "DIR"  # nothing plain is free


def check_location(out: str | os.PathLike, inputs: tuple = (), stage: str = "sylvie", flag: str = "--out") -> Path:
    """``out`` resolved, or a SylvieError if writing there could overwrite something that is not an output."""
    target = resolved_path(out)
    reasons = _refusals(target, inputs)
    if reasons:
        raise SylvieError(f"{stage}: refusing {flag} {out}: it is {reasons[0]}; give a directory of its own, "
                          f"e.g. {flag} {_suggestion(out, target, inputs)}")
    return target


def check_replaceable(out: str | os.PathLike, kind: OutputKind, inputs: tuple = ()) -> Path:
    """``out`` resolved, after checking its location and that an existing directory there is ``kind``'s."""
    target = check_location(out, inputs, kind.stage)
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise SylvieError(f"{kind.stage}: refusing --out {out}: it exists and is not a directory; choose another "
                          f"--out or move it away yourself")
    if target.is_dir():
        foreign = kind.foreign_entries(target)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise SylvieError(f"{kind.stage}: refusing --out {out}: it exists and is not a {kind.what} written by "
                              f"{kind.stage} (it holds {shown}); nothing was changed. Choose a new directory, or "
                              f"empty it yourself if its contents are not needed")
    return target


def replace_directory(tmp: Path, out: str | os.PathLike, kind: OutputKind, inputs: tuple = ()) -> None:
    """Move the finished directory ``tmp`` to ``out``, replacing an earlier output of the same kind there."""
    target = check_replaceable(out, kind, inputs)
    if not target.exists():
        os.replace(tmp, target)
        return
    old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
    os.replace(target, old)
    os.replace(tmp, target)
    for name in os.listdir(old):  # only what this kind writes, should anything have appeared since the check
        if kind.writes_file(name) and (old / name).is_file():
            (old / name).unlink()
    try:
        old.rmdir()
    except OSError:
        log.warning(f"{kind.stage}: kept {old}: something was added to {out} while this stage ran")
