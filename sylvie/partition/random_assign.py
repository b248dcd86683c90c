"""Random balanced partitioning: a baseline with a high edge cut, useful to measure what METIS saves."""
from __future__ import annotations

import numpy as np


def random_assign(num_nodes: int, parts: int, seed: int = 0) -> np.ndarray:
    """Part id (int64) of every node; part sizes differ by at most one."""
    perm = np.random.default_rng(seed).permutation(num_nodes)
    assign = np.empty(num_nodes, dtype=np.int64)
    assign[perm] = np.arange(num_nodes) % parts
    return assign
