"""Link prediction on a typed graph: the edges of one relation (the mag preset's paper -cites-> paper, named by
``edge_split_relation``) split into training, validation and test pairs, held-out pairs leaving the relation and its
reverse, negatives of the relation's destination type; and R-GCN and R-GAT trained full-graph on 1 and 2 ranks (the
pairs' remote ends fetched from their owners, a DistMult weight per relation) equal one process on the whole typed
graph in float64: each step's loss and every gradient, the embedding tables' too. The one-process model is the one
``tests/test_typed_models.py`` holds to DGL's ``RelGraphConv`` / ``HeteroGraphConv``; the ranks run without DGL."""
import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.commands import REPO, ranks
from support.graphs import LazyPartitions
from support.no_dgl import NoDGL

from sylvie.config import section
from sylvie.data.graph import load_graph, save_graph
from sylvie.data.link_split import split_edges
from sylvie.formats.link_pairs import TRAIN
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gnn import build_model
from sylvie.models.registry import self_loop_edges
from sylvie.sampling.negatives import negatives_key, uniform_negatives

CASES = ("rgcn:distmult:2", "rgat:distmult:1", "rgcn-bases:dot:1")  # arch[-variant]:decoder:negatives (worker's)
PARTS = (1, 2)


@pytest.fixture(scope="module")
def typed_link(small_mag, tmp_path_factory):
    """``small_mag`` with 10% of its citations held out for validation and 10% for test, 20 negatives each; its
    canonical folder and its METIS cuts."""
    graph = split_edges(small_mag, [0.1, 0.1], 0, 20, "small mag", "cites")
    out = tmp_path_factory.mktemp("datasets") / "small-mag-link"
    save_graph(dataclasses.replace(graph, name="small-mag-link"), out, source="synthetic")
    return out, LazyPartitions(out, tmp_path_factory.mktemp("small-mag-link-partitions"))


def _relation(graph, name):
    return next(i for i, r in enumerate(graph.types.relations) if r.name == name)


@pytest.mark.unit
def test_the_named_relations_held_out_pairs_leave_it_and_its_reverse(small_mag, typed_link):
    graph = load_graph(typed_link[0])
    cites, back = _relation(small_mag, "cites"), _relation(small_mag, "rev-cites")
    link = graph.link
    assert set(np.unique(link.relation)) == {cites}
    n = small_mag.num_nodes

    def keys(g, r, reverse=False):
        at = g.relation == r
        s, d = (g.dst[at], g.src[at]) if reverse else (g.src[at], g.dst[at])
        return set((np.asarray(s, np.int64) * n + d).tolist())

    before, after = keys(small_mag, cites), keys(graph, cites)
    pairs = set((np.asarray(link.src, np.int64) * n + link.dst).tolist())
    held = set((np.asarray(link.src, np.int64) * n + link.dst)[link.split != TRAIN].tolist())
    assert pairs == before and after == before - held and len(held) == 2 * round(0.1 * len(before))
    assert keys(graph, back, reverse=True) == after  # the reverse relation keeps the training citations only
    for r in range(len(small_mag.types.relations)):  # the other relations keep every edge
        if r not in (cites, back):
            assert keys(graph, r) == keys(small_mag, r)
    # negatives: papers, none a citation of the pair's source in any split, none the source itself
    first, count = graph.type_offsets[graph.types.target_index], graph.node_counts[graph.types.target_index]
    neg, src = link.negatives, link.src[link.split != TRAIN]
    assert neg.shape == (len(held), 20) and ((neg >= first) & (neg < first + count)).all()
    assert not (neg == src[:, None]).any()
    assert not set((src[:, None].astype(np.int64) * n + neg).ravel().tolist()) & before


def one_process(graph, case, states):
    """Loss and gradients of the whole typed graph in one process, float64, from each of ``states``: the training
    citations scored against each step's uniform negatives (seed 0) of the pair's destination type, BCE."""
    name, decoder, k = case.split(":")
    arch, _, variant = name.partition("-")
    k = int(k)
    model_cfg = section("model", {"arch": arch, "dropout": 0.0, "hidden": 8, "heads": 2, "layers": 2,
                                  "num_bases": 2 if variant == "bases" else None})
    model = build_model(model_cfg, graph.feature_widths, graph.num_classes, types=graph.types,
                        embedding_rows=graph.node_counts, link=section("link", {"decoder": decoder})).double()
    block = whole_graph_block(graph.src, graph.dst, graph.node_counts, self_loop_edges(model_cfg), types=graph.types,
                              relation=graph.relation)
    x = [None if f is None else torch.tensor(f).double() for f in graph.type_features]
    paper = graph.types.target_index
    first, count = int(graph.type_offsets[paper]), int(graph.node_counts[paper])
    numbers = graph.link.indices("train")
    src, dst = (torch.tensor(np.asarray(a[numbers], np.int64) - first) for a in (graph.link.src, graph.link.dst))
    relation = int(graph.link.relation[0])
    losses, grads = [], []
    for step, state in enumerate(states):
        model.load_state_dict({n: v.double() for n, v in state.items()})
        model.zero_grad()
        h = model(block, x, out_types=[paper])[paper]
        neg = torch.tensor(uniform_negatives(negatives_key(0, step), numbers, k, first, count) - first)
        w = model.decoder.relation_weight[relation] if decoder == "distmult" else 1.0
        pos, negs = (h[src] * w * h[dst]).sum(-1), (h[src].unsqueeze(1) * w * h[neg]).sum(-1)
        scores = torch.cat([pos, negs.reshape(-1)])
        loss = F.binary_cross_entropy_with_logits(scores, (torch.arange(len(scores)) < len(pos)).double())
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    return losses, grads


@pytest.fixture(scope="module")
def our_steps(typed_link, tmp_path_factory):
    no_dgl = NoDGL(tmp_path_factory.mktemp("no-dgl"))
    done = {}
    for parts in PARTS:
        out = tmp_path_factory.mktemp(f"typed-link-steps-p{parts}")
        no_dgl.clear()
        ranks(parts, REPO / "tests" / "workers" / "typed_link_worker.py", typed_link[1][parts], ",".join(CASES), out,
              env=no_dgl.env)
        no_dgl.assert_sylvie_never_asked(parts)
        done[parts] = {c: torch.load(out / f"{c.replace(':', '-')}.pt") for c in CASES}
    return done


@pytest.mark.slow
@pytest.mark.parametrize("parts", PARTS)
@pytest.mark.parametrize("case", CASES)
def test_partitioned_typed_link_training_matches_one_process(case, parts, typed_link, our_steps):
    graph = load_graph(typed_link[0])
    ours = our_steps[parts][case]
    ref_losses, ref_grads = one_process(graph, case, ours["states"])
    np.testing.assert_allclose(ours["losses"], ref_losses, rtol=1e-4)
    assert any(n.startswith("embeddings.") for n in ref_grads[0])
    if case.split(":")[1] == "distmult":
        assert "decoder.relation_weight" in ref_grads[0]
    for step, (g_ours, g_ref) in enumerate(zip(ours["grads"], ref_grads, strict=True)):
        largest = max(float(g.abs().max()) for g in g_ref.values())
        for name in set(g_ours) | set(g_ref):  # a weight the loss never reaches: none here, zeros on the ranks
            want = g_ref[name] if name in g_ref else torch.zeros_like(g_ours[name], dtype=torch.float64)
            mine = torch.zeros_like(want) if g_ours.get(name) is None else g_ours[name].double()
            scale = max(float(want.abs().max()), largest * 1e-3)
            torch.testing.assert_close(mine, want, rtol=1e-4, atol=1e-4 * scale,
                                       msg=lambda m, step=step, name=name: f"step {step}, {name}: {m}")
    first = next(k for k in ours["states"][0] if k.startswith("convs.0."))
    assert not torch.equal(ours["states"][0][first], ours["states"][2][first])
