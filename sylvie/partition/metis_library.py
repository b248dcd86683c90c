"""METIS's own ``METIS_PartGraphKway``, called through ctypes in the METIS library that the pymetis wheel ships.

Why not ``pymetis.part_graph``: pymetis (2025.2) passes one balance constraint per vertex to METIS (``ncon`` = 1), so
``ncon`` weights per vertex handed to it flattened are read as the weights of ``ncon`` times as many vertices (vertex
v weighed whatever constraint ``v mod ncon`` of vertex ``v div ncon`` was). The library inside its extension module
exports METIS's C API, which takes ``ncon`` and a load-imbalance tolerance per constraint (``ubvec``). Its ``idx_t``
is 64 bits wide (checked at load: ``METIS_SetDefaultOptions`` fills ``METIS_NOPTIONS`` 8-byte slots), its
``real_t`` 32 bits (METIS's default; a tolerance read at the wrong width would not hold, and
tests/test_metis_library.py checks that it holds). The arrays go to METIS as they are: no copy of the graph.
"""
from __future__ import annotations

import ctypes
import glob
import os
from functools import cache

import numpy as np

from sylvie.errors import SylvieError

METIS_NOPTIONS = 40
METIS_OK = 1
_ERRORS = {-2: "erroneous input or options", -3: "out of memory", -4: "an error"}
# positions in METIS's options array (metis.h, METIS 5.1: enum moptions_et)
OPTION_SEED = 8
OPTION_NUMBERING = 17
IDX = np.int64
REAL = np.float32


@cache
def _library() -> ctypes.CDLL:
    import pymetis

    found = sorted(glob.glob(os.path.join(os.path.dirname(pymetis.__file__), "_internal*.so")))
    if not found:
        raise SylvieError(f"no METIS library in {os.path.dirname(pymetis.__file__)} (pymetis's _internal*.so); "
                          f"reinstall pymetis (`pip install --force-reinstall pymetis`)")
    lib = ctypes.CDLL(found[0])
    for name in ("METIS_PartGraphKway", "METIS_SetDefaultOptions"):
        if not hasattr(lib, name):
            raise SylvieError(f"{found[0]} does not export {name}: this pymetis does not ship METIS 5; use "
                              f"pymetis 2023 or later")
    options = np.zeros(METIS_NOPTIONS, dtype=IDX)
    lib.METIS_SetDefaultOptions(_ptr(options))
    if not (options == -1).all():  # a 32-bit idx_t fills only the first half of the 8-byte slots
        raise SylvieError(f"{found[0]}: METIS is built with a 32-bit idx_t; sylvie needs the 64-bit build that "
                          f"the pymetis wheels ship")
    return lib


def _ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _idx(a: np.ndarray, name: str) -> np.ndarray:
    if a.dtype != IDX or not a.flags.c_contiguous:
        raise TypeError(f"METIS input {name}: expected a contiguous int64 array, got {a.dtype}")
    return a


def part_graph_kway(xadj: np.ndarray, adjncy: np.ndarray, parts: int, vweights: np.ndarray | None = None,
                    tolerance: np.ndarray | float = 1.03, seed: int = 0) -> tuple[np.ndarray, int]:
    """METIS k-way partition of the undirected graph in CSR (``xadj``, ``adjncy``: int64, symmetric, no loops) into
    ``parts`` parts: (part of every vertex, int64; edges cut). ``vweights``: int64 ``[n, ncon]`` (or ``[n]``),
    ``ncon`` balance constraints per vertex, each part's sum of constraint c kept within ``tolerance[c]`` times
    the mean (METIS's ``ubvec``; ``tolerance`` a number: the same for every constraint)."""
    n = xadj.shape[0] - 1
    _idx(xadj, "xadj")
    _idx(adjncy, "adjncy")
    if vweights is not None:
        vweights = vweights.reshape(n, -1)
        ncon = vweights.shape[1]
        vweights = _idx(np.ascontiguousarray(vweights), "vweights")
        if (vweights < 0).any():
            raise ValueError("METIS vertex weights must be >= 0")
    else:
        ncon = 1
    ubvec = np.broadcast_to(np.asarray(tolerance, dtype=REAL), (ncon,)).copy()
    if (ubvec <= 1.0).any():
        raise ValueError(f"METIS tolerances must be > 1 (1.03: 3% above the mean), got {ubvec.tolist()}")
    part = np.zeros(n, dtype=IDX)
    if parts == 1 or n == 0:
        return part, 0
    options = np.full(METIS_NOPTIONS, -1, dtype=IDX)
    options[OPTION_SEED] = seed
    options[OPTION_NUMBERING] = 0
    nvtxs, ncon_, nparts = (np.array([v], dtype=IDX) for v in (n, ncon, parts))
    objval = np.zeros(1, dtype=IDX)
    rc = _library().METIS_PartGraphKway(_ptr(nvtxs), _ptr(ncon_), _ptr(xadj), _ptr(adjncy), _ptr(vweights), None,
                                        None, _ptr(nparts), None, _ptr(ubvec), _ptr(options), _ptr(objval),
                                        _ptr(part))
    if rc != METIS_OK:
        raise SylvieError(f"METIS_PartGraphKway failed ({_ERRORS.get(rc, rc)}) on {n} vertices, {adjncy.shape[0]} "
                          f"adjacency entries, {parts} parts, {ncon} constraints")
    return part, int(objval[0])
