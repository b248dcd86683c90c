"""Planetoid citation graphs (Cora, CiteSeer, PubMed) through DGL's own loaders.

DGL is an optional extra of the package (`dgl`): only this reader and the tests' reference use it, so it is imported
here, when a Planetoid dataset is read, and its absence is a one-line error naming the install."""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import numpy as np

from sylvie.atomic import file_sha256
from sylvie.data.graph import Graph, remove_self_loops
from sylvie.data.ogb import network_timeout
from sylvie.errors import SylvieError

NAMES = ("cora", "citeseer", "pubmed")
SUFFIXES = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
# The dgl extra as `make` installs it: DGL 1.1.3 is the newest DGL on PyPI that runs with torch >= 2.4 on the CPU.
INSTALL = "pip install dgl==1.1.3 packaging"


def _dgl_data():
    """DGL's ``dgl.data``, or a SylvieError naming the install when DGL is missing or cannot be imported."""
    try:
        import dgl.data
        import dgl.data.citation_graph
        import dgl.data.utils
    except ImportError as e:
        if e.name == "dgl":  # not installed
            raise SylvieError(f"reading Planetoid datasets (cora, citeseer, pubmed) needs DGL, which is not "
                              f"installed; install it (the package's dgl extra) with {INSTALL}") from None
        raise SylvieError(f"reading Planetoid datasets needs DGL, which is installed but could not be imported "
                          f"({type(e).__name__}: {e}); reinstall it with {INSTALL}") from e
    except OSError as e:  # a DGL built for another torch: its native library does not load
        raise SylvieError(f"reading Planetoid datasets needs DGL, which is installed but could not be loaded "
                          f"({e}); install a DGL built for this torch: {INSTALL}") from e
    return dgl.data


def _dgl_layout(name: str) -> tuple[str, str]:
    """(DGL's internal dataset name, the folder DGL expects under raw_dir)."""
    data = _dgl_data()
    CitationGraphDataset, _get_dgl_url = data.citation_graph.CitationGraphDataset, data.utils._get_dgl_url

    internal = "cora_v2" if name == "cora" else name
    url = _get_dgl_url(CitationGraphDataset._urls[internal])
    return internal, f"{internal}_{hashlib.sha1(url.encode()).hexdigest()[:8]}"


def _find_raw_files(name: str, raw_dir: Path, internal: str) -> dict[str, Path] | None:
    """The user's ``ind.<name>.*`` files (original or DGL naming), or None if none is there; a set with some
    files missing is an error naming them."""
    for folder in (raw_dir, raw_dir / _dgl_layout(name)[1]):
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


def load_planetoid(name: str, raw_dir: str | Path, allow_download: bool = True, timeout_s: float = 60) -> Graph:
    """Load a Planetoid dataset with DGL from ``raw_dir`` (files ``ind.<name>.*``).

    If the files are not there and ``allow_download`` is set, DGL downloads them into ``raw_dir``.
    DGL writes its processed cache beside the raw files, so local files are read from a scratch copy.
    """
    if name not in NAMES:
        raise SylvieError(f"unknown Planetoid dataset '{name}'; choose one of {', '.join(NAMES)}")
    data = _dgl_data()
    cls = {"cora": data.CoraGraphDataset, "citeseer": data.CiteseerGraphDataset,
           "pubmed": data.PubmedGraphDataset}[name]
    raw_dir = Path(raw_dir)
    internal, folder = _dgl_layout(name)
    files = _find_raw_files(name, raw_dir, internal)
    with tempfile.TemporaryDirectory(prefix="sylvie-planetoid-") as scratch:
        if files is not None:
            _verify_checksums(raw_dir, files)
            target = Path(scratch) / folder
            target.mkdir()
            for suffix, path in files.items():
                shutil.copyfile(path, target / f"ind.{internal}.{suffix}")
            ds = cls(raw_dir=scratch, verbose=False)
        elif allow_download:
            raw_dir.mkdir(parents=True, exist_ok=True)
            try:
                with network_timeout(timeout_s):
                    ds = cls(raw_dir=str(raw_dir), verbose=True)
            except Exception as e:  # DGL raises plain exceptions for network failures
                raise SylvieError(f"{raw_dir}: no ind.{name}.* files there and DGL could not download them ({e}); "
                                  f"put the Planetoid files in {raw_dir}") from e
        else:
            raise SylvieError(f"{raw_dir}: no Planetoid files ind.{name}.{{{','.join(SUFFIXES)}}}")
        g = ds[0]
    src, dst = (t.numpy().astype(np.int64) for t in g.edges())
    src, dst, loops = remove_self_loops(src, dst)
    return Graph(
        name=name, src=src, dst=dst,
        features=g.ndata["feat"].numpy().astype(np.float32),
        labels=g.ndata["label"].numpy().astype(np.int64),
        train_mask=g.ndata["train_mask"].numpy().astype(bool),
        val_mask=g.ndata["val_mask"].numpy().astype(bool),
        test_mask=g.ndata["test_mask"].numpy().astype(bool),
        num_classes=int(ds.num_classes),
        info={"self_loops_removed": loops},
    )
