"""``failed.json`` in a run directory: why a training run stopped without a model (it diverged, or its loss was not
finite). The train stage writes it on rank 0 (with ``metrics.jsonl`` of the epochs it ran, and no ``model.pt``) and
removes it when the same run later finishes; the report reads it and shows the run as failed. It carries a checksum
of its fields (``sylvie.formats.checksum``). This module is the format's only writer and reader."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from sylvie.atomic import write_json
from sylvie.errors import SylvieError
from sylvie.formats.checksum import checked, with_checksum

FILE = "failed.json"
REASONS = ("diverged", "non-finite")


@dataclass(frozen=True)
class RunFailure:
    reason: str  # one of REASONS
    epoch: int  # 1-based: the epoch at which training stopped
    message: str  # what the train stage printed

    def __post_init__(self):
        if self.reason not in REASONS:
            raise ValueError(f"unknown run failure reason {self.reason!r}; one of {', '.join(REASONS)}")


def write_run_failure(run_dir: str | Path, failure: RunFailure) -> None:
    write_json(Path(run_dir) / FILE, with_checksum(asdict(failure)))


def clear_run_failure(run_dir: str | Path) -> None:
    """Remove an earlier attempt's ``failed.json`` (ours: the file name is this format's) once the run succeeded."""
    (Path(run_dir) / FILE).unlink(missing_ok=True)


def read_run_failure(run_dir: str | Path) -> RunFailure | None:
    """The run's recorded failure, or None; a ``failed.json`` that is not ours is a clear error."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    fix = "delete it and rerun the run"
    try:
        d = json.loads(path.read_text())
        d = checked(d, path, "sylvie train", fix, FILE) if isinstance(d, dict) else d
        return RunFailure(reason=str(d["reason"]), epoch=int(d["epoch"]), message=str(d["message"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SylvieError(f"{path}: not a run failure record written by `sylvie train` ({type(e).__name__}: {e}); "
                          f"{fix}") from e

