"""The memory allocator of a run's ranks (``launch.allocator``): tcmalloc preloaded where installed, as PyTorch's
CPU launcher does, else glibc's malloc returning large freed blocks, with transparent huge pages.

Why: a full-graph rank allocates the same part-sized tensors every epoch, and glibc alone fragments its heap or
faults pages in again. Measured side by side: ``benchmarks/records/2026-12-06_allocators_2core-vm.md``. A user's
preloaded allocator is left alone.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from sylvie.errors import SylvieError

log = logging.getLogger(__name__)

CHOICES = ("auto", "tcmalloc", "glibc")
NAMES = ("libtcmalloc.so", "libtcmalloc_minimal.so", "libtcmalloc.so.4", "libtcmalloc_minimal.so.4")
PRELOADED = ("tcmalloc", "jemalloc", "mimalloc")  # an LD_PRELOAD entry naming one of these: the user's choice
HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"  # PyTorch's CPU allocator: blocks >= 2 MB 2 MB-aligned and madvise'd huge
INSTALL = ("apt-get install libtcmalloc-minimal4 (Debian, Ubuntu; make install does), dnf install gperftools-libs, "
           "or conda install -c conda-forge gperftools")


def library_dirs(env: dict) -> list[Path]:
    """Where tcmalloc is looked for, in order: PyTorch's launcher's folders, then the system's multiarch ones."""
    dirs = [f"{env[k]}/lib" for k in ("CONDA_PREFIX", "VIRTUAL_ENV") if env.get(k)]
    dirs += [os.path.expanduser("~/.local/lib"), "/usr/local/lib", "/usr/local/lib64", "/usr/lib", "/usr/lib64"]
    arch = sysconfig.get_config_var("MULTIARCH")
    if arch:
        dirs += [f"/usr/lib/{arch}", f"/lib/{arch}"]
    return [Path(d) for d in dirs]


def find_tcmalloc(env: dict) -> Path | None:
    """The first tcmalloc in ``library_dirs`` (None where there is none)."""
    for d in library_dirs(env):
        for name in NAMES:
            if (d / name).is_file():
                return d / name
    return None


def _resolves(entry: str, env: dict) -> bool:
    """Whether the dynamic loader finds LD_PRELOAD's ``entry``: a path, a file there (one with the loader's ``$``
    tokens: found); a bare name, a file of that name in LD_LIBRARY_PATH's folders, ``library_dirs``, this Python's
    library folders (its runpath) or the loader's cache (``ldconfig -p``; where that cannot be read, taken as
    found)."""
    if "$" in entry:  # the loader's own tokens ($LIB, $PLATFORM, $ORIGIN): its to expand, taken as found
        return True
    if "/" in entry:
        return Path(entry).is_file()
    dirs = [Path(d) for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + library_dirs(env)
    dirs += [Path(sys.prefix) / "lib", Path(sysconfig.get_config_var("LIBDIR") or "/usr/lib")]  # the runpath's
    if any((d / entry).is_file() for d in [*dirs, Path("/lib"), Path("/lib64")]):
        return True
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10,
                               env={**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/sbin:/usr/sbin"}).stdout
    except (OSError, subprocess.SubprocessError):
        return True
    return not cache or any(line.strip().split(" ")[0] == entry for line in cache.splitlines())


def allocator_env(choice: str, env: dict) -> dict:
    """What the ranks' environment gets for ``launch.allocator`` ``choice``: ``LD_PRELOAD`` with tcmalloc (``auto``
    where it is found, ``tcmalloc``: an error where it is not), else (``glibc``, or ``auto`` without tcmalloc,
    which says so once) huge pages (a rank whose tensors span its part returns freed blocks itself:
    ``runtime/freed_memory``). An allocator already in ``LD_PRELOAD`` stays."""
    if choice not in CHOICES:
        raise SylvieError(f"launch.allocator {choice!r}: choose one of {', '.join(CHOICES)}")
    preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p]
    missing = [p for p in preload if not _resolves(p, env)] if choice != "glibc" else []
    if missing:
        raise SylvieError(f"launch.allocator {choice}: LD_PRELOAD names {', '.join(missing)}, which the loader "
                          f"cannot find: every rank would say so and run with glibc's malloc; correct LD_PRELOAD "
                          f"or unset it (sylvie preloads tcmalloc itself where it is installed)")
    if choice != "glibc" and any(name in Path(p).name for p in preload for name in PRELOADED):
        log.debug(f"launch.allocator {choice}: LD_PRELOAD already holds an allocator ({env['LD_PRELOAD']}); kept")
        return {}
    found = find_tcmalloc(env) if choice != "glibc" else None
    if found is not None:
        return {"LD_PRELOAD": ":".join([str(found), *preload])}
    if choice == "tcmalloc":
        raise SylvieError(f"launch.allocator tcmalloc: no {' or '.join(NAMES[:2])} in "
                          f"{', '.join(map(str, library_dirs(env)))}; install it ({INSTALL}) or set "
                          f"launch.allocator to auto or glibc")
    if choice == "auto":
        log.warning(f"sylvie launch: tcmalloc is not installed, so the ranks use glibc's malloc (freed blocks "
                    f"returned, transparent huge pages): full-graph epochs 1.1-1.4x slower on the products preset; "
                    f"for tcmalloc: {INSTALL}")
    return {HUGE_PAGES: env.get(HUGE_PAGES, "1")}
