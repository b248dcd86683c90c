"""Files as the tests need them: the repository as a fresh clone has it (``copy_repo``), a file cut off part-way
(``truncate``)."""
import shutil
import subprocess
from pathlib import Path

from support.commands import REPO


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut a file to ``keep`` of its bytes, as a write cut off part-way leaves it."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:int(len(data) * keep)])


def copy_repo(dst: Path) -> Path:
    """Copy the repository's files as a fresh clone has them (no data, results or venv) to ``dst``."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file() or src.is_symlink():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f, follow_symlinks=False)
    return dst
