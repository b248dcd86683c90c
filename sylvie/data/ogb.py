"""OGB node-property datasets through the `ogb` package's own downloader, with a configurable mirror."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from sylvie.data.graph import Graph, remove_self_loops
from sylvie.errors import SylvieError

NAMES = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")
# Directed citation graphs are made undirected, as in the OGB and DGL reference examples.
SYMMETRIZE = {"ogbn-arxiv": True, "ogbn-products": False, "ogbn-papers100M": True}


def _meta_info(name: str, root: Path, mirror: str | None) -> dict:
    import pandas as pd
    import ogb.nodeproppred

    master = pd.read_csv(Path(ogb.nodeproppred.__file__).parent / "master.csv", index_col=0, keep_default_na=False)
    meta = dict(master[name])
    if mirror:
        meta["url"] = mirror.rstrip("/") + "/" + meta["url"].rsplit("/", 1)[1]
    meta["dir_path"] = name.replace("-", "_")
    return meta


@contextlib.contextmanager
def _ogb_downloads_into(root: Path):
    """OGB downloads into the working directory when given meta_dict, and asks on stdin above 1 GB.

    The dataset is named in the config, so the answer is yes; the size is printed instead.
    """
    import ogb.nodeproppred.dataset as ds_mod

    def confirm(url):
        print(f"downloading {url}", flush=True)
        return True

    saved, cwd = ds_mod.decide_download, os.getcwd()
    root.mkdir(parents=True, exist_ok=True)
    ds_mod.decide_download = confirm
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(cwd)
        ds_mod.decide_download = saved


def load_ogb(name: str, root: str | Path, mirror: str | None = None) -> Graph:
    """Download (if needed) and load an ogbn-* dataset into canonical form."""
    from ogb.nodeproppred import NodePropPredDataset

    if name not in NAMES:
        raise SylvieError(f"unknown OGB dataset '{name}'; choose one of {', '.join(NAMES)}")
    root = Path(root).resolve()
    meta = _meta_info(name, root, mirror)
    with _ogb_downloads_into(root):
        try:
            ds = NodePropPredDataset(name, meta_dict=meta)
        except OSError as e:  # urllib errors are OSErrors
            raise SylvieError(f"could not download {name} from {meta['url']} ({e}); set datasets.{name}.mirror "
                              f"to a reachable mirror, or place the extracted archive in {root}") from e
        split = ds.get_idx_split()
    graph, labels = ds[0]
    src, dst = graph["edge_index"].astype(np.int64)
    src, dst, loops = remove_self_loops(src, dst)
    if SYMMETRIZE[name]:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        key = np.unique(src * graph["num_nodes"] + dst)
        src, dst = key // graph["num_nodes"], key % graph["num_nodes"]
    n = int(graph["num_nodes"])
    labels = np.asarray(labels, dtype=np.float64).reshape(-1)
    masks = {}
    for part in ("train", "valid", "test"):
        m = np.zeros(n, dtype=bool)
        m[np.asarray(split[part], dtype=np.int64)] = True
        masks[part] = m
    return Graph(
        name=name, src=src, dst=dst,
        features=np.asarray(graph["node_feat"], dtype=np.float32),
        labels=np.where(np.isnan(labels), -1, labels).astype(np.int64),
        train_mask=masks["train"], val_mask=masks["valid"], test_mask=masks["test"],
        num_classes=int(meta["num classes"]),
        info={"self_loops_removed": loops, "symmetrized": SYMMETRIZE[name], "url": meta["url"]},
    )
