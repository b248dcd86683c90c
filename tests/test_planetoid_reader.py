"""Our Planetoid reader (sylvie/data/planetoid.py, no DGL) against DGL 1.1.3's own loaders, the reader it replaces:
on the embedded Cora and on small synthetic Planetoid-format sets (one per DGL loader, the CiteSeer one with gaps in
its test ids) every array is equal, bit for bit, and so is the fingerprint; bad files are one-line errors naming the
file; a missing dataset is downloaded from a loopback server as DGL did."""
import functools
import hashlib
import http.server
import io
import logging
import os
import pickle
import shutil
import socket
import threading
import zipfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from support.commands import CORA_RAW

from sylvie.cli import main
from sylvie.data import planetoid
from sylvie.data.graph import Graph, remove_self_loops
from sylvie.errors import SylvieError

# The embedded Cora's fingerprint as the DGL-based loader gave it (sylvie/data/planetoid.py before this reader, at
# aca673e; tests/test_planetoid_without_dgl.py pins it too).
CORA_FINGERPRINT = "e66bb23fa7ad56e0f9453bce2d0ee1706c0989778b9a4923b1dcb01b62d8c71b"
DGL_CLASSES = {"cora": "CoraGraphDataset", "citeseer": "CiteseerGraphDataset", "pubmed": "PubmedGraphDataset"}


def dgl_reference(name: str, files: dict, scratch: Path) -> Graph:
    """What the DGL-based loader made of ``files``: DGL's loader run on a copy named and placed as DGL wants it,
    its graph taken as that loader took it (self-loops dropped, the arrays cast as it cast them)."""
    import dgl.data

    internal, _, folder = planetoid._layout(name)
    target = scratch / folder
    target.mkdir(parents=True)
    for suffix, path in files.items():
        shutil.copyfile(path, target / f"ind.{internal}.{suffix}")
    ds = getattr(dgl.data, DGL_CLASSES[name])(raw_dir=str(scratch), verbose=False)
    g = ds[0]
    src, dst = (t.numpy().astype(np.int64) for t in g.edges())
    src, dst, loops = remove_self_loops(src, dst)
    return Graph(name=name, src=src, dst=dst, features=g.ndata["feat"].numpy().astype(np.float32),
                 labels=g.ndata["label"].numpy().astype(np.int64),
                 train_mask=g.ndata["train_mask"].numpy().astype(bool),
                 val_mask=g.ndata["val_mask"].numpy().astype(bool),
                 test_mask=g.ndata["test_mask"].numpy().astype(bool),
                 num_classes=int(ds.num_classes), info={"self_loops_removed": loops})


def assert_same_graph(ours: Graph, ref: Graph) -> None:
    """Every array equal with its dtype; the features bit for bit (their float32 bit patterns)."""
    for field in ("src", "dst", "labels", "train_mask", "val_mask", "test_mask"):
        a, b = getattr(ours, field), getattr(ref, field)
        assert a.dtype == b.dtype and a.shape == b.shape, field
        np.testing.assert_array_equal(a, b, err_msg=field)
    assert ours.features.dtype == ref.features.dtype == np.float32
    assert ours.features.shape == ref.features.shape
    assert np.array_equal(ours.features.view(np.uint32), ref.features.view(np.uint32))
    assert ours.num_classes == ref.num_classes and ours.info == ref.info
    assert ours.fingerprint() == ref.fingerprint()


def cora_files(folder: Path = CORA_RAW) -> dict:
    return {s: folder / f"ind.cora.{s}" for s in planetoid.SUFFIXES}


@pytest.fixture(autouse=True)
def _dgl_default_server(monkeypatch):
    monkeypatch.delenv("DGL_REPO", raising=False)  # DGL's folder names hash its URL, which DGL_REPO changes


@pytest.mark.unit
def test_embedded_cora_is_what_dgl_read(tmp_path):
    ours = planetoid.load_planetoid("cora", CORA_RAW, allow_download=False)
    ref = dgl_reference("cora", cora_files(), tmp_path)
    assert_same_graph(ours, ref)
    assert ours.fingerprint() == CORA_FINGERPRINT
    assert (ours.num_nodes, ours.num_edges, ours.features.shape[1], ours.num_classes) == (2708, 10556, 1433, 7)
    assert (ours.train_mask.sum(), ours.val_mask.sum(), ours.test_mask.sum()) == (140, 500, 1000)
    # Cora's features are 0/1 words: a row's sum is an integer, and each entry of the row 1/sum in float32, exactly
    rows = ours.features[ours.features.sum(1) > 0]
    assert all(np.unique(r[r > 0]).size == 1 for r in rows[:50])


@pytest.mark.unit
def test_the_url_and_folder_are_dgls():
    from dgl.data.citation_graph import CitationGraphDataset
    from dgl.data.utils import _get_dgl_url

    for name in planetoid.NAMES:
        internal, url, folder = planetoid._layout(name)
        dgl_url = _get_dgl_url(CitationGraphDataset._urls[internal])
        assert url == dgl_url
        assert folder == f"{internal}_{hashlib.sha1(dgl_url.encode()).hexdigest()[:8]}"


# --- synthetic Planetoid files --------------------------------------------------------------------------------------

def write_planetoid(folder: Path, prefix: str, seed: int, *, gaps: bool = False, dtype=np.float32) -> dict:
    """A small dataset in the Planetoid layout: allx/ally the first nodes, tx/ty the test nodes (test.index in shuffled
    order), features as sparse TF-IDF-like floats (``dtype``) with some all-zero rows, the graph a defaultdict of
    lists with keys in shuffled order, edges listed from one end only or from both, repeated, and self-loops. With
    ``gaps`` (CiteSeer's case) some test ids in the test range are missing from test.index and tx/ty (isolated nodes
    the graph still lists)."""
    rng = np.random.default_rng(seed)
    n_all, n_test_range, d, c, n_train = 560, 130, 37, 5, 25
    n = n_all + n_test_range
    test_ids = np.arange(n_all, n)
    if gaps:
        test_ids = np.sort(rng.choice(test_ids, size=n_test_range - 9, replace=False))
        test_ids[[0, -1]] = n_all, n - 1  # DGL's CiteSeer fix spans min..max of the test ids
        test_ids = np.unique(test_ids)

    def feats(rows):
        m = sp.random(rows, d, density=0.15, format="csr", random_state=rng, dtype=np.float64)
        m.data = (m.data * 7).astype(dtype)
        m = m.astype(dtype)
        keep = np.ones(rows, dtype=dtype)
        keep[rng.choice(rows, size=3, replace=False)] = 0  # rows without words: DGL leaves them 0
        m = sp.csr_matrix(sp.diags(keep) @ m, dtype=dtype)
        m.eliminate_zeros()
        return m

    def onehot(rows):
        return np.eye(c, dtype=np.int32)[rng.integers(0, c, rows)]

    allx, ally = feats(n_all), onehot(n_all)
    tx, ty = feats(len(test_ids)), onehot(len(test_ids))
    graph = defaultdict(list)
    for u in rng.permutation(n):
        graph[int(u)] = []
    for _ in range(3 * n):
        u, v = (int(i) for i in rng.integers(0, n, 2))
        graph[u].append(v)
        if rng.random() < 0.4:
            graph[v].append(u)  # both ends list it, as in the real files
        if rng.random() < 0.05:
            graph[u].append(v)  # listed twice
    for u in rng.choice(n, size=6, replace=False):
        graph[int(u)].append(int(u))  # self-loops
    if gaps:
        for missing in sorted(set(range(n_all, n)) - set(test_ids.tolist())):
            graph[missing] = []  # an isolated node: CiteSeer's missing test rows
    objects = {"x": allx[:n_train], "y": ally[:n_train], "tx": tx, "ty": ty, "allx": allx, "ally": ally,
               "graph": graph}
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for suffix, obj in objects.items():
        # protocol 4, not Python 2's: a Python 3 pickle of bytes at protocol 2 calls _codecs.encode, which the
        # reader rightly refuses (the real files hold Python 2 str, read as latin1: the embedded Cora checks that)
        files[suffix] = folder / f"ind.{prefix}.{suffix}"
        files[suffix].write_bytes(pickle.dumps(obj, protocol=4))
    files["test.index"] = folder / f"ind.{prefix}.test.index"
    files["test.index"].write_text("".join(f"{i}\n" for i in rng.permutation(test_ids)))
    return files


@pytest.mark.parametrize("name,gaps,dtype", [
    ("cora", False, np.float32),
    ("citeseer", True, np.float32),
    ("citeseer", False, np.float32),
    ("pubmed", False, np.float64),
])
@pytest.mark.unit
def test_synthetic_planetoid_files_read_as_dgl_reads_them(tmp_path, name, gaps, dtype):
    files = write_planetoid(tmp_path / "raw", name, seed=len(name) + gaps, gaps=gaps, dtype=dtype)
    ours = planetoid.load_planetoid(name, tmp_path / "raw", allow_download=False)
    ref = dgl_reference(name, files, tmp_path / "dgl")
    assert_same_graph(ours, ref)
    assert ours.info["self_loops_removed"] >= 6
    assert ours.num_nodes == 690 and ours.train_mask.sum() == 25 and ours.val_mask.sum() == 500
    assert ours.test_mask.sum() == (690 - 560 if not gaps else len(files["test.index"].read_text().split()))
    assert (ours.features.sum(1) == 0).sum() >= 6  # the empty rows (and CiteSeer's missing ones) stay 0


# --- bad files ------------------------------------------------------------------------------------------------------

@pytest.fixture
def cora_copy(tmp_path):
    """The embedded Cora without SHA256SUMS (which would catch a changed file before it is read)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for path in cora_files().values():
        shutil.copyfile(path, raw / path.name)
    return raw


class Mkdir:
    """Unpickling this would create a folder (what a hostile pickle does: import and call anything)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (str(self.path),)


def one_line_error(raw: Path) -> str:
    with pytest.raises(SylvieError) as e:
        planetoid.load_planetoid("cora", raw, allow_download=False)
    message = str(e.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("damage,expected", [
    ("truncate", "not a readable Planetoid pickle (UnpicklingError: pickle data was truncated)"),
    ("garbage", "not a readable Planetoid pickle"),
    ("empty", "not a readable Planetoid pickle (EOFError"),
    ("dict", "holds a dict, expected a scipy sparse matrix of feature rows"),
    ("dense", "holds a numpy ndarray of shape (140, 1433) (float32), expected a scipy sparse matrix"),
    ("bad_indices", "a corrupt sparse matrix"),
])
@pytest.mark.unit
def test_a_bad_feature_file_is_one_line_naming_it(cora_copy, damage, expected):
    path = cora_copy / "ind.cora.x"
    data = path.read_bytes()
    x = planetoid._unpickle(path)
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "dict":
        path.write_bytes(pickle.dumps({"x": 1}, protocol=4))
    elif damage == "dense":
        path.write_bytes(pickle.dumps(x.toarray(), protocol=4))
    else:
        x.indices[3] = 10**6  # a column past the matrix
        path.write_bytes(pickle.dumps(x, protocol=4))
    message = one_line_error(cora_copy)
    assert message.startswith(f"{path}: ") and expected in message, message


@pytest.mark.unit
def test_a_pickle_naming_anything_else_is_refused_unloaded(cora_copy, tmp_path):
    marker = tmp_path / "unpickling-ran-this"
    (cora_copy / "ind.cora.graph").write_bytes(pickle.dumps(Mkdir(marker), protocol=2))
    message = one_line_error(cora_copy)
    assert message.startswith(f"{cora_copy / 'ind.cora.graph'}: it names posix.mkdir") or "names nt.mkdir" in message
    assert "refusing to unpickle it" in message
    assert not marker.exists()


@pytest.mark.parametrize("suffix,obj,expected", [
    ("ally", sp.csr_matrix(np.eye(3)), "holds a scipy csr_matrix of shape (3, 3) (float64), expected a numpy matrix"),
    ("graph", [1, 2], "holds a list, expected a dict of adjacency lists"),
    ("graph", {0: 5}, "holds the entry 0: an int, expected a dict of adjacency lists"),
    ("graph", {0: ["a"]}, "a node id is not an integer"),
])
@pytest.mark.unit
def test_a_file_of_an_unexpected_type_is_one_line_naming_it(cora_copy, suffix, obj, expected):
    path = cora_copy / f"ind.cora.{suffix}"
    path.write_bytes(pickle.dumps(obj, protocol=4))
    message = one_line_error(cora_copy)
    assert message.startswith(f"{path}: ") and expected in message, message


@pytest.mark.unit
def test_a_bad_test_index_is_one_line_naming_it(cora_copy):
    path = cora_copy / "ind.cora.test.index"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:5] + ["17x"] + lines[5:]) + "\n")
    assert one_line_error(cora_copy) == f"{path}: line 6 is '17x', not a node id; restore the file"
    path.write_text("\n".join(lines[:-1] + ["99999"]) + "\n")
    assert one_line_error(cora_copy).startswith(f"{path}: test node ids must lie in [0, 2708)")


@pytest.mark.unit
def test_a_graph_missing_nodes_is_one_line(cora_copy):
    path = cora_copy / "ind.cora.graph"
    graph = planetoid._unpickle(path)
    graph = {u: [v for v in nbrs if v != 2707] for u, nbrs in graph.items() if u != 2707}
    path.write_bytes(pickle.dumps(graph, protocol=4))
    assert one_line_error(cora_copy).startswith(f"{path}: the graph has 2707 nodes (ids 0..2706) but the feature "
                                                f"files 2708 rows")


@pytest.mark.unit
def test_a_missing_file_is_named(cora_copy):
    (cora_copy / "ind.cora.ty").unlink()
    assert one_line_error(cora_copy).startswith(f"{cora_copy}: Planetoid files incomplete, missing ind.cora.ty;")


@pytest.mark.unit
def test_nothing_but_the_planetoid_files_is_unpickled(tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps([1], protocol=4))
    with pytest.raises(SylvieError, match="not a Planetoid file name"):
        planetoid._unpickle(path)


@pytest.mark.unit
def test_the_cli_prints_one_line_naming_the_file(cora_copy, tmp_path, capsys):
    (cora_copy / "ind.cora.allx").write_bytes(b"\x80\x02corrupt")
    out = tmp_path / "ds"
    code = main(["download", "cora", "--raw-dir", str(cora_copy), "--no-allow-download", "--out", str(out)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and not out.exists() and len(err) == 1
    assert err[0].startswith(f"sylvie download: error: {cora_copy / 'ind.cora.allx'}: not a readable Planetoid pickle")


# --- download -------------------------------------------------------------------------------------------------------

@pytest.fixture
def server(tmp_path, monkeypatch):
    """A loopback HTTP server in place of DGL's, serving ``served``; planetoid.URL points at it."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(planetoid, "URL", f"http://127.0.0.1:{httpd.server_address[1]}/dataset/{{internal}}.zip")
    yield served
    httpd.shutdown()
    httpd.server_close()


def cora_zip() -> bytes:
    """DGL's cora_v2.zip: the eight files named ind.cora_v2.*, at the top of the archive."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for suffix, path in cora_files().items():
            z.write(path, f"ind.cora_v2.{suffix}")
    return buf.getvalue()


@pytest.mark.slow
def test_a_missing_dataset_is_downloaded_into_dgls_folder(server, tmp_path, caplog):
    (server / "dataset").mkdir()
    (server / "dataset" / "cora_v2.zip").write_bytes(cora_zip())
    raw = tmp_path / "raw"
    with caplog.at_level(logging.INFO, logger="sylvie"):
        graph = planetoid.load_planetoid("cora", raw, allow_download=True, timeout_s=10)
    assert graph.fingerprint() == CORA_FINGERPRINT
    _, url, folder = planetoid._layout("cora")
    assert f"downloading {url}" in caplog.text
    assert sorted(p.name for p in (raw / folder).iterdir()) == sorted(f"ind.cora_v2.{s}" for s in planetoid.SUFFIXES)
    (server / "dataset" / "cora_v2.zip").unlink()  # read from the folder next time, not downloaded again
    assert planetoid.load_planetoid("cora", raw, allow_download=False).fingerprint() == CORA_FINGERPRINT


@pytest.mark.unit
def test_a_failed_download_is_one_line(server, tmp_path):
    raw = tmp_path / "raw"
    with pytest.raises(SylvieError) as e:
        planetoid.load_planetoid("pubmed", raw, allow_download=True, timeout_s=10)
    _, url, _ = planetoid._layout("pubmed")
    assert str(e.value).startswith(f"{raw}: no ind.pubmed.* files there and downloading them from {url} failed "
                                   f"(HTTPError: HTTP Error 404")
    assert "\n" not in str(e.value) and [p.name for p in raw.iterdir()] == []  # no partial download left


@pytest.mark.unit
def test_a_download_that_is_not_a_zip_is_one_line(server, tmp_path):
    (server / "dataset").mkdir()
    (server / "dataset" / "citeseer.zip").write_bytes(b"<html>not here</html>")
    with pytest.raises(SylvieError, match=r"citeseer\.zip: downloaded from .* but not a readable zip archive"):
        planetoid.load_planetoid("citeseer", tmp_path / "raw", allow_download=True, timeout_s=10)


@pytest.mark.unit
def test_a_silent_server_times_out(tmp_path, monkeypatch):
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        monkeypatch.setattr(planetoid, "URL", f"http://127.0.0.1:{listener.getsockname()[1]}/{{internal}}.zip")
        with pytest.raises(SylvieError, match=r"failed \(.*timed out; network timeout 0.3 s\)"):
            planetoid.load_planetoid("cora", tmp_path / "raw", allow_download=True, timeout_s=0.3)
