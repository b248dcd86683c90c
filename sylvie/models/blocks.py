"""DGL blocks the models run on: a rank's inner rows as destinations and inner + halo rows as sources, or the
whole graph (every node inner, no halo: a plain DGL graph, sources and destinations the same rows). A model knows
no more of partitions than that."""
from __future__ import annotations

import warnings

import dgl
import numpy as np
import torch

IDS = {torch.int32: np.int32, torch.int64: np.int64}  # DGL id type -> NumPy's


def local_block(edge_src: np.ndarray, edge_dst: np.ndarray, num_inner: int, num_halo: int,
                inner_in_degree: np.ndarray, src_out_degree: np.ndarray, self_loop: bool,
                device: torch.device | str = "cpu"):
    """Block with global degrees attached (``dstdata['in_degree']``, ``srcdata['out_degree']``).

    ``self_loop`` adds one edge i -> i per inner row and counts it in both degrees, as
    ``dgl.add_self_loop`` does on the whole graph: every node, halo rows included, gains one out-edge
    (a halo node's self-loop lives at its owner, but it still counts in its global degree).
    """
    num_src = num_inner + num_halo
    idtype = torch.int32 if max(num_src, len(edge_src) + num_inner) < 2 ** 31 else torch.int64
    src, dst = np.asarray(edge_src, IDS[idtype]), np.asarray(edge_dst, IDS[idtype])
    in_deg = np.asarray(inner_in_degree, np.int64).copy()
    out_deg = np.asarray(src_out_degree, np.int64).copy()
    if self_loop:
        loops = np.arange(num_inner, dtype=src.dtype)
        src, dst = np.concatenate([src, loops]), np.concatenate([dst, loops])
        in_deg += 1
        out_deg += 1
    with warnings.catch_warnings():
        # int64 ids without self-loops: src/dst are the shard's read-only (memory-mapped) arrays; DGL copies them
        # into its own index and never writes them, so they are shared instead of copied once more
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        edges = (torch.from_numpy(src), torch.from_numpy(dst))
        if num_halo == 0:
            # No halo rows (one partition, the whole graph): a graph, whose sources are its destinations. DGL's
            # convolutions then use the rows as they are instead of slicing out the destinations, whose backward
            # writes a zero gradient for every row and adds into it (measured: 5-10% of a GraphSAGE epoch).
            block = dgl.graph(edges, num_nodes=num_inner, idtype=idtype)
        else:
            block = dgl.create_block(edges, num_src_nodes=num_src, num_dst_nodes=num_inner, idtype=idtype)
    del edges, src, dst
    # Only the in-edges (CSC): message passing gathers into destinations with it, and its backward runs on the
    # reverse graph, whose out-edges are the same arrays. DGL would otherwise keep the edge list and build the
    # out-edges too; with 32-bit ids that is 8 bytes an edge instead of up to 48 (products-shaped graph, 4 parts:
    # 30M edges a rank).
    block = block.formats("csc")
    block.srcdata["out_degree"] = torch.from_numpy(out_deg)
    block.dstdata["in_degree"] = torch.from_numpy(in_deg)
    return block.to(device)


def whole_graph_block(src: np.ndarray, dst: np.ndarray, num_nodes: int, self_loop: bool, device="cpu"):
    """The whole graph (directed edges src -> dst) as one block: every node is an inner row, no halo."""
    in_deg = np.bincount(dst, minlength=num_nodes).astype(np.int64)
    out_deg = np.bincount(src, minlength=num_nodes).astype(np.int64)
    return local_block(src, dst, num_nodes, 0, in_deg, out_deg, self_loop, device)
