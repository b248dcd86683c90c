"""Partition-parallel training of every architecture (GCN, GraphSAGE and GAT per relation, R-GCN, R-GAT) equals one
process on the whole typed graph (float64): 1, 2 and 4 ranks of the real trainer, each a step's loss and every
gradient (the embedding tables' rows too, which the ranks hold partitioned: their halo rows travel forward and their
gradients back). The one-process model is the one ``tests/test_typed_models.py`` holds to DGL's ``HeteroGraphConv``
/ ``RelGraphConv``; the ranks run without DGL."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.commands import REPO, ranks
from support.no_dgl import NoDGL
from support.partitioned_ranks import dropped_by, halo_plan

from sylvie.data.graph import load_graph
from sylvie.formats.partition_manifest import read_manifest
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gnn import GNN
from sylvie.partition.shard_reader import read_shard

pytestmark = pytest.mark.slow

ARCHS = ("gcn", "sage", "gat", "rgcn", "rgcn-bases", "rgat", "rgat-noloop", "rgcn-bns")
BNS_SHARE, SEED = 0.5, 0  # the worker's boundary-node sampling (rgcn-bns) and seed


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


def dropped_edges(partition_dir, epoch: int) -> np.ndarray:
    """(global source, global destination, relation) of the edges that the ranks' boundary samples of ``epoch`` drop:
    those from the halo rows a rank does not keep (drawn as the trainer draws them, from the halo counts alone)."""
    manifest = read_manifest(partition_dir)
    shards = [read_shard(partition_dir, r, manifest) for r in range(manifest["num_parts"])]
    dropped = []
    for r, s in enumerate(shards):
        gone = dropped_by(s, halo_plan(shards, r), BNS_SHARE, SEED, r, epoch)
        src, dst = np.asarray(s.edge_src, np.int64), np.asarray(s.edge_dst, np.int64)
        dropped.append(np.stack([np.asarray(s.halo_global_id, np.int64)[src[gone] - s.num_inner],
                                 np.asarray(s.global_id, np.int64)[dst[gone]], s.edge_relation[gone]], 1))
    return np.concatenate(dropped)


def one_process(graph, name, states, partition_dir=None):
    """Loss and gradients of the whole graph in one process, float64, from each of ``states`` (rgcn-bns: step e on
    the graph less the edges epoch e's boundary samples on ``partition_dir``'s ranks drop)."""
    arch, _, variant = name.partition("-")
    loops = arch in ("gcn", "sage", "gat")  # each architecture's own: an added edge, or a self-loop weight

    def block(epoch):
        keep = np.ones(len(graph.src), bool)
        if variant == "bns":
            n, r = graph.num_nodes, len(graph.types.relations)
            code = (np.asarray(graph.src, np.int64) * n + graph.dst) * r + graph.relation
            gone = dropped_edges(partition_dir, epoch)
            keep = ~np.isin(code, (gone[:, 0] * n + gone[:, 1]) * r + gone[:, 2])
            assert (~keep).sum() >= len(gone) > 0 or partition_dir.name.endswith("p1")
        return whole_graph_block(graph.src[keep], graph.dst[keep], graph.node_counts, loops, types=graph.types,
                                 relation=graph.relation[keep])
    model = GNN(arch, graph.feature_widths, hidden=8, num_classes=graph.num_classes, layers=2, dropout=0.0, heads=2,
                num_bases=2 if variant == "bases" else None, embedding_rows=graph.node_counts,
                loop_weight=not loops and variant != "noloop", types=graph.types).double()
    papers = graph.node_counts[graph.types.target_index]
    x = [None if f is None else torch.tensor(f).double() for f in graph.type_features]
    y = torch.tensor(graph.labels[:papers])
    train = torch.tensor(graph.train_mask[:papers])
    losses, grads = [], []
    for epoch, state in enumerate(states):
        model.load_state_dict({k: v.double() for k, v in state.items()})
        model.zero_grad()
        loss = F.cross_entropy(model(block(epoch), x)[train], y[train])
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    return losses, grads


@pytest.mark.parametrize("parts", [1, 2, 4])
@pytest.mark.parametrize("arch", ARCHS)
def test_partitioned_typed_training_matches_one_process(arch, parts, typed_partitions, our_steps):
    graph = load_graph(typed_partitions[0])
    ours = our_steps(parts)[arch]
    ref_losses, ref_grads = one_process(graph, arch, ours["states"], typed_partitions[1][parts])
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
    first = next(k for k in ours["states"][0] if k.startswith("convs.0."))
    assert not torch.equal(ours["states"][0][first], ours["states"][2][first])
