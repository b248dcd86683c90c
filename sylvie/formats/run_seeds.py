"""``seeds.json`` beside the seed directories of a run: the seeds one ``sylvie train`` launch trained, one after
another (``--seed 0 1 2 --out results/RUN/seed{seed}``), each with its run directory and the run key of the model it
wrote there. The train stage writes it on rank 0 once every seed is trained and, where asked, evaluated
(``--seeds-out``): the pipeline's train job of a run has it as its output, the seeds' own files being in their
directories. It carries a checksum of its fields (``sylvie.formats.checksum``). This module is the format's only
writer and reader."""
from __future__ import annotations

import json
from pathlib import Path

from sylvie.atomic import write_json
from sylvie.errors import SylvieError
from sylvie.formats.checksum import checked, with_checksum

FILE = "seeds.json"
FORMAT_VERSION = 1


def write_run_seeds(path: str | Path, seeds: list[dict]) -> None:
    """``seeds``: one ``{"seed": int, "dir": str, "run": str}`` per seed, in the order they were trained."""
    write_json(path, with_checksum({"format_version": FORMAT_VERSION, "seeds": seeds}))


def read_run_seeds(path: str | Path) -> list[dict]:
    """The seeds ``path`` records; one that is not ours, damaged or of another version is a clear error."""
    fix = f"delete it and train the run again (the seeds resume from their checkpoints): {path}"
    try:
        content = json.loads(Path(path).read_text())
        content = checked(content, path, "sylvie train", fix, FILE)
        if content.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version {content.get('format_version')!r}, this sylvie reads {FORMAT_VERSION}")
        return [{"seed": int(s["seed"]), "dir": str(s["dir"]), "run": str(s["run"])} for s in content["seeds"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise SylvieError(f"{path}: not a record of a run's seeds written by `sylvie train` ({type(e).__name__}: "
                          f"{e}); {fix}") from e
