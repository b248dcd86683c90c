"""The blocks a model runs on, built from a rank's shard (its inner rows as destinations, inner + halo rows as
sources), from the whole graph (every node inner, no halo: sources and destinations the same rows), or from a
rank's block less some halo rows (boundary-node sampling); and a typed graph's, a block per relation. A model
knows no more of partitions than that."""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from sylvie.graph_types import GraphTypes
from sylvie.models.block import Block
from sylvie.models.typed_block import TypedBlock


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


def local_block(edge_src: np.ndarray, edge_dst: np.ndarray, num_inner: int, num_halo: int,
                inner_in_degree: np.ndarray, src_out_degree: np.ndarray, self_loop: bool,
                device: torch.device | str = "cpu") -> Block:
    """A rank's block, its global degrees attached (``in_degree`` per inner row, ``out_degree`` per source row).

    ``self_loop`` adds one edge i -> i per inner row and counts it in both degrees, as ``dgl.add_self_loop`` does
    on the whole graph: every node, halo rows included, gains one out-edge (a halo node's self-loop lives at its
    owner, but it still counts in its global degree)."""
    num_src = num_inner + num_halo
    indptr, src = csc(edge_src, edge_dst, num_inner, num_src, self_loop)
    in_deg = np.asarray(inner_in_degree, np.int64) + (1 if self_loop else 0)
    out_deg = np.asarray(src_out_degree, np.int64) + (1 if self_loop else 0)
    # read-only arrays (a shard's, memory-mapped) are shared, not copied: nothing writes a block's index
    block = Block(torch.from_numpy(indptr), _tensor(src), num_src, torch.from_numpy(np.array(in_deg)),
                  torch.from_numpy(np.array(out_deg)))
    return block.to(device)


def _tensor(a: np.ndarray) -> torch.Tensor:
    if a.flags.writeable:
        return torch.from_numpy(a)
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(a)


def whole_graph_block(src: np.ndarray, dst: np.ndarray, num_nodes: int, self_loop: bool, device="cpu") -> Block:
    """The whole graph (directed edges src -> dst) as one block: every node is an inner row, no halo."""
    in_deg = np.bincount(dst, minlength=num_nodes).astype(np.int64)
    out_deg = np.bincount(src, minlength=num_nodes).astype(np.int64)
    return local_block(src, dst, num_nodes, 0, in_deg, out_deg, self_loop, device)


def halo_subblock(block: Block, halo_kept: torch.Tensor) -> Block:
    """``block`` (a rank's: inner rows as destinations, inner + halo rows as sources) without the halo rows not in
    ``halo_kept`` (indices among the halo rows, ascending) and their edges: its sources are the inner rows, then the
    kept halo rows in their order. Boundary-node sampling trains each epoch on one.

    Degrees: ``out_degree`` stays global (the kept rows'), ``in_degree`` is the sampled subgraph's: the global
    in-degree less the in-edges from dropped halo rows (GCN's normalisation then averages over the kept
    neighbours, as GraphSAGE's mean does by itself)."""
    num_inner, num_src = block.num_dst, block.num_src
    device, idtype = block.device, block.idtype
    kept = halo_kept.to(device=device, dtype=torch.int64)
    sources = torch.cat([torch.arange(num_inner, device=device), num_inner + kept])  # sub-block row -> block row
    new_id = torch.full((num_src,), -1, dtype=idtype, device=device)  # block row -> sub-block row (-1: dropped)
    new_id[sources] = torch.arange(sources.shape[0], dtype=idtype, device=device)
    src = torch.index_select(new_id, 0, block.indices)  # (index_select: several times faster than src[indices])
    keep = src >= 0
    kept_before = torch.zeros(keep.shape[0] + 1, dtype=torch.int64, device=device)
    torch.cumsum(keep, 0, out=kept_before[1:])
    sub_indptr = torch.index_select(kept_before, 0, block.indptr)
    dropped = block.local_in_degree() - (sub_indptr[1:] - sub_indptr[:-1])
    return Block(sub_indptr, src[keep], int(sources.shape[0]), block.in_degree - dropped,
                 torch.index_select(block.out_degree, 0, sources))


def relation_block(src_rows: np.ndarray, dst_rows: np.ndarray, num_src: int, num_dst: int,
                   same_type: bool) -> Block:
    """One relation's block of the edges ``src_rows -> dst_rows`` (rows within their types), by destination;
    its degrees are its own (an R-GCN layer averages over a relation's in-edges)."""
    indptr, src = csc(src_rows, dst_rows, num_dst, num_src, self_loop=False)
    in_degree = torch.from_numpy(np.diff(indptr))
    out_degree = torch.from_numpy(np.bincount(src_rows, minlength=num_src).astype(np.int64))
    return Block(torch.from_numpy(indptr), torch.from_numpy(src), num_src, in_degree, out_degree,
                 dst_in_src=same_type)


def edges_by_relation(relation: np.ndarray, num_relations: int) -> list[np.ndarray]:
    """The indices of each relation's edges (in edge order), relation by relation: one stable sort."""
    order = np.argsort(relation, kind="stable")
    bounds = np.searchsorted(relation[order], np.arange(num_relations + 1))
    return [order[bounds[r]:bounds[r + 1]] for r in range(num_relations)]


def whole_graph_typed_block(types: GraphTypes, type_counts, src: np.ndarray, dst: np.ndarray,
                            relation: np.ndarray, device="cpu") -> TypedBlock:
    """The whole typed graph as one typed block: every node a destination and a source of its type. ``src``,
    ``dst``: the edges' node ids, type-contiguous in ``types.node_types`` order with ``type_counts`` nodes each;
    ``relation``: each edge's relation index."""
    counts = tuple(int(c) for c in type_counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    blocks = []
    for r, mine in enumerate(edges_by_relation(relation, len(types.relations))):
        s, d = types.ends(r)
        blocks.append(relation_block(src[mine] - offsets[s], dst[mine] - offsets[d], counts[s], counts[d], s == d))
    return TypedBlock(types, counts, counts, tuple(blocks)).to(device)
