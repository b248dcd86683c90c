"""How the layers we ship start, chosen by measurement rather than inherited from DGL's defaults, and guarded by
``tests/test_initialisation.py`` (a fresh model's loss near ln C, falling through the first epochs, hidden units
alive). GraphSAGE, and GAT's projection, start as torch's ``nn.Linear``: DGL's inits start the loss far above ln C,
and GraphSAGE's then plateaus and loses hidden units (benchmarks/records/2026-11-25_convergence_2core-vm.md). GCN keeps
DGL's Glorot init, which learns faster. No norm layer or input dropout: neither gained accuracy.
"""
# - GraphSAGE (``MeanSAGEConv.reset_parameters``): torch's ``nn.Linear`` init on both branches, not DGL's xavier-uniform
#   with the ReLU gain.
# - GCN: DGL's ``GraphConv`` init kept (Glorot uniform, zero bias: Kipf and Welling's); torch's ``Linear`` init starts
#   as well but learns slower.
# - GAT (``initialise_gat``): the projection ``fc`` as torch's ``nn.Linear``; the attention vectors keep DGL's
#   xavier-normal. DGL's fc (xavier-normal with the ReLU gain) gives a wide-to-narrow output layer too large a weight
#   variance, and reaches the same accuracy later.
from __future__ import annotations

from sylvie.models.gat import GATConv


def initialise_gat(conv: GATConv) -> GATConv:
    """torch's ``nn.Linear`` init for GAT's projection (``fc``), in place; the attention vectors and zero bias stay
    as DGL sets them."""
    conv.fc.reset_parameters()
    if conv.fc_dst is not None:
        conv.fc_dst.reset_parameters()
    return conv
