"""R-GCN and R-GAT on our typed block against DGL in float64, forward and every gradient, on both of our paths (the
CPU kernels, and PyTorch's operations, which a GPU runs): a layer against ``HeteroGraphConv`` of ``GraphConv``
(``norm='right'``) plus the self-loop, against ``RelGraphConv`` with basis decomposition, and against
``HeteroGraphConv`` of ``GATConv``; whole stacks with a node type without features (an embedding table) against
the same stacks written in DGL."""
import dgl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dgl.nn import GATConv as DGLGATConv
from dgl.nn import GraphConv as DGLGraphConv
from dgl.nn import HeteroGraphConv, RelGraphConv
from dgl.nn import SAGEConv as DGLSAGEConv

from sylvie.graph_types import HOMOGENEOUS, GraphTypes, Relation
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gat import GATConv
from sylvie.models.gnn import GNN
from sylvie.models.initialisation import initialise_gat
from sylvie.models.ops import torch_ops
from sylvie.models.relational_conv import RelationalConv
from sylvie.models.rgcn import RelGraphConv as OurRelGraphConv

PATHS = ("kernels", "torch")
TYPES = GraphTypes(("paper", "author", "field"),
                   (Relation("author", "writes", "paper"), Relation("paper", "cites", "paper"),
                    Relation("paper", "has-topic", "field"), Relation("paper", "written-by", "author"),
                    Relation("field", "topic-of", "paper")),
                   "paper")
COUNTS = (30, 17, 6)
WIDTHS = (5, 3, 5)  # author's width differs from paper's (R-GAT's writes: fc and fc_dst)


def typed_graph(types=TYPES, counts=COUNTS, edges=(70, 90, 40, 50, 25), seed=0):
    """(src, dst, relation) with global type-contiguous ids; some destinations get no in-edge of a relation."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    src, dst, rel = [], [], []
    for r, m in enumerate(edges):
        s, d = types.ends(r)
        src.append(offsets[s] + rng.integers(0, counts[s], m))
        dst.append(offsets[d] + rng.integers(0, max(1, counts[d] - 2), m))
        rel.append(np.full(m, r))
    return np.concatenate(src), np.concatenate(dst), np.concatenate(rel)


def dgl_graph(types, counts, src, dst, rel):
    offsets = np.concatenate([[0], np.cumsum(counts)])
    data = {}
    for r, relation in enumerate(types.relations):
        s, d = types.ends(r)
        mine = rel == r
        data[(relation.src, relation.name, relation.dst)] = (torch.tensor(src[mine] - offsets[s]),
                                                             torch.tensor(dst[mine] - offsets[d]))
    return dgl.heterograph(data, num_nodes_dict=dict(zip(types.node_types, counts, strict=True)))


def run(path, fn):
    if path == "torch":
        with torch_ops():
            return fn()
    return fn()


def features(widths, counts, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, w, generator=g, dtype=torch.float64, requires_grad=True) for n, w in zip(counts, widths,
                                                                                                    strict=True)]


def close(a, b, what):
    assert a is not None and b is not None, what
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10, msg=what)


def dgl_rgcn_layer(types, widths, out, ours: OurRelGraphConv):
    """DGL's typed R-GCN layer (as DGL's own heterogeneous R-GCN example builds it): a ``GraphConv`` per relation
    averaging its in-edges, summed by ``HeteroGraphConv``; our weights copied in."""
    mods = {}
    weights = ours.relation_weights()
    for r, relation in enumerate(types.relations):
        conv = DGLGraphConv(widths[types.type_index(relation.src)], out, norm="right", bias=False,
                            allow_zero_in_degree=True).double()
        with torch.no_grad():
            conv.weight.copy_(weights[r])
        mods[relation.name] = conv
    return HeteroGraphConv(mods, aggregate="sum")


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("out", [4, 2])  # widens (mean, then weight) and narrows (weight, then mean)
def test_rgcn_layer_matches_dgl_heterograph_conv(path, out):
    src, dst, rel = typed_graph()
    tb = whole_graph_block(src, dst, COUNTS, types=TYPES, relation=rel)
    ours = OurRelGraphConv(WIDTHS, out, [TYPES.ends(r) for r in range(len(TYPES.relations))]).double()
    with torch.no_grad():
        ours.bias.uniform_(-1, 1)
    xs = features(WIDTHS, COUNTS)
    got = run(path, lambda: ours(tb, xs))
    g = dgl_graph(TYPES, COUNTS, src, dst, rel)
    theirs = dgl_rgcn_layer(TYPES, WIDTHS, out, ours)
    xs2 = [x.detach().clone().requires_grad_() for x in xs]
    msgs = theirs(g, dict(zip(TYPES.node_types, xs2, strict=True)))
    want = [msgs.get(t, 0) + x @ ours.loop_weight[i] + ours.bias for i, (t, x) in enumerate(zip(TYPES.node_types, xs2,
                                                                                                 strict=True))]
    for t, (a, b) in enumerate(zip(got, want, strict=True)):
        close(a, b, f"output of {TYPES.node_types[t]}")
    w = torch.randn(sum(COUNTS), out, dtype=torch.float64).split(COUNTS)
    sum((a * c).sum() for a, c in zip(got, w, strict=True)).backward()
    sum((b * c).sum() for b, c in zip(want, w, strict=True)).backward()
    for t in range(3):
        close(xs[t].grad, xs2[t].grad, f"input gradient of {TYPES.node_types[t]}")
    for r, relation in enumerate(TYPES.relations):
        close(ours.weight[r].grad, theirs.mods[relation.name].weight.grad, f"weight gradient of {relation}")


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
def test_rgcn_bases_match_dgl_rel_graph_conv(path):
    """One node type, three relations, basis decomposition: DGL's ``RelGraphConv`` with each edge's norm 1 / its
    destination's in-edges of the edge's relation."""
    rels = tuple(Relation("node", f"r{i}", "node") for i in range(3))
    types = GraphTypes(("node",), rels, "node")
    n = 25
    src, dst, rel = typed_graph(types, (n,), (60, 40, 30))
    tb = whole_graph_block(src, dst, (n,), types=types, relation=rel)
    ours = OurRelGraphConv((6,), 4, [(0, 0)] * 3, num_bases=2).double()
    with torch.no_grad():
        ours.bias.uniform_(-1, 1)
    theirs = RelGraphConv(6, 4, 3, regularizer="basis", num_bases=2, self_loop=True, bias=True).double()
    with torch.no_grad():
        theirs.linear_r.W.copy_(ours.bases)
        theirs.linear_r.coeff.copy_(ours.coeff)
        theirs.loop_weight.copy_(ours.loop_weight[0])
        theirs.h_bias.copy_(ours.bias)
    key = dst * 3 + rel
    norm = 1.0 / np.bincount(key, minlength=n * 3)[key]
    g = dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=n)
    x = features((6,), (n,))[0]
    x2 = x.detach().clone().requires_grad_()
    got = run(path, lambda: ours(tb, [x]))[0]
    want = theirs(g, x2, torch.tensor(rel), torch.tensor(norm, dtype=torch.float64).unsqueeze(1))
    close(got, want, "output")
    w = torch.randn_like(got)
    (got * w).sum().backward()
    (want * w).sum().backward()
    close(x.grad, x2.grad, "input gradient")
    close(ours.bases.grad, theirs.linear_r.W.grad, "bases' gradient")
    close(ours.coeff.grad, theirs.linear_r.coeff.grad, "coefficients' gradient")
    close(ours.loop_weight[0].grad, theirs.loop_weight.grad, "self-loop weight's gradient")
    close(ours.bias.grad, theirs.h_bias.grad, "bias gradient")


def dgl_gat(ours_conv, in_src, in_dst, out, heads):
    conv = DGLGATConv(in_src if in_src == in_dst else (in_src, in_dst), out, heads, allow_zero_in_degree=True)
    conv = conv.double()
    with torch.no_grad():
        if in_src == in_dst:
            conv.fc.weight.copy_(ours_conv.fc.weight)
        else:
            conv.fc_src.weight.copy_(ours_conv.fc.weight)
            conv.fc_dst.weight.copy_(ours_conv.fc_dst.weight)
        conv.attn_l.copy_(ours_conv.attn_l)
        conv.attn_r.copy_(ours_conv.attn_r)
        conv.bias.copy_(ours_conv.bias)
    return conv


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("self_loop", [True, False])
def test_rgat_layer_matches_dgl_heterograph_conv(path, self_loop):
    """DGL's HeteroGraphConv of GATConvs, plus x_v W_loop[type] (computed here by hand) with the self-loop."""
    src, dst, rel = typed_graph()
    tb = whole_graph_block(src, dst, COUNTS, types=TYPES, relation=rel)
    heads, out = 2, 3
    ends = [TYPES.ends(r) for r in range(len(TYPES.relations))]
    convs = [initialise_gat(GATConv(WIDTHS[s] if WIDTHS[s] == WIDTHS[d] else (WIDTHS[s], WIDTHS[d]), out, heads))
             for s, d in ends]
    ours = RelationalConv(convs, ends, WIDTHS if self_loop else None, out, heads).double()
    assert (ours.loop_weight is not None) == self_loop
    with torch.no_grad():
        for conv in ours.convs:
            conv.bias.uniform_(-1, 1)
    xs = features(WIDTHS, COUNTS)
    got = run(path, lambda: ours(tb, xs))
    theirs = HeteroGraphConv({rel_.name: dgl_gat(ours.convs[r], WIDTHS[ends[r][0]], WIDTHS[ends[r][1]], out, heads)
                              for r, rel_ in enumerate(TYPES.relations)}, aggregate="sum")
    xs2 = [x.detach().clone().requires_grad_() for x in xs]
    want = theirs(dgl_graph(TYPES, COUNTS, src, dst, rel), dict(zip(TYPES.node_types, xs2, strict=True)))
    loops = [w.detach().clone().requires_grad_() for w in ours.loop_weight] if self_loop else None
    if self_loop:
        want = {name: want[name] + (xs2[t] @ loops[t]).view(-1, heads, out)
                for t, name in enumerate(TYPES.node_types)}
    w = [torch.randn(n, heads, out, dtype=torch.float64) for n in COUNTS]
    for t, name in enumerate(TYPES.node_types):
        close(got[t], want[name], f"output of {name}")
    sum((got[t] * w[t]).sum() for t in range(3)).backward()
    sum((want[n] * w[t]).sum() for t, n in enumerate(TYPES.node_types)).backward()
    for t in range(3):
        close(xs[t].grad, xs2[t].grad, f"input gradient of {TYPES.node_types[t]}")
        if self_loop:
            close(ours.loop_weight[t].grad, loops[t].grad, f"self-loop weight gradient of {TYPES.node_types[t]}")
    for r, relation in enumerate(TYPES.relations):
        mine, theirs_r = ours.convs[r], theirs.mods[relation.name]
        fc = theirs_r.fc if mine.fc_dst is None else theirs_r.fc_src
        close(mine.fc.weight.grad, fc.weight.grad, f"fc gradient of {relation}")
        if mine.fc_dst is not None:
            close(mine.fc_dst.weight.grad, theirs_r.fc_dst.weight.grad, f"fc_dst gradient of {relation}")
        for p in ("attn_l", "attn_r", "bias"):
            close(getattr(mine, p).grad, getattr(theirs_r, p).grad, f"{p} gradient of {relation}")


def loop(conv, t: int, x: torch.Tensor):
    """The self-loop term x W_loop[t] of ``conv`` (0 without the self-loop weight)."""
    return 0 if conv.loop_weight is None else x @ conv.loop_weight[t]


def dgl_stack(model: GNN, g, xs: dict, arch: str, layers: int):
    """The same stack in DGL, built from our model's parameters (its embedding tables included)."""
    types = model.types
    h = dict(xs)
    for t, name in enumerate(types.node_types):
        if str(t) in model.embeddings:
            h[name] = model.embeddings[str(t)].weight
    for i, conv in enumerate(model.convs):
        last = i == layers - 1
        widths = {name: h[name].shape[1] for name in types.node_types}
        if arch == "rgcn":
            mods = dgl_rgcn_layer(types, [widths[n] for n in types.node_types], conv.out_feats, conv)
            msgs = mods(g, h)
            out = {n: msgs.get(n, 0) + loop(conv, t, h[n]) + conv.bias for t, n in enumerate(types.node_types)}
        else:
            make = {"gcn": dgl_gcn, "sage": dgl_sage}.get(arch, dgl_gat)
            mods = HeteroGraphConv({rel.name: make(conv.convs[r], widths[rel.src], widths[rel.dst],
                                                   conv.out_feats, conv.num_heads)
                                    for r, rel in enumerate(types.relations)}, aggregate="sum")
            msgs = mods(g, h)
            out = {n: msgs[n] + (0 if conv.loop_weight is None else loop(conv, t, h[n]).view(msgs[n].shape))
                   for t, n in enumerate(types.node_types) if n in msgs}
            if conv.num_heads is not None:
                out = {n: (y.mean(1) if last else y.flatten(1)) for n, y in out.items()}
        h = out if last else {n: (F.elu(y) if arch in ("gat", "rgat") else F.relu(y)) for n, y in out.items()}
    return h[types.target]


def dgl_gcn(ours_conv, in_src, in_dst, out, heads):
    """DGL's GraphConv (symmetric normalisation by the relation's degrees) with our layer's weights."""
    conv = DGLGraphConv(in_src, out, norm="both", allow_zero_in_degree=True).double()
    with torch.no_grad():
        conv.weight.copy_(ours_conv.weight)
        conv.bias.copy_(ours_conv.bias)
    return conv


def dgl_sage(ours_conv, in_src, in_dst, out, heads):
    """DGL's SAGEConv (mean) with our layer's weights."""
    conv = DGLSAGEConv(in_src if in_src == in_dst else (in_src, in_dst), out, "mean").double()
    with torch.no_grad():
        conv.fc_neigh.weight.copy_(ours_conv.fc_neigh.weight)
        conv.fc_self.weight.copy_(ours_conv.fc_self.weight)
        conv.fc_self.bias.copy_(ours_conv.fc_self.bias)
    return conv


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ["gcn", "sage", "gat", "rgcn", "rgat"])
@pytest.mark.parametrize("self_loop", [True, False])
def test_stack_with_an_embedding_table_matches_dgl(path, arch, self_loop):
    """Three layers, dropout off, every architecture on a typed graph as DGL's ``HeteroGraphConv`` of the same
    convolutions (R-GCN: of ``GraphConv(norm='right')``), with and without a self-loop weight per type; ``field``
    has no features: its embedding rows get their gradients."""
    src, dst, rel = typed_graph()
    tb = whole_graph_block(src, dst, COUNTS, types=TYPES, relation=rel)
    widths = (5, 3, None)
    torch.manual_seed(0)
    model = GNN(arch, widths, hidden=4, num_classes=3, layers=3, dropout=0.0, heads=2, embedding_rows=COUNTS,
                loop_weight=self_loop, types=TYPES).double()
    assert all((conv.loop_weight is not None) == self_loop for conv in model.convs)
    xs = features((5, 3), COUNTS[:2]) + [None]
    got = run(path, lambda: model(tb, xs))
    assert got.shape == (COUNTS[0], 3)
    xs2 = {n: x.detach().clone().requires_grad_() for n, x in zip(TYPES.node_types[:2], xs[:2], strict=True)}
    want = dgl_stack(model, dgl_graph(TYPES, COUNTS, src, dst, rel), xs2, arch, 3)
    close(got, want, "logits")
    w = torch.randn_like(got)
    grads_ours = torch.autograd.grad((got * w).sum(), [xs[0], xs[1], *model.parameters()], allow_unused=True)
    # the DGL stack's parameters are copies, except the embedding table (shared): its gradient compared below
    table = model.embeddings["2"].weight
    grads_theirs = torch.autograd.grad((want * w).sum(), [xs2["paper"], xs2["author"], table])
    close(grads_ours[0], grads_theirs[0], "paper features' gradient")
    close(grads_ours[1], grads_theirs[1], "author features' gradient")
    close(grads_ours[2], grads_theirs[2], "the embedding table's gradient")
    assert grads_ours[2].abs().sum() > 0


@pytest.mark.unit
def test_homogeneous_types_are_one_of_each():
    assert HOMOGENEOUS.homogeneous and HOMOGENEOUS.target_index == 0
    with_rev, of = TYPES.with_reverses()
    assert len(with_rev.relations) == 2 * len(TYPES.relations) and of == list(range(5))
    assert with_rev.relations[5] == Relation("paper", "rev-writes", "author")


@pytest.mark.unit
def test_a_reverse_given_is_not_reversed_again():
    given = GraphTypes(("a", "b"), (Relation("a", "r", "b"), Relation("b", "rev-r", "a")), "a")
    assert given.with_reverses() == (given, [])


@pytest.mark.unit
def test_embedding_rows_start_alike_for_any_seed_the_schema_allows():
    from sylvie.models.gnn import EMBEDDING_CHUNK, embedding_init
    ids = torch.tensor([0, 5, EMBEDDING_CHUNK + 3])
    whole = embedding_init(torch.arange(EMBEDDING_CHUNK + 4), 3, 2 ** 32 - 1, 2)
    assert torch.equal(embedding_init(ids, 3, 2 ** 32 - 1, 2), whole[ids])


@pytest.mark.unit
def test_typed_models_need_a_fanout_per_layer_when_sampled():
    from sylvie.config import check_sampling, section
    from sylvie.errors import SylvieError
    check_sampling(section("model", {"arch": "rgat", "layers": 2}), section("train", {"mode": "sampled"}),
                   section("sampling", {"fanouts": [5, {"cites": 3}]}), "config: runs.x")
    with pytest.raises(SylvieError, match="sampling.fanouts has 2 entries"):
        check_sampling(section("model", {"arch": "rgat", "layers": 3}), section("train", {"mode": "sampled"}),
                       section("sampling"), "config: runs.x")
