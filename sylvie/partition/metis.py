"""METIS k-way partitioning (pymetis), balancing inner nodes, training nodes and edges at once."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sylvie.data.graph import Graph, degrees


def symmetric_csr(graph: Graph) -> sp.csr_matrix:
    """The undirected, loop-free, unweighted adjacency METIS requires."""
    n = graph.num_nodes
    a = sp.coo_matrix((np.ones(graph.num_edges, dtype=np.int8), (graph.src, graph.dst)), shape=(n, n)).tocsr()
    a = (a + a.T).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    a.sort_indices()
    return a


def metis_assign(graph: Graph, parts: int, seed: int = 0) -> np.ndarray:
    """Part id (int64) of every node.

    Three balance constraints (METIS multi-constraint vertex weights): one per node, one per training
    node, and the node's in-degree (the edges its part will store).
    """
    import pymetis

    if parts == 1:
        return np.zeros(graph.num_nodes, dtype=np.int64)
    adj = symmetric_csr(graph)
    in_deg, _ = degrees(graph)
    weights = np.stack([np.ones(graph.num_nodes, dtype=np.int64), graph.train_mask.astype(np.int64), in_deg], axis=1)
    result = pymetis.part_graph(
        parts,
        adjacency=pymetis.CSRAdjacency(adj.indptr.astype(np.int64), adj.indices.astype(np.int64)),
        vweights=weights.reshape(-1),
        # k-way: pymetis would bisect recursively for 8 parts or fewer, which cuts more edges (synthetic 200K
        # nodes: 16.2% instead of 15.0% at 4 parts, 18.8% instead of 17.5% at 8; Cora at 4: 6.7% instead of 5.7%)
        recursive=False,
        options=pymetis.Options(seed=seed),
    )
    return np.asarray(result.vertex_part, dtype=np.int64)
