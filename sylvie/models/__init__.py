"""GNN models: GCN, GraphSAGE, GAT on our own blocks, PyTorch alone.
 They see a block of inner rows (destinations) plus halo rows (sources)."""
from sylvie.models.gnn import ARCHS, GNN, build_model

__all__ = ["ARCHS", "GNN", "build_model"]
