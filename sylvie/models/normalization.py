"""Symmetric GCN normalisation from global degrees.

A partition holds only the edges into its inner nodes, so local degrees are wrong for any node with
neighbours elsewhere. The block carries global degrees: ``srcdata['out_degree']`` for every source
row (inner and halo) and ``dstdata['in_degree']`` for every inner row, self-loops included if added.
"""
from __future__ import annotations

import torch


def gcn_edge_weight(block, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """w(u->v) = out_degree(u)^-1/2 * in_degree(v)^-1/2, degrees clamped to >= 1 (as DGL's GraphConv)."""
    # in the order the graph stores its edges (a block keeps only its in-edges), then put in edge-id order
    src, dst, eid = block.edges(form="all", order="srcdst")
    out_norm = block.srcdata["out_degree"].clamp(min=1).to(dtype).pow(-0.5)
    in_norm = block.dstdata["in_degree"].clamp(min=1).to(dtype).pow(-0.5)
    weight = torch.empty(eid.shape[0], dtype=dtype, device=eid.device)
    weight[eid.long()] = out_norm[src.long()] * in_norm[dst.long()]
    return weight
