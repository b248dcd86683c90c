"""OGB datasets through the `ogb` package's own downloader, with a configurable mirror: the node-property datasets
here, the link-property ones (``LINK_NAMES``) in ``sylvie.data.ogb_link``, which downloads through ``_fetch``."""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import zipfile
from pathlib import Path

import numpy as np

from sylvie.data.graph import Graph, edges_of_keys, remove_self_loops, typed_edges, undirected_keys
from sylvie.errors import SylvieError
from sylvie.extras import needs
from sylvie.graph_types import GraphTypes, Relation

log = logging.getLogger(__name__)

NODE_NAMES = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M", "ogbn-mag")
LINK_NAMES = ("ogbl-citation2", "ogbl-collab")  # sylvie.data.ogb_link's
NAMES = NODE_NAMES + LINK_NAMES
# Directed citation graphs are made undirected, as in the OGB and DGL reference examples (ogbn-mag, typed, gets
# each relation's reverse instead: reverse_relations).
SYMMETRIZE = {"ogbn-arxiv": True, "ogbn-products": False, "ogbn-papers100M": True, "ogbn-mag": False}


def _meta_info(name: str, root: Path, mirror: str | None) -> dict:
    ogb = needs("ogb", f"sylvie download {name}")
    pd = needs("pandas", f"sylvie download {name}")

    task = "linkproppred" if name in LINK_NAMES else "nodeproppred"
    master = pd.read_csv(Path(ogb.__file__).parent / task / "master.csv", index_col=0, keep_default_na=False)
    meta = dict(master[name])
    if mirror:
        meta["url"] = mirror.rstrip("/") + "/" + meta["url"].rsplit("/", 1)[1]
    meta["dir_path"] = name.replace("-", "_")
    return meta


@contextlib.contextmanager
def network_timeout(seconds: float):
    """Every socket opened inside (urllib, requests) gives up after ``seconds`` without an answer."""
    saved = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(saved)


_FULL_LOAD = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"  # torch.load's weights_only default, off while set


@contextlib.contextmanager
def _ogb_downloads_into(root: Path):
    """OGB downloads into the working directory when given meta_dict, and asks on stdin above 1 GB.

    The dataset is named in the config, so the answer is yes; the size is printed instead. Inside, ``torch.load``
    defaults to ``weights_only=False`` again, as when ogb was written: ogb reads back the file it processed into the
    root the first time (``processed/data_processed``, numpy arrays pickled at protocol 4, which torch's weights-only
    reader refuses), so a second download from the same root would fail otherwise.
    """
    import ogb.nodeproppred.dataset as ds_mod

    def confirm(url):
        log.info(f"downloading {url}")
        return True

    saved, cwd = ds_mod.decide_download, os.getcwd()
    saved_load = os.environ.get(_FULL_LOAD)
    root.mkdir(parents=True, exist_ok=True)
    ds_mod.decide_download = confirm
    os.chdir(root)
    os.environ[_FULL_LOAD] = "1"
    try:
        yield
    finally:
        os.chdir(cwd)
        ds_mod.decide_download = saved
        if saved_load is None:
            os.environ.pop(_FULL_LOAD, None)
        else:
            os.environ[_FULL_LOAD] = saved_load


def _fetch(name: str, root: Path, meta: dict, timeout_s: float, open_dataset=None):
    """ogb's NodePropPredDataset (or what ``open_dataset()`` returns: ``ogb_link``'s extracted folder), downloading
    and extracting the archive if needed. What this call wrote and could not finish is removed (a partial folder); an
    archive that is not a valid zip is moved aside, so the next run downloads it again instead of reusing it."""
    if open_dataset is None:
        from ogb.nodeproppred import NodePropPredDataset

        def open_dataset():
            return NodePropPredDataset(name, meta_dict=meta)

    archive = root / meta["url"].rpartition("/")[2]
    folder = root / meta["dir_path"]
    ours = [f for f in {folder, root / meta.get("download_name", meta["dir_path"])} if not f.exists()]
    with _ogb_downloads_into(root), network_timeout(timeout_s):
        try:
            return open_dataset()
        except zipfile.BadZipFile as e:
            aside = archive.with_name(archive.name + ".corrupt")
            if archive.exists():
                os.replace(archive, aside)
            problem = SylvieError(f"{archive}: downloaded from {meta['url']} but not a valid zip archive ({e}); moved "
                                  f"it to {aside.name} so the next run downloads it again. Check the mirror "
                                  f"(datasets.{name}.mirror)")
        except (OSError, RuntimeError) as e:  # urllib errors and timeouts are OSErrors; ogb wraps a broken read
            problem = SylvieError(f"could not download {name} from {meta['url']} ({e}; network timeout "
                                  f"{timeout_s:g} s); set datasets.{name}.mirror to a reachable mirror, or place the "
                                  f"extracted archive in {root}")
        except EOFError:  # ogb asks on stdin whether to replace a folder without its RELEASE file
            raise SylvieError(f"{folder}: exists but is not a complete {name} (no RELEASE_v*.txt); move it away and "
                              f"rerun to download it again") from None
        for f in ours:  # extracted by this call, incomplete
            shutil.rmtree(f, ignore_errors=True)
        raise problem


def load_ogb(name: str, root: str | Path, mirror: str | None = None, timeout_s: float = 60,
             reverse_relations: bool = True) -> Graph:
    """Download (if needed) and load an ogbn-* dataset into canonical form; every network read gives up after
    ``timeout_s`` seconds without data. A typed dataset (ogbn-mag) gets each relation's reverse unless
    ``reverse_relations`` is off."""
    if name not in NODE_NAMES:
        raise SylvieError(f"unknown OGB node-property dataset '{name}'; choose one of {', '.join(NODE_NAMES)}")
    root = Path(root).resolve()
    meta = _meta_info(name, root, mirror)
    ds = _fetch(name, root, meta, timeout_s)
    with _ogb_downloads_into(root):
        split = ds.get_idx_split()
    graph, labels = ds[0]
    if meta.get("is hetero") == "True":
        return _typed(name, graph, labels, split, meta, reverse_relations)
    src, dst = graph["edge_index"].astype(np.int64)
    src, dst, loops = remove_self_loops(src, dst)
    if SYMMETRIZE[name]:
        key = undirected_keys(src, dst, int(graph["num_nodes"]))  # np.unique hashes: far slower at products' size
        src, dst = edges_of_keys(key, int(graph["num_nodes"]))
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


def _typed(name: str, graph: dict, labels: dict, split: dict, meta: dict, reverse_relations: bool) -> Graph:
    """An OGB heterogeneous dataset (ogb's dictionaries per node type and per (head, relation, tail)) as a typed
    canonical graph: node types in ogb's (sorted) order, each type's ids ogb's; the type with labels the target."""
    counts = {t: int(n) for t, n in graph["num_nodes_dict"].items()}
    node_types = tuple(sorted(counts))
    labelled = sorted(labels)
    if len(labelled) != 1:
        raise SylvieError(f"{name}: labels on {len(labelled)} node types ({labelled}); a typed graph has one target "
                          f"type")
    target = labelled[0]
    relations = tuple(Relation(*triplet) for triplet in sorted(graph["edge_index_dict"]))
    offsets = dict(zip(node_types, np.concatenate([[0], np.cumsum([counts[t] for t in node_types])]), strict=False))
    src, dst = [], []
    for relation in relations:
        edge_index = np.asarray(graph["edge_index_dict"][(relation.src, relation.name, relation.dst)], dtype=np.int64)
        src.append(edge_index[0] + offsets[relation.src])
        dst.append(edge_index[1] + offsets[relation.dst])
    types, src, dst, relation = typed_edges(GraphTypes(node_types, relations, target), src, dst, reverse_relations)
    n = sum(counts.values())
    first, count = int(offsets[target]), counts[target]
    y = np.full(n, -1, np.int64)
    y[first:first + count] = np.asarray(labels[target], dtype=np.int64).reshape(-1)
    masks = {}
    for part in ("train", "valid", "test"):
        m = np.zeros(n, dtype=bool)
        m[first + np.asarray(split[part][target], dtype=np.int64)] = True
        masks[part] = m
    feats = graph.get("node_feat_dict") or {}
    return Graph(
        name=name, src=src, dst=dst, features=np.empty((n, 0), np.float32),
        labels=y, train_mask=masks["train"], val_mask=masks["valid"], test_mask=masks["test"],
        num_classes=int(meta["num classes"]), info={"url": meta["url"], "reverse_relations": reverse_relations},
        types=types, type_counts=tuple(counts[t] for t in node_types), relation=relation,
        type_features=tuple(np.asarray(feats[t], dtype=np.float32) if t in feats else None for t in node_types))
