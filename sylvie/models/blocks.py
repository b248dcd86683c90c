"""The blocks a model runs on, built from a rank's shard (its inner rows as destinations, inner + halo rows as
sources), from the whole graph (every node inner, no halo: sources and destinations the same rows), or from a
rank's block less some halo rows (boundary-node sampling); and a typed graph's, a block per relation. A model
knows no more of partitions than that."""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from sylvie.graph_types import HOMOGENEOUS, GraphTypes
from sylvie.models.block import Block
from sylvie.models.relation_block import RelationBlock


@njit(cache=True, nogil=True)
def _with_self_loops(indptr, src, out_indptr, out_src):
    """Each destination's in-edges, then its self-loop (destination v is source v)."""
    at = 0
    for v in range(indptr.shape[0] - 1):
        out_indptr[v] = at
        for e in range(indptr[v], indptr[v + 1]):
            out_src[at] = src[e]
            at += 1
        out_src[at] = v
        at += 1
    out_indptr[indptr.shape[0] - 1] = at


def _id_type(num_src: int, num_edges: int) -> type:
    return np.int32 if max(num_src, num_edges) < 2 ** 31 else np.int64


def csc(edge_src: np.ndarray, edge_dst: np.ndarray, num_dst: int, num_src: int,
        self_loop: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indptr int64, sources) of the edges ``edge_src -> edge_dst`` by destination (each destination's in-edges in
    the order given), plus one self-loop per destination last; sources 32-bit where every id fits. Edges already
    sorted by destination (a shard's are) are taken as they are: no sort, and no copy where the id type matches."""
    ids = _id_type(num_src, len(edge_src) + (num_dst if self_loop else 0))
    dst = np.asarray(edge_dst)
    src = np.asarray(edge_src)
    if len(dst) > 1 and not bool(np.all(dst[1:] >= dst[:-1])):
        order = np.argsort(dst, kind="stable")
        src, dst = src[order], dst[order]
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst)[:num_dst], out=indptr[1:])
    if len(dst) and (int(dst[-1]) >= num_dst or int(dst[0]) < 0):
        raise ValueError(f"edge destinations must lie in [0, {num_dst}), got {int(dst[0])}..{int(dst[-1])}")
    src = np.asarray(src, dtype=ids)
    if self_loop:
        loop_indptr = np.empty(num_dst + 1, dtype=np.int64)
        loop_src = np.empty(len(src) + num_dst, dtype=ids)
        _with_self_loops(indptr, src, loop_indptr, loop_src)
        return loop_indptr, loop_src
    return indptr, src


def relation_block(src_rows: np.ndarray, dst_rows: np.ndarray, num_src: int, num_dst: int, same_type: bool = True,
                   self_loop: bool = False, in_degree: np.ndarray | None = None, out_degree: np.ndarray | None = None,
                   device: torch.device | str = "cpu") -> RelationBlock:
    """One relation's block of the edges ``src_rows -> dst_rows`` (rows within their types), by destination, with
    ``in_degree`` and ``out_degree`` where given (a rank's global ones), else the block's own. ``self_loop`` (a relation
    within one type) adds an edge v -> v per destination, counted in both degrees as ``dgl.add_self_loop`` does on the
    whole graph, so a halo row's degree counts the self-loop its owner holds."""
    if self_loop and not same_type:
        raise ValueError("a self-loop edge joins a node to itself: a relation between two node types has none")
    indptr, src = csc(src_rows, dst_rows, num_dst, num_src, self_loop)
    loop = 1 if self_loop else 0
    in_deg = np.diff(indptr) if in_degree is None else np.asarray(in_degree, np.int64) + loop
    out_deg = np.bincount(src, minlength=num_src).astype(np.int64) if out_degree is None else \
        np.asarray(out_degree, np.int64) + loop
    # read-only arrays (a shard's, memory-mapped) are shared, not copied: nothing writes a block's index
    block = RelationBlock(torch.from_numpy(indptr), _tensor(src), num_src, torch.from_numpy(np.array(in_deg)),
                          torch.from_numpy(np.array(out_deg)), dst_in_src=same_type)
    return block.to(device)


def _tensor(a: np.ndarray) -> torch.Tensor:
    if a.flags.writeable:
        return torch.from_numpy(a)
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(a)


def whole_graph_block(src: np.ndarray, dst: np.ndarray, type_counts, self_loop: bool = False, device="cpu", *,
                      types: GraphTypes = HOMOGENEOUS, relation: np.ndarray | None = None) -> Block:
    """The whole graph as one block: every node a destination and a source of its type, no halo. ``src``, ``dst``:
    the edges' node ids, type-contiguous in ``types.node_types`` order with ``type_counts`` nodes each (an int: a
    graph of one type); ``relation``: each edge's relation index (None: all of relation 0); ``self_loop``: one
    self-loop edge per node in every relation within one node type."""
    counts = (int(type_counts),) if np.ndim(type_counts) == 0 else tuple(int(c) for c in type_counts)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if relation is None or len(types.relations) == 1:
        parts = [None]  # every edge, as given (no copy)
    else:
        parts = edges_by_relation(relation, len(types.relations))
    blocks = []
    for r, mine in enumerate(parts):
        s, d = types.ends(r)
        rs, rd = (src, dst) if mine is None else (src[mine], dst[mine])
        if offsets[s] or offsets[d]:
            rs, rd = rs - offsets[s], rd - offsets[d]
        blocks.append(relation_block(rs, rd, counts[s], counts[d], s == d, self_loop and s == d))
    return Block(types, counts, counts, tuple(blocks)).to(device)


def halo_subblock(block: RelationBlock, halo_kept: torch.Tensor, num_inner: int | None = None) -> RelationBlock:
    """``block`` (a rank's: inner rows as destinations, inner + halo rows as sources) without the halo rows not in
    ``halo_kept`` (ascending indices among the halo rows) and their edges, its sources the inner rows then the kept halo
    rows in order: what boundary-node sampling trains an epoch on. ``out_degree`` stays global, ``in_degree`` is the
    subgraph's (the global one less the in-edges from dropped halo rows), so that GCN's normalisation averages over the
    kept neighbours, as GraphSAGE's mean does by itself."""
    num_inner = block.num_dst if num_inner is None else num_inner  # the inner rows among the sources
    num_src = block.num_src
    device, idtype = block.device, block.idtype
    kept = halo_kept.to(device=device, dtype=torch.int64)
    sources = torch.cat([torch.arange(num_inner, device=device), num_inner + kept])  # sub-block row -> block row
    new_id = torch.full((num_src,), -1, dtype=idtype, device=device)  # block row -> sub-block row (-1: dropped)
    new_id[sources] = torch.arange(sources.shape[0], dtype=idtype, device=device)
    src = torch.index_select(new_id, 0, block.indices)  # (index_select: faster than src[indices])
    keep = src >= 0
    kept_before = torch.zeros(keep.shape[0] + 1, dtype=torch.int64, device=device)
    torch.cumsum(keep, 0, out=kept_before[1:])
    sub_indptr = torch.index_select(kept_before, 0, block.indptr)
    dropped = block.local_in_degree() - (sub_indptr[1:] - sub_indptr[:-1])
    return RelationBlock(sub_indptr, src[keep], int(sources.shape[0]), block.in_degree - dropped,
                         torch.index_select(block.out_degree, 0, sources), dst_in_src=block.dst_in_src)


def edges_by_relation(relation: np.ndarray, num_relations: int) -> list[np.ndarray]:
    """The indices of each relation's edges (in edge order), relation by relation: one stable sort."""
    order = np.argsort(relation, kind="stable")
    bounds = np.searchsorted(relation[order], np.arange(num_relations + 1))
    return [order[bounds[r]:bounds[r + 1]] for r in range(num_relations)]
