"""Cut a canonical graph into per-part Arrow shards plus the replicated topology and the manifest
(``sylvie.formats.partition_manifest``), given a node-to-part assignment."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from tqdm import tqdm

from sylvie.atomic import HashingFile, atomic_path
from sylvie.data.edge_form import stored_undirected
from sylvie.data.graph import Graph, degrees
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import copy_link_pairs
from sylvie.formats.partition_manifest import write_manifest
from sylvie.log import show_progress
from sylvie.output_dir import PARTITION
from sylvie.partition.part_edges import PartEdges, part_edges
from sylvie.partition.renumbered_csr import in_sources_in_new_order
from sylvie.partition.shard_format import (
    INT_COLUMNS,
    MASK_COLUMNS,
    RELATION_COLUMN,
    TOPOLOGY_FILE,
    TOPOLOGY_RELATION,
    feat_column,
    id_type,
    shard_schema,
    topology_schema,
)


def _one_row(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """One list of ``values`` in the column's type (64-bit ids narrowed to 32 bits where the column is: checked)."""
    return pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), pa.array(values, typ.value_type))


def _write_one_batch(path: Path, schema: pa.Schema, arrays: list) -> str:
    """Write an Arrow IPC file of one record batch; its sha256, taken as it is written (not read back)."""
    with open(path, "wb") as raw:
        sink = HashingFile(raw)
        with ipc.new_file(pa.PythonFile(sink, mode="w"), schema) as w:
            w.write_batch(pa.record_batch(arrays, schema=schema))
    return sink.hash.hexdigest()


def _write_and_sum(path: Path, columns: dict[str, np.ndarray], num_features: int, ids: pa.DataType,
                   feature_widths: list | None = None) -> str:
    """Write a shard; its sha256. ``feature_widths``: a typed graph's, per node type."""
    schema = shard_schema(num_features, ids, feature_widths)
    arrays = []
    for field in schema:
        if field.name.startswith("feat"):
            feat = columns[field.name]
            rows = pa.FixedSizeListArray.from_arrays(pa.array(feat.reshape(-1)), feat.shape[1])
            arrays.append(pa.LargeListArray.from_arrays(pa.array([0, len(rows)], pa.int64()), rows))
        else:
            arrays.append(_one_row(columns[field.name], field.type))
    return _write_one_batch(path, schema, arrays)


def _part_columns(graph: Graph, assign: np.ndarray, local_of: np.ndarray, in_deg: np.ndarray, out_deg: np.ndarray,
                  edges: PartEdges, feat: np.ndarray) -> dict[str, np.ndarray]:
    """Arrays of one shard: inner nodes, local edges (into inner nodes), halo table; its features' rows go to the
    beginning of ``feat`` (gathered unbuffered: numpy buffers ``take`` into ``out`` unless told the indices need no
    check, which these, the part's own nodes, do not)."""
    inner, halo = edges.inner, edges.halo
    if graph.typed:  # each type's rows (inner ids are type-contiguous), and each edge's relation in edge order
        offsets = graph.type_offsets
        bounds = np.searchsorted(inner, offsets)
        feat_cols = {feat_column(t): graph.type_features[t][inner[bounds[t]:bounds[t + 1]] - offsets[t]]
                     for t in range(len(offsets) - 1) if graph.type_features[t] is not None}
        feat_cols[RELATION_COLUMN] = edges.relation
    else:
        feat_cols = {"feat": np.take(graph.features, inner, axis=0, out=feat[:inner.shape[0]], mode="clip")}
    cols = {
        "global_id": inner, **feat_cols,
        "label": graph.labels[inner],
        **{split: mask[inner] for split, mask in graph.masks.items()},
        "in_degree": in_deg[inner], "out_degree": out_deg[inner],
        "edge_src": edges.edge_src, "edge_dst": edges.edge_dst,
        "halo_global_id": halo, "halo_owner": assign[halo], "halo_owner_index": local_of[halo],
        "halo_out_degree": out_deg[halo],
    }
    assert set(cols) == set(INT_COLUMNS) | set(MASK_COLUMNS) | set(feat_cols)
    return cols


def _topology_columns(graph: Graph, assign: np.ndarray, local_of: np.ndarray, counts: np.ndarray,
                      in_deg: np.ndarray, undirected: bool) -> tuple[dict, list]:
    """The whole graph's in-edges (CSC: per destination its sources) in the partition's id space, where part k
    owns ids ``part_offsets[k] .. part_offsets[k+1]`` in the order of its shard's inner rows."""
    n = graph.num_nodes
    part_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    new_id = part_offsets[assign] + local_of
    original = np.empty(n, dtype=np.int64)
    original[new_id] = np.arange(n)
    # by destination, sources ascending: one sort of the keys destination * n + source (a lexsort of the two
    # columns took several times longer), each source the remainder of its key
    typed = {}
    if graph.typed:  # by destination, then relation, then source: one relation's in-edges of a node are a range
        num_rel = len(graph.types.relations)
        if n * n * num_rel >= 2 ** 63:
            raise SylvieError(f"{graph.name}: {n:,} nodes and {num_rel} relations are too many for the typed "
                              f"topology's sort key")
        key = new_id[graph.dst] * num_rel
        key += graph.relation
        key *= n
        key += new_id[graph.src]
        key.sort()
        in_src = np.remainder(key, n)
        key //= n
        typed = {TOPOLOGY_RELATION: np.remainder(key, num_rel).astype(np.int16)}
    elif undirected:  # every row is there in order already: renumbered without a sort
        in_src = in_sources_in_new_order(in_deg, graph.dst, assign, new_id, original)
    else:
        key = new_id[graph.dst]
        key *= n
        key += new_id[graph.src]
        key.sort()
        in_src = np.remainder(key, n, out=key)
    indptr = np.concatenate([[0], np.cumsum(in_deg[original])]).astype(np.int64)
    return {"in_indptr": indptr, "in_src": in_src, "original_id": original, **typed}, part_offsets.tolist()


def _write_topology_of(path: Path, graph: Graph, assign: np.ndarray, local_of: np.ndarray, counts: np.ndarray,
                       in_deg: np.ndarray, undirected: bool) -> list:
    """Build and write ``topology.arrow``; returns the part offsets and its sha256."""
    columns, part_offsets = _topology_columns(graph, assign, local_of, counts, in_deg, undirected)
    schema = topology_schema(id_type(graph.num_nodes), typed=graph.typed)
    sha = _write_one_batch(path, schema, [_one_row(columns[field.name], field.type) for field in schema])
    return part_offsets, sha


def write_shards(graph: Graph, assign: np.ndarray, out_dir: str | Path, method: str, seed: int,
                 dataset_fingerprint: str, progress: bool = True, inputs: tuple = (),
                 balance: dict | None = None, undirected: bool | None = None,
                 partitioner: dict | None = None, link_from: str | Path | None = None) -> dict:
    """Write ``part-<k>.arrow`` for every part, ``topology.arrow`` and ``manifest.json`` into ``out_dir``
    atomically and return the manifest; an existing ``out_dir`` is replaced only if it is an earlier partition
    (``inputs``: the dataset it was cut from). ``balance``: what the partition balances and achieved
    (``sylvie.partition.balance.balance_record``), recorded in the manifest, as is ``partitioner`` (the library that
    cut it: ``MetisLibrary.describe``). ``link_from``: the canonical graph whose edge split (link prediction) the
    partition carries, copied beside the shards. ``undirected``: whether the graph's edges are in their sorted
    undirected form (``sylvie.data.edge_form``; None: checked here).

    The topology is built and every shard written and its checksum taken in worker threads while the shards
    are cut one after the other (numpy, the numba kernels, Arrow's writer and sha256 let go of the GIL), so two
    cores share the work. (Cutting two shards at once was slower at products' scale: threads of one process that
    touch fresh memory wait for each other's page faults.)"""
    parts = int(assign.max()) + 1 if assign.size else 0
    n = graph.num_nodes
    counts = np.bincount(assign, minlength=parts)
    local_of = np.empty(n, dtype=np.int64)
    order = np.argsort(assign, kind="stable")
    local_of[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    in_deg, out_deg = degrees(graph)
    if undirected is None:
        undirected = stored_undirected(graph.src, graph.dst, n)
    # the pool inside the output's context: on an error its threads end before the half-written output is removed
    with atomic_path(out_dir, directory=True, kind=PARTITION, inputs=inputs) as tmp, ThreadPoolExecutor(2) as pool:
        topology = pool.submit(_write_topology_of, tmp / TOPOLOGY_FILE, graph, assign, local_of, counts, in_deg,
                               undirected)
        part_of = assign.astype(np.min_scalar_type(parts - 1))  # a byte a node (and an edge) for up to 256 parts
        dst_part = part_of[graph.dst]

        entries, sums, edge_cut = [], {}, 0
        is_halo = np.zeros(n, dtype=np.uint8)
        # a shard's edge columns and features are cut into one of two sets of buffers the size of the largest
        # part's, each used again once the shard written from it is: fresh memory, whose first touch costs more
        # than cutting into it (~2 s a GB on a VM), is touched for two parts, not for every one
        most_edges = int(np.bincount(assign, weights=in_deg, minlength=parts).max())  # a part's edges: its in-degrees
        most_nodes = int(counts.max())
        buffers = []
        for k in tqdm(range(parts), desc="shards", unit="part", disable=not show_progress(progress)):
            if k < 2:
                buffers.append(((np.empty(most_edges, np.int64), np.empty(most_edges, np.int64)),
                                np.empty((0 if graph.typed else most_nodes, graph.features.shape[1]),
                                         graph.features.dtype)))
            else:
                sums[f"part-{k - 2}.arrow"].result()  # the shard cut into this set of buffers is written
            edge_buffers, feat_buffer = buffers[k % 2]
            # its edges, in edge order (a counting sort of every edge by part was slower: 8 bytes an edge of fresh
            # memory, whose first touch costs more than a pass per part over a byte an edge)
            edges = part_edges(dst_part, graph.src, graph.dst, part_of, k, local_of, is_halo, edge_buffers,
                               relation=graph.relation if graph.typed else None)
            cols = _part_columns(graph, assign, local_of, in_deg, out_deg, edges, feat_buffer)
            edge_cut += edges.cut
            name = f"part-{k}.arrow"
            sums[name] = pool.submit(_write_and_sum, tmp / name, cols, graph.features.shape[1], id_type(n),
                                     list(graph.feature_widths) if graph.typed else None)
            typed_counts = ({"type_counts": np.diff(np.searchsorted(edges.inner, graph.type_offsets)).tolist()}
                            if graph.typed else {})
            entries.append({
                "part": k, "file": name, **typed_counts,
                "inner_nodes": int(len(cols["global_id"])), "train_nodes": int(cols["train"].sum()),
                "edges": int(len(cols["edge_src"])), "halo_nodes": int(len(cols["halo_global_id"])),
                "halo_from": np.bincount(cols["halo_owner"], minlength=parts).astype(int).tolist(),
            })
        for e in entries:
            e["sha256"] = sums[e["file"]].result()
        part_offsets, topology_sha = topology.result()
        link = copy_link_pairs(link_from, tmp) if link_from is not None else {}
        return write_manifest(tmp, {
            "dataset": graph.name, "dataset_fingerprint": dataset_fingerprint,
            "method": method, **({"partitioner": partitioner} if partitioner is not None else {}),
            "seed": seed, "num_parts": parts, "num_nodes": n, "num_edges": graph.num_edges,
            "id_bits": id_type(n).bit_width,
            "num_features": int(graph.features.shape[1]), "num_classes": int(graph.num_classes),
            **({"types": graph.types.to_json(), "type_counts": list(graph.node_counts),
                "feature_widths": list(graph.feature_widths)} if graph.typed else {}),
            "num_train": int(graph.train_mask.sum()),
            "edge_cut": edge_cut,
            **({"balance": balance} if balance is not None else {}),
            "parts": entries,
            "topology": {"file": TOPOLOGY_FILE, "sha256": topology_sha,
                         "part_offsets": part_offsets},
            **({"link_pairs": link} if link else {}),
        })
