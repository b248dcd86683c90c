"""DGL blocks the models run on: a rank's inner rows as destinations and inner + halo rows as sources, or the
whole graph (every node inner, no halo: a plain DGL graph, sources and destinations the same rows). A model knows
no more of partitions than that."""
from __future__ import annotations

import warnings

import dgl
import numpy as np
import torch


def local_block(edge_src: np.ndarray, edge_dst: np.ndarray, num_inner: int, num_halo: int,
                inner_in_degree: np.ndarray, src_out_degree: np.ndarray, self_loop: bool,
                device: torch.device | str = "cpu"):
    """Block with global degrees attached (``dstdata['in_degree']``, ``srcdata['out_degree']``).

    ``self_loop`` adds one edge i -> i per inner row and counts it in both degrees, as
    ``dgl.add_self_loop`` does on the whole graph: every node, halo rows included, gains one out-edge
    (a halo node's self-loop lives at its owner, but it still counts in its global degree).
    """
    src, dst = np.asarray(edge_src, np.int64), np.asarray(edge_dst, np.int64)
    in_deg = np.asarray(inner_in_degree, np.int64).copy()
    out_deg = np.asarray(src_out_degree, np.int64).copy()
    if self_loop:
        loops = np.arange(num_inner, dtype=np.int64)
        src, dst = np.concatenate([src, loops]), np.concatenate([dst, loops])
        in_deg += 1
        out_deg += 1
    with warnings.catch_warnings():
        # without self-loops, src/dst are the shard's read-only (memory-mapped) arrays: DGL copies them into
        # its own index and never writes them, so they are shared instead of copied once more
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        edges = (torch.from_numpy(src), torch.from_numpy(dst))
        if num_halo == 0:
            # No halo rows (one partition, the whole graph): a graph, whose sources are its destinations. DGL's
            # convolutions then use the rows as they are instead of slicing out the destinations, whose backward
            # writes a zero gradient for every row and adds into it (measured: 5-10% of a GraphSAGE epoch).
            block = dgl.graph(edges, num_nodes=num_inner)
        else:
            block = dgl.create_block(edges, num_src_nodes=num_inner + num_halo, num_dst_nodes=num_inner)
    block.srcdata["out_degree"] = torch.from_numpy(out_deg)
    block.dstdata["in_degree"] = torch.from_numpy(in_deg)
    return block.to(device)


def whole_graph_block(src: np.ndarray, dst: np.ndarray, num_nodes: int, self_loop: bool, device="cpu"):
    """The whole graph (directed edges src -> dst) as one block: every node is an inner row, no halo."""
    in_deg = np.bincount(dst, minlength=num_nodes).astype(np.int64)
    out_deg = np.bincount(src, minlength=num_nodes).astype(np.int64)
    return local_block(src, dst, num_nodes, 0, in_deg, out_deg, self_loop, device)
