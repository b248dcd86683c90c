"""Planetoid citation graphs (Cora, CiteSeer, PubMed): our own reader of the Planetoid files, no DGL.

The files are Python 2 pickles, unpickled with an allowlist of exactly the classes they hold. The graph built is the
one DGL 1.1.3's citation datasets give, array for array (the tests' reference), with Kipf and Welling's split. A
missing dataset is downloaded, if allowed, from DGL's server into the folder DGL would use.
"""
from __future__ import annotations

import collections
import hashlib
import http.client
import io
import logging
import operator
import os
import pickle
import re
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sylvie.atomic import file_sha256
from sylvie.data.graph import Graph, remove_self_loops
from sylvie.errors import SylvieError

log = logging.getLogger(__name__)

NAMES = ("cora", "citeseer", "pubmed")
SUFFIXES = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
PICKLED = SUFFIXES[:-1]
# DGL's data server (what dgl.data.utils._get_dgl_url gives without DGL_REPO set); DGL's Cora is "cora_v2", Kipf's
# GCN preprocessing of the Planetoid files, the ones embedded under data/embedded/planetoid.
URL = "https://data.dgl.ai/dataset/{internal}.zip"
VAL_NODES = 500  # the validation split: the 500 nodes after the training nodes (Kipf and Welling)
_PICKLE_NAME = re.compile(r"ind\.(cora|cora_v2|citeseer|pubmed)\.(x|y|tx|ty|allx|ally|graph)")


def _layout(name: str) -> tuple[str, str, str]:
    """(DGL's internal dataset name, the URL of its zip, the folder DGL extracts it into under raw_dir)."""
    internal = "cora_v2" if name == "cora" else name
    url = URL.format(internal=internal)
    return internal, url, f"{internal}_{hashlib.sha1(url.encode()).hexdigest()[:8]}"


def _one_line(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())


# --- reading the files --------------------------------------------------------------------------------------------

_RECONSTRUCT = np.ndarray.__reduce__(np.empty(0))[0]  # numpy's _reconstruct and scalar, wherever this numpy keeps them
_SCALAR = np.int64(0).__reduce__()[0]
# What the Planetoid pickles name (Python 2's module paths as written in the files, and today's), and nothing else.
_ALLOWED = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    **{(m, "_reconstruct"): _RECONSTRUCT for m in ("numpy.core.multiarray", "numpy._core.multiarray")},
    **{(m, "scalar"): _SCALAR for m in ("numpy.core.multiarray", "numpy._core.multiarray")},
    **{(m, "csr_matrix"): sp.csr_matrix for m in ("scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse")},
    ("collections", "defaultdict"): collections.defaultdict,
    **{(m, "list"): list for m in ("__builtin__", "builtins")},
}


class _Refused(pickle.UnpicklingError):
    pass


class _PlanetoidUnpickler(pickle.Unpickler):
    """Unpickles only numpy arrays, scipy CSR matrices and a defaultdict of lists: a pickle naming any other class or
    function (which unpickling would import and call) is refused before it is loaded."""

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise _Refused(f"it names {module}.{name}, which a Planetoid file never holds (only numpy arrays, scipy "
                           f"CSR matrices and a dict of lists); refusing to unpickle it") from None


def _unpickle(path: Path):
    if not _PICKLE_NAME.fullmatch(path.name):  # a guard: only the Planetoid files themselves are ever unpickled
        raise SylvieError(f"{path}: not a Planetoid file name (ind.<name>.<{'|'.join(PICKLED)}>); not unpickled")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SylvieError(f"{path}: could not be read ({_one_line(e)})") from e
    try:
        return _PlanetoidUnpickler(io.BytesIO(data), encoding="latin1").load()  # pickled by Python 2
    except _Refused as e:
        raise SylvieError(f"{path}: {e}") from None
    except Exception as e:  # a truncated or corrupt pickle raises anything from EOFError to ValueError
        raise SylvieError(f"{path}: not a readable Planetoid pickle ({_one_line(e)}); the file is truncated or "
                          f"corrupt: restore it, or delete the folder's ind.* files to download them again") from None


def _expect(path: Path, what: str, ok: bool, got: str) -> None:
    if not ok:
        raise SylvieError(f"{path}: holds {got}, expected {what}; not a Planetoid file: restore it")


def _describe(obj) -> str:
    package = type(obj).__module__.partition(".")[0]
    kind = type(obj).__qualname__ if package == "builtins" else f"{package} {type(obj).__qualname__}"
    shape = getattr(obj, "shape", None)
    return (f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
            + (f" of shape {shape} ({getattr(obj, 'dtype', '')})" if shape is not None else ""))


def _read_features(path: Path):
    obj = _unpickle(path)
    _expect(path, "a scipy sparse matrix of feature rows", sp.issparse(obj) and obj.ndim == 2
            and obj.dtype.kind in "fiub", _describe(obj))
    try:
        obj.check_format(full_check=True)  # indices in range and ordered pointers, before scipy's C code reads them
    except Exception as e:
        raise SylvieError(f"{path}: a corrupt sparse matrix ({_one_line(e)}); restore the file") from None
    return obj


def _read_labels(path: Path) -> np.ndarray:
    obj = _unpickle(path)
    _expect(path, "a numpy matrix of one-hot label rows", isinstance(obj, np.ndarray) and obj.ndim == 2
            and obj.dtype.kind in "fiub", _describe(obj))
    return obj


def _read_adjacency(path: Path) -> dict[int, list[int]]:
    obj = _unpickle(path)
    _expect(path, "a dict of adjacency lists {node: [neighbours]}", isinstance(obj, dict), _describe(obj))
    adjacency = {}
    try:
        for node, neighbours in obj.items():
            _expect(path, "a dict of adjacency lists {node: [neighbours]}", isinstance(neighbours, list),
                    f"the entry {node!r}: {_describe(neighbours)}")
            adjacency[_node_id(node)] = [_node_id(v) for v in neighbours]
    except TypeError as e:
        raise SylvieError(f"{path}: a node id is not an integer ({e}); not a Planetoid graph file: restore it") \
            from None
    return adjacency


def _node_id(v) -> int:
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{v!r}")
    return operator.index(v)  # int and numpy integers; anything else raises TypeError


def _read_test_index(path: Path) -> list[int]:
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SylvieError(f"{path}: could not be read as text ({_one_line(e)}); restore the file") from e
    index = []
    for i, line in enumerate(lines, 1):
        try:
            index.append(int(line.strip()))
        except ValueError:
            raise SylvieError(f"{path}: line {i} is {line.strip()[:40]!r}, not a node id; restore the file") from None
    return index


# --- what DGL 1.1.3's CitationGraphDataset.process does with them ------------------------------------------------

def _row_normalise(mx):
    """DGL's ``_normalize`` (dgl/data/citation_graph.py), scipy call for scipy call, so the float rounding is the
    same: each row divided by its sum (rows summing to 0 left at 0)."""
    rowsum = np.asarray(mx.sum(1))
    mask = np.equal(rowsum, 0.0).flatten()
    rowsum[mask] = np.nan
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[mask] = 0.0
    return sp.diags(r_inv).dot(mx)


def _symmetric_edges(adjacency: dict[int, list[int]]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Both directions of every listed edge, once each, in the order DGL's graph has them: DGL builds
    ``nx.DiGraph(nx.from_dict_of_lists(adjacency))`` and takes its edges as networkx lists them, that is node by
    node (the dict's keys in order, then nodes first seen as a neighbour), and for each node its neighbours in the
    order they were first joined to it, from either end. Returns (src, dst, the nodes in that order)."""
    adj: dict[int, dict[int, None]] = {u: {} for u in adjacency}
    for u, neighbours in adjacency.items():
        for v in neighbours:
            if v not in adj:
                adj[v] = {}
            adj[u][v] = None  # a dict keeps the place of a key set again: its first
            adj[v][u] = None
    m = sum(len(nbrs) for nbrs in adj.values())
    src = np.fromiter((u for u, nbrs in adj.items() for _ in nbrs), dtype=np.int64, count=m)
    dst = np.fromiter((v for nbrs in adj.values() for v in nbrs), dtype=np.int64, count=m)
    return src, dst, list(adj)


def read_planetoid(name: str, files: dict[str, Path]) -> Graph:
    """The canonical graph of the Planetoid files ``files`` (suffix -> path) of dataset ``name``."""
    x, tx, allx = (_read_features(files[s]) for s in ("x", "tx", "allx"))
    y, ty, ally = (_read_labels(files[s]) for s in ("y", "ty", "ally"))
    adjacency = _read_adjacency(files["graph"])
    test_idx_reorder = _read_test_index(files["test.index"])
    where = files["x"].parent

    if not test_idx_reorder:
        raise SylvieError(f"{files['test.index']}: empty; it lists the test nodes: restore the file")
    dims = {files[s].name: m.shape[1] for s, m in (("x", x), ("tx", tx), ("allx", allx))}
    if len(set(dims.values())) > 1:
        raise SylvieError(f"{where}: the feature files differ in width ({dims}); they are not of one dataset")
    classes = {files[s].name: m.shape[1] for s, m in (("y", y), ("ty", ty), ("ally", ally))}
    if len(set(classes.values())) > 1:
        raise SylvieError(f"{where}: the label files differ in width ({classes}); they are not of one dataset")
    for (fs, f), (ls, lab) in ((("tx", tx), ("ty", ty)), (("allx", allx), ("ally", ally))):
        if f.shape[0] != lab.shape[0]:
            raise SylvieError(f"{where}: {files[fs].name} has {f.shape[0]} rows but {files[ls].name} "
                              f"{lab.shape[0]}; they are not of one dataset")
    test_idx_range = np.sort(test_idx_reorder)
    if len(np.unique(test_idx_range)) != len(test_idx_range):
        raise SylvieError(f"{files['test.index']}: lists a node more than once; restore the file")

    if name == "citeseer":
        # DGL's fix of CiteSeer: test nodes missing from tx/ty (isolated nodes) become zero rows in their place
        if test_idx_range[0] < 0 or len(test_idx_range) != tx.shape[0]:
            raise SylvieError(f"{files['test.index']}: lists {len(test_idx_range)} test nodes from "
                              f"{test_idx_range[0]} but {files['tx'].name} has {tx.shape[0]} rows; restore the files")
        test_idx_range_full = range(min(test_idx_reorder), max(test_idx_reorder) + 1)
        tx_extended = sp.lil_matrix((len(test_idx_range_full), x.shape[1]))
        tx_extended[test_idx_range - min(test_idx_range), :] = tx
        tx = tx_extended
        ty_extended = np.zeros((len(test_idx_range_full), y.shape[1]))
        ty_extended[test_idx_range - min(test_idx_range), :] = ty
        ty = ty_extended

    n = allx.shape[0] + tx.shape[0]
    if test_idx_range[0] < 0 or test_idx_range[-1] >= n:
        raise SylvieError(f"{files['test.index']}: test node ids must lie in [0, {n}) (the rows of "
                          f"{files['allx'].name} and {files['tx'].name}), found {test_idx_range[0]}.."
                          f"{test_idx_range[-1]}; restore the file")
    if y.shape[0] < 1 or y.shape[0] + VAL_NODES > n:
        raise SylvieError(f"{files['y'].name}: {y.shape[0]} training nodes and the {VAL_NODES} validation nodes "
                          f"after them need at least {y.shape[0] + VAL_NODES} nodes, the dataset has {n}")

    features = sp.vstack((allx, tx)).tolil()
    features[test_idx_reorder, :] = features[test_idx_range, :]
    onehot_labels = np.vstack((ally, ty))
    onehot_labels[test_idx_reorder, :] = onehot_labels[test_idx_range, :]
    labels = np.argmax(onehot_labels, 1).astype(np.int64)

    src, dst, nodes = _symmetric_edges(adjacency)
    if len(nodes) != n or (n and (min(nodes) != 0 or max(nodes) != n - 1)):
        raise SylvieError(f"{files['graph']}: the graph has {len(nodes)} nodes (ids {min(nodes, default=0)}.."
                          f"{max(nodes, default=-1)}) but the feature files {n} rows; every node 0..{n - 1} must be "
                          f"listed once: restore the files")

    masks = {}
    for split, idx in (("train", np.arange(y.shape[0])), ("val", np.arange(y.shape[0], y.shape[0] + VAL_NODES)),
                       ("test", test_idx_range)):
        masks[split] = np.zeros(n, dtype=bool)
        masks[split][idx] = True

    src, dst, loops = remove_self_loops(src, dst)
    return Graph(
        name=name, src=src, dst=dst,
        features=np.asarray(_row_normalise(features).todense()).astype(np.float32),
        labels=labels,
        train_mask=masks["train"], val_mask=masks["val"], test_mask=masks["test"],
        num_classes=int(onehot_labels.shape[1]),
        info={"self_loops_removed": loops},
    )


# --- finding or downloading the files -----------------------------------------------------------------------------

def _find_raw_files(name: str, raw_dir: Path) -> dict[str, Path] | None:
    """The user's ``ind.<name>.*`` files (original or DGL naming, in raw_dir or the folder DGL downloads into), or
    None if none is there; a set with some files missing is an error naming them."""
    internal, _, folder_name = _layout(name)
    for folder in (raw_dir, raw_dir / folder_name):
        for prefix in (name, internal):
            files = {s: folder / f"ind.{prefix}.{s}" for s in SUFFIXES}
            missing = [p.name for p in files.values() if not p.is_file()]
            if not missing:
                return files
            if len(missing) < len(files):
                raise SylvieError(f"{folder}: Planetoid files incomplete, missing {', '.join(missing)}; restore "
                                  f"{'it' if len(missing) == 1 else 'them'} (all of ind.{prefix}."
                                  f"{{{','.join(SUFFIXES)}}} are needed), or empty the folder to download them again")
    return None


def _verify_checksums(raw_dir: Path, files: dict[str, Path]) -> None:
    sums = raw_dir / "SHA256SUMS"
    if not sums.is_file():
        return
    expected = dict(reversed(line.split()) for line in sums.read_text().splitlines() if line.strip())
    for path in files.values():
        want = expected.get(path.name)
        if want and file_sha256(path) != want:
            raise SylvieError(f"{path}: sha256 does not match {sums}; the raw file is corrupt, restore it "
                              f"(git checkout) or download it again")


def _download(name: str, raw_dir: Path, timeout_s: float) -> dict[str, Path]:
    """Download DGL's zip of dataset ``name`` into ``raw_dir`` and extract its eight files into the folder DGL uses
    (``raw_dir/<internal>_<hash of the URL>``); every network wait gives up after ``timeout_s`` seconds."""
    internal, url, folder_name = _layout(name)
    raw_dir.mkdir(parents=True, exist_ok=True)
    archive = raw_dir / f"{internal}.zip"
    log.info(f"downloading {url}")
    try:
        with tempfile.NamedTemporaryFile(dir=raw_dir, prefix=f".{archive.name}.", delete=False) as part:
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as response:
                    shutil.copyfileobj(response, part)
            except BaseException:
                os.unlink(part.name)
                raise
        os.replace(part.name, archive)
    except (OSError, http.client.HTTPException) as e:  # urllib's errors and timeouts are OSErrors; a cut-off body not
        raise SylvieError(f"{raw_dir}: no ind.{name}.* files there and downloading them from {url} failed "
                          f"({_one_line(e)}; network timeout {timeout_s:g} s); put the Planetoid files in "
                          f"{raw_dir}") from None
    folder = raw_dir / folder_name
    wanted = {f"ind.{internal}.{s}" for s in SUFFIXES}
    try:
        with zipfile.ZipFile(archive) as z:
            members = {m for m in z.namelist() if m in wanted}  # only the eight files, by their exact names
            if members != wanted:
                raise SylvieError(f"{archive}: downloaded from {url} but it lacks {', '.join(sorted(wanted - members))}"
                                  f"; put the Planetoid files in {raw_dir}")
            folder.mkdir(exist_ok=True)
            for member in sorted(members):
                tmp = folder / f".{member}.part"
                with z.open(member) as src, open(tmp, "wb") as out:
                    shutil.copyfileobj(src, out)
                os.replace(tmp, folder / member)
    except (zipfile.BadZipFile, OSError) as e:
        raise SylvieError(f"{archive}: downloaded from {url} but not a readable zip archive ({_one_line(e)}); "
                          f"delete it and rerun, or put the Planetoid files in {raw_dir}") from None
    return {s: folder / f"ind.{internal}.{s}" for s in SUFFIXES}


def load_planetoid(name: str, raw_dir: str | Path, allow_download: bool = True, timeout_s: float = 60) -> Graph:
    """Read Planetoid dataset ``name`` from ``raw_dir`` (files ``ind.<name>.*``, or DGL's ``ind.<internal>.*`` in
    the folder DGL downloads into). If they are not there and ``allow_download`` is set, they are downloaded first
    (DGL's zip of them, from ``URL``), each network wait giving up after ``timeout_s`` seconds."""
    if name not in NAMES:
        raise SylvieError(f"unknown Planetoid dataset '{name}'; choose one of {', '.join(NAMES)}")
    raw_dir = Path(raw_dir)
    files = _find_raw_files(name, raw_dir)
    if files is not None:
        _verify_checksums(raw_dir, files)
    elif allow_download:
        files = _download(name, raw_dir, timeout_s)
    else:
        raise SylvieError(f"{raw_dir}: no Planetoid files ind.{name}.{{{','.join(SUFFIXES)}}}")
    return read_planetoid(name, files)
