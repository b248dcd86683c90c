"""Sylvie: distributed full-graph GNN training on partitioned graphs."""
import os

# DGL picks its tensor backend from this variable and complains loudly when it is unset.
os.environ.setdefault("DGLBACKEND", "pytorch")

__version__ = "0.1.0"
