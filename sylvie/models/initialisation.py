"""How the layers we ship start, chosen by measurement rather than inherited from DGL's defaults, and guarded by
``tests/test_initialisation.py`` (a fresh model's loss near ln C, falling through the first epochs, hidden units
alive).

Measured on the 50K-node synthetic graph (64 features, 16 classes, degree 20; 3 layers x 64, dropout 0.5, Adam
lr 0.01), one process, whole graph, seed 0; first loss in training mode (ln 16 = 2.77):

- **GraphSAGE** (``MeanSAGEConv.reset_parameters``): torch's ``nn.Linear`` init on both branches. DGL's
  xavier-uniform with the ReLU gain: first loss 9.1, a plateau at ln 16, ~40% of a hidden layer dead, 71.2% test
  at 60 epochs; torch's: 2.80, 2-3% dead, 76.1%.
- **GCN**: DGL's ``GraphConv`` init kept (Glorot uniform, zero bias: Kipf and Welling's). First loss 2.78, at most
  8% of units dead; torch's ``Linear`` init starts at 2.78 too but learns slower (loss 2.31 against 1.88 at
  epoch 10).
- **GAT** (``initialise_gat``): the projection ``fc`` as torch's ``nn.Linear``; the attention vectors keep DGL's
  xavier-normal. DGL's fc (xavier-normal with the ReLU gain) gives the 256 -> 16 output layer 3.8 / fan_in of
  weight variance: first loss 3.86, against 2.78 with torch's, which reaches the same accuracy sooner (71.4% after
  one epoch against 19.7%).

Neither a norm layer nor input dropout is offered: on that graph LayerNorm after each hidden layer gave 76.2%
against 76.1% at 60 epochs and 72.8% against 73.3% at 20, and input dropout 0.1 75.3% against 76.1%.
"""
from __future__ import annotations

from sylvie.models.gat import GATConv


def initialise_gat(conv: GATConv) -> GATConv:
    """torch's ``nn.Linear`` init for GAT's projection (``fc``), in place; the attention vectors and zero bias stay
    as DGL sets them."""
    conv.fc.reset_parameters()
    if conv.fc_dst is not None:
        conv.fc_dst.reset_parameters()
    return conv
