"""Partition-parallel training equals single-process whole-graph DGL training (float64 reference): every architecture
at 1, 2 and 4 ranks, the ranks running without DGL."""
import dgl
import pytest
import torch
import torch.nn.functional as F
from support.commands import REPO, ranks
from support.dgl_models import Reference
from support.no_dgl import NoDGL

from sylvie.data.graph import load_graph
from sylvie.models.state_dict_adapter import one_relation_keys

pytestmark = pytest.mark.slow


def reference_steps(graph, arch, states):
    """Loss and gradients of the whole-graph float64 reference from each of ``states`` (our weights before each
    step). Each step starts from our weights rather than from the reference's own Adam step: Adam divides by
    sqrt(v) + 1e-8, so a gradient element near 1e-8 (GAT's first-layer bias at init) turns float32 rounding into a
    different step, and a comparison of trajectories would measure that, not our gradients."""
    # copies: the canonical graph's arrays are read-only (memory-mapped Arrow)
    g = dgl.graph((torch.tensor(graph.src), torch.tensor(graph.dst)), num_nodes=graph.num_nodes)
    if arch in ("gcn", "gat"):
        g = dgl.add_self_loop(g)
    x = torch.tensor(graph.features).double()
    y = torch.tensor(graph.labels)
    train = torch.tensor(graph.train_mask)
    model = Reference(arch, x.shape[1], 16, graph.num_classes).double()
    losses, grads = [], []
    for state in states:
        model.load_state_dict({k: v.double() for k, v in one_relation_keys(state).items()})
        model.zero_grad()
        loss = F.cross_entropy(model(g, x)[train], y[train])
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    return losses, grads


CASES = [(a, p) for a in ("gcn", "sage", "gat") for p in (1, 2, 4)]


@pytest.fixture(scope="module")
def our_steps(cora_partitions, tmp_path_factory):
    """parts -> arch -> what the worker saved: the archs of every case with that many parts trained in one launch
    (one after another in the same ranks), when a test first asks for that part count. The ranks run with `import
    dgl` refused (tests/support/no_dgl.py): what is compared with DGL here is trained without it."""
    done = {}
    no_dgl = NoDGL(tmp_path_factory.mktemp("no-dgl"))

    def steps(parts):
        if parts not in done:
            out = tmp_path_factory.mktemp(f"steps-p{parts}")
            archs = [a for a, p in CASES if p == parts]
            no_dgl.clear()
            ranks(parts, REPO / "tests" / "workers" / "exactness_worker.py", cora_partitions[parts], ",".join(archs),
                     out, env=no_dgl.env)
            no_dgl.assert_sylvie_never_asked(parts)
            done[parts] = {a: torch.load(out / f"{a}.pt") for a in archs}
        return done[parts]

    return steps


@pytest.mark.parametrize(("arch", "parts"), CASES)
def test_partitioned_training_matches_whole_graph_dgl(arch, parts, cora_dir, our_steps):
    ours = our_steps(parts)[arch]
    assert len(ours["states"]) == 3
    ref_losses, ref_grads = reference_steps(load_graph(cora_dir), arch, ours["states"])
    torch.testing.assert_close(torch.tensor(ours["losses"], dtype=torch.float64),
                               torch.tensor(ref_losses, dtype=torch.float64), rtol=1e-4, atol=0)
    for step, (g_ours, g_ref) in enumerate(zip(ours["grads"], ref_grads)):
        g_ours = one_relation_keys(g_ours)  # our names, a layer's one convolution as DGL's stack names it
        assert g_ours.keys() == g_ref.keys()
        for name in g_ref:
            scale = g_ref[name].abs().max()
            torch.testing.assert_close(g_ours[name].double(), g_ref[name], rtol=1e-4, atol=1e-4 * float(scale),
                                       msg=lambda m, step=step, name=name: f"step {step}, {name}: {m}")
