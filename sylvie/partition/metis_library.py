"""METIS's own ``METIS_PartGraphKway`` through ctypes: a 32-bit METIS 5 library where one is installed and the graph
fits it, else the 64-bit one inside the pymetis wheel (``SYLVIE_METIS_LIBRARY`` names one).

Why not ``pymetis.part_graph``: it passes one balance constraint per vertex, misreading several. Why 32-bit first:
METIS's memory is made of ``idx_t``s, so it needs half
(``benchmarks/records/2026-11-25_partition-scale_2core-vm.md``). A library's ``idx_t`` and ``real_t`` widths are
probed at load, not assumed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
from dataclasses import dataclass
from functools import cache

import numpy as np

from sylvie.errors import SylvieError

METIS_NOPTIONS = 40
METIS_OK = 1
_ERRORS = {-2: "erroneous input or options", -3: "out of memory", -4: "an error"}
# positions of the options set here in METIS's options array (metis.h: enum moptions_et); METIS 5.2 inserted
# NIPARTS before SEED and ONDISK after it. A 5.2 library is told by the function it added for DGL
OPTIONS = {"5.1": {"seed": 8, "numbering": 17}, "5.2": {"seed": 9, "numbering": 18}}
ADDED_IN_5_2 = "METIS_CacheFriendlyReordering"
REAL = np.float32
ENV = "SYLVIE_METIS_LIBRARY"


@dataclass(frozen=True)
class MetisLibrary:
    """One METIS 5 library found on this machine: its path and the width of its ``idx_t``."""
    path: str
    idx: type  # np.int32 or np.int64: every integer METIS reads or writes
    version: str = "5.1"  # "5.1" or "5.2": where its options are

    @property
    def bits(self) -> int:
        return np.dtype(self.idx).itemsize * 8

    def holds(self, largest: int) -> bool:
        """Whether every integer of a graph, ``largest`` at most (:func:`extent`), fits this library's ``idx_t``."""
        return largest <= np.iinfo(self.idx).max

    def describe(self) -> dict:
        return {"library": os.path.basename(self.path), "version": self.version, "idx_bits": self.bits}

    def cdll(self) -> ctypes.CDLL:
        return _load(self.path)[0]


@cache
def _load(path: str) -> tuple[ctypes.CDLL, type, str]:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise SylvieError(f"{path}: not a loadable METIS library ({e}); install METIS 5 (`apt-get install "
                          f"libmetis5`, `conda install -c conda-forge metis`) or unset {ENV}") from None
    for name in ("METIS_PartGraphKway", "METIS_SetDefaultOptions"):
        if not hasattr(lib, name):
            raise SylvieError(f"{path} does not export {name}: it is not METIS 5")
    slots = np.zeros(METIS_NOPTIONS, dtype=np.int64)
    lib.METIS_SetDefaultOptions(slots.ctypes.data_as(ctypes.c_void_p))
    filled = int((slots == -1).sum())
    if filled not in (METIS_NOPTIONS, METIS_NOPTIONS // 2):
        raise SylvieError(f"{path}: METIS_SetDefaultOptions filled {filled} of {METIS_NOPTIONS} 8-byte slots; "
                          f"neither a 32-bit nor a 64-bit idx_t (not METIS 5.1?)")
    idx = np.int64 if filled == METIS_NOPTIONS else np.int32
    if not _reads_float32_tolerances(lib, idx):
        raise SylvieError(f"{path}: METIS refuses a 1.03 tolerance handed as a 32-bit float: a build with 64-bit "
                          f"floats (real_t), which sylvie does not call; use another METIS or unset {ENV}")
    return lib, idx, "5.2" if hasattr(lib, ADDED_IN_5_2) else "5.1"


def _reads_float32_tolerances(lib: ctypes.CDLL, idx: type) -> bool:
    """Whether ``lib`` reads ``ubvec`` as 32-bit floats (METIS's default ``real_t``): a 4-cycle cut in two with a
    tolerance of 1.03 succeeds; a build with 64-bit floats reads the two float32s as one double of about 0.0095, not
    above 1, and refuses it (METIS_ERROR_INPUT), without reading past the array."""
    xadj, adjncy = np.array([0, 2, 4, 6, 8], dtype=idx), np.array([1, 3, 0, 2, 1, 3, 0, 2], dtype=idx)
    nvtxs, ncon, nparts = (np.array([v], dtype=idx) for v in (4, 1, 2))
    ubvec, objval, part = np.full(2, 1.03, dtype=REAL), np.zeros(1, dtype=idx), np.zeros(4, dtype=idx)
    rc = lib.METIS_PartGraphKway(_ptr(nvtxs), _ptr(ncon), _ptr(xadj), _ptr(adjncy), None, None, None, _ptr(nparts),
                                 None, _ptr(ubvec), None, _ptr(objval), _ptr(part))
    return rc == METIS_OK and sorted(np.bincount(part, minlength=2).tolist()) == [2, 2]


def _candidates() -> list[str]:
    """Where METIS may be: the system's libmetis (ldconfig's, or this Python's prefix: a conda environment), then
    pymetis's extension module, which carries METIS inside it."""
    found = []
    system = ctypes.util.find_library("metis")
    if system:
        found.append(system)
    found += sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmetis.so*")))[:1]
    try:
        import pymetis
        found += sorted(glob.glob(os.path.join(os.path.dirname(pymetis.__file__), "_internal*.so")))[:1]
    except ImportError:
        pass
    return found


def libraries() -> tuple[MetisLibrary, ...]:
    """Every METIS library found, narrowest ``idx_t`` first (``SYLVIE_METIS_LIBRARY``: only that one)."""
    return _libraries(os.environ.get(ENV, ""))


@cache
def _libraries(named: str) -> tuple[MetisLibrary, ...]:
    if named:
        paths = [named]
    else:
        paths, seen = [], set()
        for p in _candidates():
            try:
                _load(p)
            except SylvieError:
                continue  # a library that is not METIS 5 where one may be: the next
            real = os.path.realpath(p)
            if real not in seen:
                seen.add(real)
                paths.append(p)
    found = [MetisLibrary(p, *_load(p)[1:]) for p in paths]
    if not found:
        raise SylvieError("no METIS library found: install pymetis (`pip install pymetis`), or METIS 5 "
                          "(`apt-get install libmetis5`, `conda install -c conda-forge metis`)")
    return tuple(sorted(found, key=lambda lib: lib.bits))


def library_for(largest: int) -> MetisLibrary:
    """The narrowest METIS library whose ``idx_t`` holds ``largest`` (:func:`extent` of the graph)."""
    for lib in libraries():
        if lib.holds(largest):
            return lib
    raise SylvieError(f"the graph's adjacency length or a constraint's sum is {largest}, more than the METIS "
                      f"libraries found ({', '.join(lib.path for lib in libraries())}) hold "
                      f"({np.iinfo(libraries()[-1].idx).max}); install pymetis (64-bit) or unset {ENV}")


def extent(nodes: int, adjncy: np.ndarray, vweights: np.ndarray | None) -> int:
    """The largest integer METIS meets on a graph: its adjacency length (xadj's last offset), its vertex weights'
    length (vertices times constraints: METIS indexes them ``i * ncon + c``), or a constraint's sum over the
    vertices; a library holds the graph if its ``idx_t`` holds this."""
    if vweights is None or vweights.size == 0:
        return max(int(adjncy.shape[0]), nodes)
    return max(int(adjncy.shape[0]), int(vweights.size), int(vweights.reshape(nodes, -1).sum(0).max()))


def _ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def part_graph_kway(xadj: np.ndarray, adjncy: np.ndarray, parts: int, vweights: np.ndarray | None = None,
                    tolerance: np.ndarray | float = 1.03, seed: int = 0,
                    library: MetisLibrary | None = None) -> tuple[np.ndarray, int]:
    """METIS k-way partition of the undirected graph in CSR (``xadj``, ``adjncy``: symmetric, no loops) into
    ``parts`` parts: (part of every vertex, int64; edges cut). ``vweights``: ``[n, ncon]`` (or ``[n]``), ``ncon``
    balance constraints per vertex, each part's sum of constraint c kept within ``tolerance[c]`` times the mean
    (METIS's ``ubvec``; ``tolerance`` a number: the same for every constraint). ``library``: the METIS to call (None:
    :func:`library_for` the graph). Arrays of its ``idx_t`` go to METIS as they are; any other integer arrays are
    copied to it first."""
    n = xadj.shape[0] - 1
    for name, a in (("xadj", xadj), ("adjncy", adjncy)):
        if a.dtype.kind not in "iu":
            raise TypeError(f"METIS input {name}: expected an integer array, got {a.dtype}")
    if vweights is not None:
        vweights = vweights.reshape(n, -1)
        ncon = vweights.shape[1]
        if (vweights < 0).any():
            raise ValueError("METIS vertex weights must be >= 0")
    else:
        ncon = 1
    ubvec = np.broadcast_to(np.asarray(tolerance, dtype=REAL), (ncon,)).copy()
    if (ubvec <= 1.0).any():
        raise ValueError(f"METIS tolerances must be > 1 (1.03: 3% above the mean), got {ubvec.tolist()}")
    if parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64), 0
    largest = extent(n, adjncy, vweights)
    library = library or library_for(largest)
    if not library.holds(largest):
        raise SylvieError(f"{library.path}: its {library.bits}-bit idx_t cannot hold this graph, whose adjacency "
                          f"length or a constraint's sum is {largest}; call a 64-bit METIS (pymetis's)")
    idx = library.idx
    xadj, adjncy = (np.ascontiguousarray(a, dtype=idx) for a in (xadj, adjncy))
    if vweights is not None:
        vweights = np.ascontiguousarray(vweights, dtype=idx)
    part = np.zeros(n, dtype=idx)
    options = np.full(METIS_NOPTIONS, -1, dtype=idx)
    at = OPTIONS[library.version]
    options[at["seed"]] = seed % (np.iinfo(idx).max + 1)  # METIS reads -1 as its default seed: never negative
    options[at["numbering"]] = 0
    nvtxs, ncon_, nparts = (np.array([v], dtype=idx) for v in (n, ncon, parts))
    objval = np.zeros(1, dtype=idx)
    rc = library.cdll().METIS_PartGraphKway(_ptr(nvtxs), _ptr(ncon_), _ptr(xadj), _ptr(adjncy), _ptr(vweights),
                                            None, None, _ptr(nparts), None, _ptr(ubvec), _ptr(options),
                                            _ptr(objval), _ptr(part))
    if rc != METIS_OK:
        raise SylvieError(f"METIS_PartGraphKway ({library.path}) failed ({_ERRORS.get(rc, rc)}) on {n} vertices, "
                          f"{adjncy.shape[0]} adjacency entries, {parts} parts, {ncon} constraints")
    return part.astype(np.int64, copy=False), int(objval[0])
