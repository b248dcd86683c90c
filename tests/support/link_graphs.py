"""The tests' link-prediction graphs: a canonical graph's edges cut into training, validation and test pairs here,
independently of sylvie's own edge split (``sylvie.data.link_split``), which its own tests check."""
import dataclasses

import numpy as np

from sylvie.data.graph import Graph, save_graph
from sylvie.formats.link_pairs import LinkPairs


def with_edge_split(graph: Graph, val: float = 0.05, test: float = 0.1, negatives: int = 20, seed: int = 0) -> Graph:
    """``graph`` (undirected: both directions stored) as a link-prediction graph: each undirected edge once as a pair,
    a share ``val`` and ``test`` of them held out (both directions removed from the edges), ``negatives`` random
    destinations per held-out pair."""
    keep = graph.src < graph.dst
    u, v = np.asarray(graph.src[keep]), np.asarray(graph.dst[keep])
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(u))
    u, v = u[order], v[order]
    nv, nt = int(val * len(u)), int(test * len(u))
    split = np.zeros(len(u), np.int8)
    split[:nv], split[nv:nv + nt] = 1, 2
    train = split == 0
    src, dst = np.concatenate([u[train], v[train]]), np.concatenate([v[train], u[train]])
    by_dst = np.lexsort((src, dst))
    pairs = LinkPairs(src=u, dst=v, split=split, negatives=rng.integers(0, graph.num_nodes, (int((~train).sum()),
                                                                                           negatives)))
    info = {k: x for k, x in graph.info.items() if k not in ("fingerprint", "checksum", "num_edges")}
    return dataclasses.replace(graph, name=f"{graph.name}-link", src=src[by_dst], dst=dst[by_dst], info=info,
                               counted_degrees=None, link=pairs)


def save_link_graph(graph: Graph, out) -> None:
    save_graph(with_edge_split(graph), out, source="test")
