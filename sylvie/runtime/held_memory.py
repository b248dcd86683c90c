"""The memory of a rank whose steps allocate blocks of its part's size (full-graph training and partition-parallel
evaluation): planned once, then held across epochs, so a steady epoch takes no memory from the system and faults no
page in.

A full-graph step allocates the same tensors every epoch: layer inputs and outputs, dropout results, halo rows,
the codec's buffers, gradients, each spanning the rank's part. Given back to the system when freed
(``freed_memory``: glibc's 1 MB threshold), each is faulted in afresh, 4 KB at a time, every epoch: on the 50K-node
graph in 4 parts, GraphSAGE 3 x 256 spent 40% of its epoch on it. Kept in glibc's heap instead (its own threshold),
blocks of different sizes fragment it (a rank's peak RSS 780-870 MB against 615), and blocks above 32 MB, every
tensor of a products-sized part, still go back. So a rank replaces PyTorch's CPU allocator with one that knows the
steps (``held_blocks.cpp``): the memory a step needs is known after one step of its kind, which is recorded; every
block of ``MIN_BYTES`` or more that later steps of that kind take then has its place in one arena, packed so that
blocks alive at the same time never share bytes, its pages faulted in once. A trainer marks its steps with
``step(kind)``. Blocks taken outside a step are held when freed and handed back for the next request of their size;
what is held never takes the process past the most it ever asked for at once.

The allocator is C++ (PyTorch's allocator interface is), compiled on first use with the C++ compiler, against the
installed torch's headers, into the user's cache (``~/.cache/sylvie``, or ``$XDG_CACHE_HOME``), once per torch
version and source (about 5 s). Without a compiler a rank says so once and returns freed memory as before
(``freed_memory``). ``SYLVIE_CPU_MEMORY`` chooses: ``hold`` (the default), ``return`` (give every freed block of 1 MB
or more back at once, as before) or ``glibc`` (glibc's own thresholds). A CUDA rank's tensors are the CUDA caching
allocator's; this one serves its CPU tensors.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sylvie.errors import SylvieError
from sylvie.runtime.freed_memory import THRESHOLD, return_freed_memory

SOURCE = Path(__file__).with_name("held_blocks.cpp")
MIN_BYTES = THRESHOLD  # blocks below it stay with glibc's heap (which gives back what is above 1 MB)
POLICIES = ("hold", "return", "glibc")
ENV = "SYLVIE_CPU_MEMORY"
BUILD_TIMEOUT_S = 300

_library: ctypes.CDLL | None = None


@dataclass(frozen=True)
class HeldCounters:
    """The allocator's counts since it was installed: requests of ``MIN_BYTES`` or more served from a step's plan
    (``planned``), from held blocks (``hits``) or from the system (``misses``); bytes of the arena, of the other
    blocks in use and of those held; bytes the requests in use asked for and the most ever at once; steps recorded,
    re-planned (a block lived longer than planned) and that left their plan (other requests than recorded);
    requests that waited for their planned bytes; the largest plan's least bytes (the most its blocks are alive with
    at once: no arena can be smaller)."""
    planned: int = 0
    hits: int = 0
    misses: int = 0
    arena: int = 0
    in_use: int = 0
    held: int = 0
    asked: int = 0
    peak_asked: int = 0
    recorded: int = 0
    replanned: int = 0
    left: int = 0
    waits: int = 0
    least: int = 0


def policy() -> str:
    """``SYLVIE_CPU_MEMORY``, checked (``hold`` when unset)."""
    value = os.environ.get(ENV, "hold").strip() or "hold"
    if value not in POLICIES:
        raise SylvieError(f"{ENV}={value!r}: choose one of {', '.join(POLICIES)} (hold: blocks of a part's size "
                          f"are held across epochs; return: freed memory goes back at once; glibc: its own "
                          f"thresholds)")
    return value


def manage_rank_memory() -> str:
    """Apply ``SYLVIE_CPU_MEMORY`` to this process (a rank whose largest tensors span its part); returns what is in
    effect: ``hold``, ``return`` (also when holding was asked for but the allocator could not be built: it says why
    on stderr) or ``glibc``."""
    chosen = policy()
    if chosen == "glibc":
        return chosen
    return_freed_memory()  # small blocks, and every block when nothing is held
    if chosen == "hold":
        try:
            hold_blocks()
        except SylvieError as e:
            print(f"sylvie: {e}; freed memory goes back to the system instead (each epoch faults its blocks in "
                  f"again)", file=sys.stderr, flush=True)
            return "return"
    return chosen


def hold_blocks(min_bytes: int = MIN_BYTES) -> None:
    """Install the held-block allocator as PyTorch's CPU allocator (once per process); raises ``SylvieError``
    when it cannot be built."""
    _load().sylvie_hold_blocks(ctypes.c_uint64(min_bytes))


def counters() -> HeldCounters:
    """The allocator's counts (zeros where it is not installed)."""
    if _library is None:
        return HeldCounters()
    out = (ctypes.c_uint64 * len(dataclasses.fields(HeldCounters)))()
    _library.sylvie_held_counters(out)
    return HeldCounters(*[int(v) for v in out])


@contextlib.contextmanager
def step(kind: int):
    """A step of ``kind`` (a number; steps of one kind allocate alike, e.g. a training step in one exchange mode;
    negative: a step not to be planned, e.g. one whose sizes change every time): its blocks follow the kind's plan,
    or are recorded to make it. Nothing where the allocator is not installed."""
    if _library is None:
        yield
        return
    _library.sylvie_step_begin(ctypes.c_int64(kind))
    try:
        yield
    finally:
        _library.sylvie_step_end()


def _load() -> ctypes.CDLL:
    global _library
    if _library is None:
        path = _built()
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise SylvieError(f"cannot load the held-block allocator {path}: {e}") from e
        lib.sylvie_hold_blocks.restype = ctypes.c_int
        lib.sylvie_held_counters.restype = None
        lib.sylvie_step_begin.restype = None
        lib.sylvie_step_end.restype = None
        _library = lib
    return _library


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sylvie"


def _built() -> Path:
    """The compiled allocator for this torch and source, built if missing (ranks starting together wait on a lock
    for the one that builds it)."""
    import torch

    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    torch_dir = Path(torch.__file__).parent  # (each environment's own: the library links to its torch)
    key = hashlib.sha256(SOURCE.read_bytes() + str(torch_dir).encode() + torch.__version__.encode()
                         + sys.version.encode()).hexdigest()[:16]
    out = _cache_dir() / f"held_blocks-{key}.so"
    if out.exists():
        return out
    if compiler is None:
        raise SylvieError("no C++ compiler (c++ or g++; or set CXX) to build the held-block allocator")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "held_blocks.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():  # built by another rank meanwhile
            return out
        abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            partial = Path(tmp) / out.name
            cmd = [compiler, "-O2", "-std=c++17", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                   "-I", str(torch_dir / "include"), str(SOURCE), "-o", str(partial),
                   "-L", str(torch_dir / "lib"), "-lc10", f"-Wl,-rpath,{torch_dir / 'lib'}"]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise SylvieError(f"building the held-block allocator ({compiler}) failed: {e}") from e
            if done.returncode != 0:
                raise SylvieError(f"building the held-block allocator failed ({' '.join(cmd)}):\n"
                                  f"{done.stderr.strip()[-2000:]}")
            os.replace(partial, out)
    return out
