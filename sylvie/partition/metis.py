"""METIS k-way partitioning balancing inner nodes, training nodes and edges at once (METIS's multi-constraint k-way,
``sylvie.partition.metis_library``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sylvie.data.edge_form import row_offsets, stored_undirected
from sylvie.data.graph import Graph, degrees, undirected_keys
from sylvie.partition.balance import DEFAULT_TOLERANCE, vertex_weights
from sylvie.partition.metis_library import MetisLibrary, extent, library_for, part_graph_kway


@dataclass
class MetisInput:
    """All METIS reads of a graph, in the width of the ``idx_t`` of the library that will read it (passed to it as
    they are, not copied): far smaller than the graph (no features), so the graph can be let go while METIS runs,
    whose own memory is about a dozen ``idx_t``s an adjacency entry
    (benchmarks/records/2026-11-25_partition-scale_2core-vm.md)."""
    xadj: np.ndarray
    adjncy: np.ndarray
    vweights: np.ndarray  # [n, constraints]
    library: MetisLibrary | None = None  # None: the one that holds the graph (metis_library.library_for)


def symmetric_csr(graph: Graph, undirected: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(xadj, adjncy), int64: the undirected, loop-free, unweighted adjacency METIS requires, every row's
    neighbours ascending. A graph stored in that form already (``sylvie.data.edge_form``) is its own CSR; any other
    from the sorted keys row * n + neighbour: one sort, where scipy's coo -> csr, a + a.T
    and the index copies took several passes and copies of the edges. ``undirected``: whether the graph is in that
    form (None: checked here)."""
    n = graph.num_nodes
    if undirected is None:
        undirected = stored_undirected(graph.src, graph.dst, n)
    if undirected:  # the edge list is that CSR: its destinations, as they are; its rows' lengths the out-degrees
        return row_offsets(degrees(graph)[1]), graph.dst
    key = undirected_keys(graph.src, graph.dst, n)
    xadj = np.searchsorted(key, np.arange(n + 1, dtype=np.int64) * n)  # where each row's keys begin
    return xadj, np.remainder(key, n, out=key)


def metis_input(graph: Graph, regime: str = "full", undirected: bool | None = None,
                library: MetisLibrary | None = None) -> MetisInput:
    """The adjacency and the balance constraints of ``regime`` (``sylvie.partition.balance``) as METIS's
    multi-constraint vertex weights (for full-graph training one per node, one per training node, and the node's
    in-degree: the edges its part will store), in the ``idx_t`` of ``library`` (None: the narrowest METIS found that
    holds the graph). A graph stored undirected in that width lends its destination column; in another the
    adjacency is a copy, and the graph's column can be let go while METIS runs."""
    xadj, adjncy = symmetric_csr(graph, undirected)
    weights = vertex_weights(graph, regime)
    library = library or library_for(extent(graph.num_nodes, adjncy, weights))
    xadj, adjncy, weights = (np.ascontiguousarray(a, dtype=library.idx) for a in (xadj, adjncy, weights))
    return MetisInput(xadj, adjncy, weights, library)


def metis_assign(metis: MetisInput, parts: int, seed: int = 0, tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """Part id (int64) of every node: k-way (recursive bisection cut more edges on the graphs tried), every
    constraint of every part within ``tolerance`` times its mean over the parts.

    METIS seeds the C library's ``srand``, which takes seeds 0 and 1 for the same (glibc): METIS gets ``seed + 1``
    (its low 32 bits), so that seeds 0 and 1 give different partitions and seed 0 the one it always gave; only
    seed 4294967295 wraps to seed 0's (a 32-bit METIS: seeds that differ by 2^31 coincide)."""
    assign, _ = part_graph_kway(metis.xadj, metis.adjncy, parts, metis.vweights, tolerance, (seed + 1) % 2 ** 32,
                                metis.library)
    return assign
