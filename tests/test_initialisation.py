"""Every model we ship starts where training can go somewhere: on a graph shaped like the users' (the synthetic
generator's defaults: 16 classes, 64 features, degree 20, label and feature noise), a fresh 3-layer model's loss is
near ln C (it predicts nothing yet), falls through the first epochs instead of sitting on the ln C plateau, and
keeps most of its hidden units alive.

DGL's SAGEConv initialisation failed all three: a first loss of 9.1 on the 50K-node graph, a plateau at ln 16
from epoch 7 to ~22, and 40% of the second hidden layer's units dead (``sylvie/models/sage.py``)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sylvie.data.synthetic import generate
from sylvie.models import GNN
from sylvie.models.blocks import whole_graph_block

ARCHS = ("gcn", "sage", "gat")  # R-GCN and R-GAT start as DGL's RelGraphConv and GATConv do


CLASSES = 16


@pytest.fixture(scope="module")
def graph():
    g = generate(nodes=3000, avg_degree=20, features=64, classes=CLASSES, homophily=0.8, feature_noise=4.0,
                 label_noise=0.3, train_fraction=0.3, val_fraction=0.1, seed=0)
    block = whole_graph_block(g.src, g.dst, g.num_nodes, self_loop=True)
    return block, torch.tensor(g.features), torch.tensor(g.labels), torch.tensor(np.flatnonzero(g.train_mask))


def _model(arch: str, seed: int) -> GNN:
    torch.manual_seed(seed)
    return GNN(arch, 64, 64, CLASSES, layers=3, dropout=0.5, heads=4)


def _dead_units(model: GNN, block, x) -> list[float]:
    """Per hidden layer: the share of units that are never positive (after the activation) on any node, in eval
    mode. The model hands every hidden layer's output to its halo function, which here has no rows to add."""
    seen = []

    def no_halo(inner, layer):  # one node type: a list of one
        seen.append(inner[0])
        return [inner[0].new_empty((0, inner[0].shape[1]))]

    model.eval()
    with torch.no_grad():
        model(block, x, no_halo)
    return [float(((h > 0).sum(0) == 0).float().mean()) for h in seen]


def _train(arch: str, seed: int, graph, epochs: int) -> tuple[list[float], GNN]:
    block, x, y, train = graph
    model = _model(arch, seed)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(block, x)[train], y[train])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses, model


@pytest.mark.unit
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_fresh_model_starts_near_ln_c(arch, seed, graph):
    """In training mode (dropout on), the first loss is within 0.25 of ln C: the logits start small."""
    block, x, y, train = graph
    model = _model(arch, seed).train()
    with torch.no_grad():
        loss = float(F.cross_entropy(model(block, x)[train], y[train]))
    assert abs(loss - math.log(CLASSES)) < 0.25, f"{arch}: first loss {loss:.3f}, ln C = {math.log(CLASSES):.3f}"


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_the_loss_falls_and_the_units_live(arch, graph):
    """Over the first 15 epochs the loss falls well below ln C (no plateau where every node gets the same
    prediction), and no hidden layer has a quarter of its units dead."""
    losses, model = _train(arch, 0, graph, epochs=15)
    assert losses[-1] < math.log(CLASSES) - 0.5, f"{arch}: losses {[round(v, 3) for v in losses]}"
    assert np.mean(losses[-5:]) < np.mean(losses[5:10]) - 0.05, f"{arch}: no longer falling: {losses}"
    block, x, _, _ = graph
    dead = _dead_units(model, block, x)
    assert max(dead) < 0.25, f"{arch}: dead hidden units per layer {dead}"


@pytest.mark.unit
@pytest.mark.parametrize("seed", [0, 1])
def test_a_link_encoder_starts_as_dgls_sageconv(seed):
    """A link-prediction GraphSAGE (its outputs embeddings scored by a dot product) starts as DGL's SAGEConv does:
    both branches xavier-uniform with the ReLU gain (bound and spread of the draw), zero bias; the same model for node
    classification keeps torch's ``nn.Linear`` init (bound 1 / sqrt(fan in))."""
    from sylvie.config import section
    from sylvie.models import build_model
    from sylvie.models.sage import MeanSAGEConv

    cfg = section("model", {"arch": "sage", "hidden": 64, "layers": 2})
    torch.manual_seed(seed)
    link = build_model(cfg, 128, 5, link=section("link", {}))
    torch.manual_seed(seed)
    node = build_model(cfg, 128, 5)
    gain = math.sqrt(2.0)
    for lc, nc in zip((m for m in link.modules() if isinstance(m, MeanSAGEConv)),
                      (m for m in node.modules() if isinstance(m, MeanSAGEConv)), strict=True):
        for lw, nw in ((lc.fc_self.weight, nc.fc_self.weight), (lc.fc_neigh.weight, nc.fc_neigh.weight)):
            fan_out, fan_in = lw.shape
            bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
            assert float(lw.abs().max()) <= bound and float(lw.abs().max()) > 0.95 * bound
            assert abs(float(lw.std()) - bound / math.sqrt(3)) < 0.05 * bound
            assert float(nw.abs().max()) <= 1 / math.sqrt(fan_in)
        assert not lc.fc_self.bias.any()
        assert nc.fc_self.bias.any()
