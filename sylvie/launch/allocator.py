"""The memory allocator of a run's ranks (``launch.allocator``): tcmalloc preloaded where it is installed, as
PyTorch's own CPU launcher preloads it (``python -m torch.backends.xeon.run_cpu --enable-tcmalloc``), else glibc's
malloc with freed blocks of 1 MB or more handed back at once and PyTorch's transparent huge pages
(``THP_MEM_ALLOC_ENABLE=1``), so that such a block faults in 2 MB at a time rather than 4 KB.

A full-graph rank allocates the same part-sized tensors every epoch; glibc alone either keeps freed blocks in a heap
they fragment (its own thresholds: a rank's peak up to 1.35x) or returns them and faults every page in again the
next epoch. Measured side by side on the products preset, 4 ranks, GraphSAGE 3 x 64 (``benchmarks/allocators.py``;
the table in ``benchmarks/README.md``) against the held-block allocator the ranks had before (a replacement of
PyTorch's CPU allocator that planned each step's blocks, ~930 lines of C++ and Python built with g++ at run time;
removed), mimalloc, jemalloc (PyTorch's settings), glibc and huge pages: tcmalloc's steady epoch was 0.90-1.04x the
held-block allocator's at 1/10 scale and 0.88-0.90x at full size (the fastest of all at every row but one, within 4%
there), with a rank's peak 1.02-1.03x at 1/10 and 1.17-1.19x at full size (it keeps more freed memory; at full size
jemalloc and the fallback below kept the held-block allocator's peak, at 1.04x and 1.18x its time, and at 1/10
jemalloc took 1.4x). The fallback, huge pages with
freed blocks returned, costs 1.1-1.4x tcmalloc's time at the held-block allocator's peak; ``glibc`` asks for it where
memory, not time, is short.

Where the library is looked for: PyTorch's launcher's folders (``$CONDA_PREFIX/lib``, ``$VIRTUAL_ENV/lib``,
``~/.local/lib``, ``/usr/local/lib``, ``/usr/local/lib64``, ``/usr/lib``, ``/usr/lib64``) and the system's
multiarch folders (Debian's ``/usr/lib/x86_64-linux-gnu``: ``libtcmalloc-minimal4``, which ``make install``
installs; conda-forge: ``gperftools``, in ``environment.yml``), under ``libtcmalloc.so`` or
``libtcmalloc_minimal.so`` (also with their ``.4``). An allocator the user preloads already (``LD_PRELOAD`` naming
tcmalloc, jemalloc or mimalloc) is left as it is.
"""
from __future__ import annotations

import logging
import os
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


def allocator_env(choice: str, env: dict) -> dict:
    """What the ranks' environment gets for ``launch.allocator`` ``choice``: ``LD_PRELOAD`` with tcmalloc (``auto``
    where it is found, ``tcmalloc``: an error where it is not), else (``glibc``, or ``auto`` without tcmalloc,
    which says so once) huge pages (a rank whose tensors span its part returns freed blocks itself:
    ``runtime/freed_memory``). An allocator already in ``LD_PRELOAD`` stays."""
    if choice not in CHOICES:
        raise SylvieError(f"launch.allocator {choice!r}: choose one of {', '.join(CHOICES)}")
    preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p]
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
