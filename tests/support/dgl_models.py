"""The tests' DGL models: the independent reference our layer stack is compared with (single-process, float64)."""
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import GATConv, GraphConv, SAGEConv

HEADS = 4  # the schema's default model.heads, which the worker trains with


class Reference(nn.Module):
    """Plain DGL on the whole graph: GraphConv(norm='both') with self-loops, SAGEConv('mean'), or GATConv with
    self-loops (HEADS heads in the hidden layer, their outputs concatenated; one head in the output layer)."""

    def __init__(self, arch, d_in, hidden, classes):
        super().__init__()
        self.arch = arch
        if arch == "gat":
            self.convs = nn.ModuleList([GATConv(d_in, hidden, HEADS), GATConv(hidden * HEADS, classes, 1)])
            return
        conv = (lambda i, o: GraphConv(i, o, norm="both")) if arch == "gcn" else (lambda i, o: SAGEConv(i, o, "mean"))
        self.convs = nn.ModuleList([conv(d_in, hidden), conv(hidden, classes)])

    def forward(self, g, x):
        if self.arch == "gat":
            return self.convs[1](g, F.elu(self.convs[0](g, x).flatten(1))).mean(1)
        return self.convs[1](g, F.relu(self.convs[0](g, x)))
