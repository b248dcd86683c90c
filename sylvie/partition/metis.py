"""METIS k-way partitioning (pymetis), balancing inner nodes, training nodes and edges at once."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sylvie.data.graph import Graph, degrees, undirected_keys


@dataclass
class MetisInput:
    """All METIS reads of a graph: far smaller than the graph (no features), so the graph can be let go while
    METIS runs, whose own memory is ~100 bytes an edge (products-shaped graph: coarsening a graph without
    locality shrinks its edges slowly, and every level is kept)."""
    xadj: np.ndarray  # int64, the width of pymetis's idx_t: passed as they are, not copied
    adjncy: np.ndarray
    vweights: np.ndarray


def symmetric_csr(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(xadj, adjncy), int64: the undirected, loop-free, unweighted adjacency METIS requires, every row's
    neighbours ascending. From the sorted keys row * n + neighbour: one sort, where scipy's coo -> csr, a + a.T
    and the index copies took several passes and copies of the edges."""
    n = graph.num_nodes
    key = undirected_keys(graph.src, graph.dst, n)
    xadj = np.searchsorted(key, np.arange(n + 1, dtype=np.int64) * n)  # where each row's keys begin
    return xadj, np.remainder(key, n, out=key)


def metis_input(graph: Graph) -> MetisInput:
    """The adjacency and three balance constraints (METIS multi-constraint vertex weights): one per node, one per
    training node, and the node's in-degree (the edges its part will store)."""
    xadj, adjncy = symmetric_csr(graph)
    in_deg, _ = degrees(graph)
    weights = np.stack([np.ones(graph.num_nodes, dtype=np.int64), graph.train_mask.astype(np.int64), in_deg], axis=1)
    return MetisInput(xadj, adjncy, weights.reshape(-1))


def metis_assign(metis: MetisInput, parts: int, seed: int = 0) -> np.ndarray:
    """Part id (int64) of every node."""
    import pymetis

    result = pymetis.part_graph(
        parts,
        adjacency=pymetis.CSRAdjacency(metis.xadj, metis.adjncy),
        vweights=metis.vweights,
        # k-way: pymetis would bisect recursively for 8 parts or fewer, which cuts more edges (synthetic 200K
        # nodes: 16.2% instead of 15.0% at 4 parts, 18.8% instead of 17.5% at 8; Cora at 4: 6.7% instead of 5.7%)
        recursive=False,
        options=pymetis.Options(seed=seed),
    )
    return np.asarray(result.vertex_part, dtype=np.int64)
