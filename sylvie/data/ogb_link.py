"""OGB's link-property datasets ogbl-citation2 and ogbl-collab from OGB's archive (``raw/*.csv.gz``, the split's
``{train,valid,test}.pt``), downloaded by ogb's downloader, without DGL or PyG.

OGB's graph is the training edges, and its examples pass messages both ways; so are the canonical graph's edges.
``graph.link`` holds OGB's pairs and what each is ranked against: citation2's ``target_node_neg`` (MRR), collab's
shared ``edge_neg`` pairs (Hits@50). Collab's weights and years are dropped; nodes have no labels.
"""
from __future__ import annotations

import logging
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, undirected_keys
from sylvie.data.ogb import LINK_NAMES, _fetch, _meta_info
from sylvie.errors import SylvieError, one_line
from sylvie.extras import needs
from sylvie.formats.link_pairs import TEST, TRAIN, VAL, LinkPairs

log = logging.getLogger(__name__)

PARTS = {"train": TRAIN, "valid": VAL, "test": TEST}  # OGB's split files, by our split codes
# What each dataset's split files hold, by file: field -> its shape, ``n`` the file's pairs, ``k`` negatives per pair
FIELDS = {
    "ogbl-citation2": {"train": {"source_node": ("n",), "target_node": ("n",)},
                       "valid": {"source_node": ("n",), "target_node": ("n",), "target_node_neg": ("n", "k")},
                       "test": {"source_node": ("n",), "target_node": ("n",), "target_node_neg": ("n", "k")}},
    "ogbl-collab": {"train": {"edge": ("n", 2)}, "valid": {"edge": ("n", 2), "edge_neg": ("m", 2)},
                    "test": {"edge": ("n", 2), "edge_neg": ("m", 2)}},
}


def _extract(root: Path, meta: dict) -> Path:
    """The dataset's folder under ``root``, OGB's archive downloaded and extracted into it first where it is not
    there yet (a folder is complete once it holds ``RELEASE_v<version>.txt``, as ogb decides)."""
    url = needs("ogb.utils.url", f"sylvie download {meta['dir_path'].replace('_', '-')}")
    download_url, extract_zip = url.download_url, url.extract_zip

    folder = root / meta["dir_path"]
    if (folder / f"RELEASE_v{meta['version']}.txt").is_file():
        return folder
    if folder.exists():
        raise SylvieError(f"{folder}: exists but is not a complete {meta['download_name']} archive (no "
                          f"RELEASE_v{meta['version']}.txt); move it away and rerun to download it again")
    archive = download_url(meta["url"], str(root))
    extract_zip(archive, str(root))
    inside = root / meta["download_name"]
    if not inside.is_dir():
        raise SylvieError(f"{archive}: holds no folder {meta['download_name']}/, so it is not OGB's archive of this "
                          f"dataset; check the mirror, remove the archive and rerun")
    os.unlink(archive)
    shutil.move(str(inside), str(folder))
    return folder


def _csv(folder: Path, name: str, dtype) -> np.ndarray:
    """``raw/<name>.csv.gz`` (no header) as a 2-D array of ``dtype``, or a SylvieError naming the file."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    path = folder / "raw" / f"{name}.csv.gz"
    if not path.is_file():
        raise SylvieError(f"{path}: missing, so {folder} is not a complete OGB dataset; move it away and rerun to "
                          f"download it again")
    try:
        table = pcsv.read_csv(path, read_options=pcsv.ReadOptions(autogenerate_column_names=True))
        return np.stack([c.to_numpy().astype(dtype) for c in table.columns], axis=1) if table.num_columns else \
            np.zeros((0, 0), dtype)
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        raise SylvieError(f"{path}: not a readable CSV of numbers ({one_line(e)}); move {folder} away and rerun to "
                          f"download it again") from None


def _count(folder: Path, name: str) -> int:
    values = _csv(folder, name, np.int64).reshape(-1)
    if values.shape[0] != 1:
        raise SylvieError(f"{folder / 'raw' / (name + '.csv.gz')}: {values.shape[0]} values where OGB writes one "
                          f"graph's count")
    return int(values[0])


def _split(folder: Path, meta: dict, name: str, part: str, num_nodes: int) -> dict[str, np.ndarray]:
    """OGB's split file ``part`` (train, valid, test) as int64 arrays by field, each field's shape and node ids
    checked; else a SylvieError naming the file and the field."""
    import torch

    path = folder / "split" / meta["split"] / f"{part}.pt"
    redo = f"move {folder} away and rerun to download it again"
    if not path.is_file():
        raise SylvieError(f"{path}: missing, so {folder} is not a complete {name}; {redo}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)  # tensors only: no code runs
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError, TypeError,
            zipfile.BadZipFile) as e:
        raise SylvieError(f"{path}: not a readable torch file of tensors ({one_line(e)}); {redo}") from None
    if not isinstance(data, dict):
        raise SylvieError(f"{path}: holds a {type(data).__name__}, not OGB's dictionary of fields; {redo}")
    out, sizes = {}, {}
    for field, shape in FIELDS[name][part].items():
        if field not in data or not isinstance(data[field], torch.Tensor):
            raise SylvieError(f"{path}: field '{field}' is missing or not a tensor; it holds "
                              f"{', '.join(map(str, data)) or 'nothing'}; {redo}")
        t = data[field]
        ok = t.dim() == len(shape) and not t.is_floating_point() and not t.is_complex()
        for got, want in zip(t.shape, shape) if ok else ():
            ok = ok and (got == want if isinstance(want, int) else sizes.setdefault(want, got) == got)
        if not ok:
            raise SylvieError(f"{path}: field '{field}' is {t.dtype} of shape {list(t.shape)}, not integer ids of "
                              f"shape {list(shape)} (n: the file's pairs); {redo}")
        a = t.numpy().astype(np.int64, copy=False)
        if a.size and (int(a.min()) < 0 or int(a.max()) >= num_nodes):
            raise SylvieError(f"{path}: field '{field}' names node {int(a.min()) if a.min() < 0 else int(a.max())}, "
                              f"outside the graph's {num_nodes} nodes; {redo}")
        out[field] = a
    return out


def _pairs(name: str, splits: dict) -> LinkPairs:
    """The pairs of OGB's splits, train then valid then test, each in its file's order."""
    if name == "ogbl-citation2":
        ends = [(splits[p]["source_node"], splits[p]["target_node"]) for p in PARTS]
        negatives = np.concatenate([splits[p]["target_node_neg"] for p in ("valid", "test")])
        shared = None
    else:
        ends = [(splits[p]["edge"][:, 0], splits[p]["edge"][:, 1]) for p in PARTS]
        negatives = np.zeros((0, 0), np.int64)
        neg = [splits[p]["edge_neg"] for p in ("valid", "test")]
        shared = (np.concatenate([n[:, 0] for n in neg]), np.concatenate([n[:, 1] for n in neg]),
                  np.concatenate([np.full(n.shape[0], s, np.int8) for n, s in zip(neg, (VAL, TEST))]))
    split = np.concatenate([np.full(src.shape[0], s, np.int8) for (src, _), s in zip(ends, PARTS.values())])
    return LinkPairs(src=np.concatenate([e[0] for e in ends]), dst=np.concatenate([e[1] for e in ends]), split=split,
                     negatives=negatives, undirected=True, negative_pairs=shared)


def _in_graph(pairs: LinkPairs, keys: np.ndarray, n: int) -> int:
    """How many validation and test pairs are edges of the message graph (``keys``: its sorted edge keys)."""
    held = pairs.split != TRAIN
    k = pairs.src[held] * n + pairs.dst[held]
    at = np.minimum(np.searchsorted(keys, k), max(keys.shape[0] - 1, 0))
    return int((keys[at] == k).sum()) if keys.size else 0


def load_ogb_link(name: str, root: str | Path, mirror: str | None = None, timeout_s: float = 60) -> Graph:
    """``name`` (ogbl-citation2 or ogbl-collab) in canonical form (module docstring), downloaded into ``root`` first
    where needed (from ``mirror``, a base URL, where given); every network read gives up after ``timeout_s`` seconds
    without data."""
    if name not in LINK_NAMES:
        raise SylvieError(f"unknown OGB link-property dataset '{name}'; choose one of {', '.join(LINK_NAMES)}")
    root = Path(root).resolve()
    meta = _meta_info(name, root, mirror)
    folder = _fetch(name, root, meta, timeout_s, open_dataset=lambda: _extract(root, meta))
    n = _count(folder, "num-node-list")
    edges = _csv(folder, "edge", np.int64)
    m = _count(folder, "num-edge-list")
    if edges.shape != (m, 2):
        raise SylvieError(f"{folder / 'raw' / 'edge.csv.gz'}: {edges.shape[0]} rows of {edges.shape[1]} columns, where "
                          f"num-edge-list.csv.gz gives {m} edges of 2 ends; move {folder} away and rerun")
    if m and (int(edges.min()) < 0 or int(edges.max()) >= n):
        raise SylvieError(f"{folder / 'raw' / 'edge.csv.gz'}: an edge names a node outside the graph's {n} nodes "
                          f"(num-node-list.csv.gz); move {folder} away and rerun")
    features = _csv(folder, "node-feat", np.float32)
    if features.shape[0] != n:
        raise SylvieError(f"{folder / 'raw' / 'node-feat.csv.gz'}: {features.shape[0]} rows for {n} nodes")
    loops = int((edges[:, 0] == edges[:, 1]).sum())
    keys = undirected_keys(edges[:, 0], edges[:, 1], n)
    del edges
    pairs = _pairs(name, {p: _split(folder, meta, name, p, n) for p in PARTS})
    leaked = _in_graph(pairs, keys, n)
    if leaked:  # collab's recurring collaborations; OGB keeps them, and so do we
        log.warning(f"{name}: {leaked:,} validation and test pairs are also training edges (message passing sees "
                    f"them), as in the graph OGB gives")
    src, dst = edges_of_keys(keys, n)
    return Graph(name=name, src=src, dst=dst, features=features, labels=np.zeros(n, np.int64),
                 train_mask=np.ones(n, bool), val_mask=np.zeros(n, bool), test_mask=np.zeros(n, bool), num_classes=1,
                 info={"url": meta["url"], "symmetrized": True, "self_loops_removed": loops,
                       "eval_metric": meta["eval metric"], "held_out_in_graph": leaked},
                 link=pairs)
