"""How the layers we ship start, chosen by measurement rather than inherited from DGL's defaults, and guarded by
``tests/test_initialisation.py`` (a fresh model's loss near ln C, falling through the first epochs, hidden units
alive). GraphSAGE, and GAT's projection, start as torch's ``nn.Linear``: DGL's inits start the loss far above ln C,
and GraphSAGE's then plateaus and loses hidden units (benchmarks/records/2026-11-25_convergence_2core-vm.md). GCN keeps
DGL's Glorot init, which learns faster. No norm layer or input dropout: neither gained accuracy. Link prediction's
GraphSAGE is the exception: its outputs are embeddings scored by their dot product, not logits, and DGL's weight
init with a zero bias (``initialise_link_encoder``) is what lets it learn as fast as DGL's SAGEConv does, and
generalise a little better (benchmarks/records/2026-12-07_link-accuracy-paired_2core-vm.md; before it
2026-12-07_link-accuracy_2core-vm.md and 2026-12-07_link-accuracy-torch-init_2core-vm.md).
"""
# - GraphSAGE (``MeanSAGEConv.reset_parameters``): torch's ``nn.Linear`` init on both branches, not DGL's xavier-uniform
#   with the ReLU gain.
# - GCN: DGL's ``GraphConv`` init kept (Glorot uniform, zero bias: Kipf and Welling's); torch's ``Linear`` init starts
#   as well but learns slower.
# - GAT (``initialise_gat``): the projection ``fc`` as torch's ``nn.Linear``; the attention vectors keep DGL's
#   xavier-normal. DGL's fc (xavier-normal with the ReLU gain) gives a wide-to-narrow output layer too large a weight
#   variance, and reaches the same accuracy later.
# - Link prediction (``train.task: link``), GraphSAGE: DGL's weight init (xavier-uniform with the ReLU gain) and a zero
#   bias. With torch's, a pair's dot product starts near zero and the scores separate slowly on small inputs (Cora's
#   row-normalised words: benchmarks/records/2026-12-07_link-accuracy-torch-init_2core-vm.md against
#   2026-12-07_link-accuracy_2core-vm.md). DGL 1.1.3's SAGEConv zeroes no bias (fc_self keeps ``nn.Linear``'s
#   uniform one); started at zero, the same model reaches a higher test MRR on Cora
#   (2026-12-07_link-accuracy-paired_2core-vm.md: its reference with the bias zeroed). GCN keeps its Glorot init;
#   GAT's projection keeps torch's (not measured for links). The cost, on features of unit variance (the citation2
#   preset's): the first dot products are large and the loss starts far above ln 2, so the first hundred full-graph
#   epochs learn less than torch's init does (2026-12-07_link-init-citation2_2core-vm.md). Input scale decides which
#   init learns faster; DGL's is kept as the one DGL users compare against.
from __future__ import annotations

import torch.nn as nn

from sylvie.models.gat import GATConv
from sylvie.models.sage import MeanSAGEConv


def initialise_gat(conv: GATConv) -> GATConv:
    """torch's ``nn.Linear`` init for GAT's projection (``fc``), in place; the attention vectors and zero bias stay
    as DGL sets them."""
    conv.fc.reset_parameters()
    if conv.fc_dst is not None:
        conv.fc_dst.reset_parameters()
    return conv


def initialise_link_encoder(model: nn.Module) -> nn.Module:
    """DGL's ``SAGEConv`` weight init for every GraphSAGE layer of ``model`` (a link-prediction encoder), in place:
    xavier-uniform with the ReLU gain on both branches, and a zero bias (which DGL leaves at ``nn.Linear``'s uniform
    init); other layers as they are."""
    gain = nn.init.calculate_gain("relu")
    for conv in model.modules():
        if isinstance(conv, MeanSAGEConv):
            nn.init.xavier_uniform_(conv.fc_self.weight, gain=gain)
            nn.init.xavier_uniform_(conv.fc_neigh.weight, gain=gain)
            nn.init.zeros_(conv.fc_self.bias)
    return model
