"""GNN models on our blocks, PyTorch alone: one layer stack for every architecture and every graph."""
from sylvie.models.gnn import GNN, build_model
from sylvie.models.registry import ARCHS

__all__ = ["ARCHS", "GNN", "build_model"]
