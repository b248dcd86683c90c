"""Partition-parallel R-GCN and R-GAT training equals one process on the whole typed graph (float64): 1, 2 and 4
ranks of the real trainer, each a step's loss and every gradient (the embedding tables' rows too, which the ranks
hold partitioned: their halo rows travel forward and their gradients back). The one-process model is the one
``tests/test_typed_models.py`` holds to DGL's ``HeteroGraphConv`` / ``RelGraphConv``; the ranks run without DGL."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.commands import REPO, ranks
from support.no_dgl import NoDGL

from sylvie.data.graph import load_graph
from sylvie.models.blocks import whole_graph_typed_block
from sylvie.models.typed_gnn import TypedGNN

pytestmark = pytest.mark.slow

ARCHS = ("rgcn", "rgcn-bases", "rgat", "rgat-noloop")


@pytest.fixture(scope="module")
def typed_partitions(small_mag_dir, small_mag_partitions):
    """The tests' small graph of the mag preset (papers with features; authors, institutions and fields learnt as
    embeddings), cut by METIS into 1, 2 and 4 parts."""
    return small_mag_dir, small_mag_partitions


@pytest.fixture(scope="module")
def our_steps(typed_partitions, tmp_path_factory):
    done = {}
    no_dgl = NoDGL(tmp_path_factory.mktemp("no-dgl"))

    def steps(parts):
        if parts not in done:
            out = tmp_path_factory.mktemp(f"typed-steps-p{parts}")
            no_dgl.clear()
            ranks(parts, REPO / "tests" / "workers" / "typed_exactness_worker.py", typed_partitions[1][parts],
                  ",".join(ARCHS), out, env=no_dgl.env)
            no_dgl.assert_sylvie_never_asked(parts)
            done[parts] = {a: torch.load(out / f"{a}.pt") for a in ARCHS}
        return done[parts]

    return steps


def one_process(graph, name, states):
    """Loss and gradients of the whole graph in one process, float64, from each of ``states``."""
    arch, _, variant = name.partition("-")
    tb = whole_graph_typed_block(graph.types, graph.node_counts, graph.src, graph.dst, graph.relation)
    model = TypedGNN(arch, graph.types, graph.feature_widths, hidden=8, num_classes=graph.num_classes, layers=2,
                     dropout=0.0, heads=2, num_bases=2 if variant == "bases" else None,
                     embedding_rows=graph.node_counts, embedding_width=12, self_loop=variant != "noloop").double()
    papers = graph.node_counts[graph.types.target_index]
    x = [None if f is None else torch.tensor(f).double() for f in graph.type_features]
    y = torch.tensor(graph.labels[:papers])
    train = torch.tensor(graph.train_mask[:papers])
    losses, grads = [], []
    for state in states:
        model.load_state_dict({k: v.double() for k, v in state.items()})
        model.zero_grad()
        loss = F.cross_entropy(model(tb, x)[train], y[train])
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    return losses, grads


@pytest.mark.parametrize("parts", [1, 2, 4])
@pytest.mark.parametrize("arch", ARCHS)
def test_partitioned_typed_training_matches_one_process(arch, parts, typed_partitions, our_steps):
    graph = load_graph(typed_partitions[0])
    ours = our_steps(parts)[arch]
    ref_losses, ref_grads = one_process(graph, arch, ours["states"])
    np.testing.assert_allclose(ours["losses"], ref_losses, rtol=1e-4)
    assert any(n.startswith("embeddings.") for n in ref_grads[0])
    for step, (g_ours, g_ref) in enumerate(zip(ours["grads"], ref_grads, strict=True)):
        # a weight that reaches the loss in neither has no gradient there: in one process none, on the ranks
        # zeros where its rows travel to peers (the exchange's backward) without reaching the loss
        for name in set(g_ours) | set(g_ref):
            mine = g_ours.get(name)
            want = g_ref[name] if name in g_ref else torch.zeros_like(mine, dtype=torch.float64)
            mine = torch.zeros_like(want) if mine is None else mine.double()
            scale = float(want.abs().max())
            torch.testing.assert_close(mine, want, rtol=1e-4, atol=1e-4 * scale,
                                       msg=lambda m, step=step, name=name: f"step {step}, {name}: {m}")
    # the steps moved the weights: a test of three equal states would not see the optimiser
    assert not torch.equal(ours["states"][0]["convs.0.loop_weight.0" if arch.startswith("rgcn") else
                                            "convs.0.convs.0.fc.weight"], ours["states"][2][
        "convs.0.loop_weight.0" if arch.startswith("rgcn") else "convs.0.convs.0.fc.weight"])
