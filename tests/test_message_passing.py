"""Our message passing against independent references: each layer against DGL's (``GraphConv`` with the symmetric
normalisation as edge weights, ``SAGEConv('mean')``, ``GATConv``) in float64, on both of our paths (the CPU kernels,
and PyTorch's operations, which a GPU runs), forward and every gradient; the kernels' own gradients against finite
differences (``gradcheck``); the pieces (out-edges, work chunks, the attention dropout) against numpy."""
import dataclasses

import dgl
import numpy as np
import pytest
import torch
from dgl.nn import GATConv as DGLGATConv
from dgl.nn import GraphConv as DGLGraphConv
from dgl.nn import SAGEConv as DGLSAGEConv

from sylvie.models import aggregate_cpu
from sylvie.models.block_transpose import transpose, transpose_torch
from sylvie.models.blocks import csc, halo_subblock, relation_block
from sylvie.models.gat import GATConv
from sylvie.models.gcn import GraphConv
from sylvie.models.ops import aggregate, attend, torch_ops
from sylvie.models.sage import MeanSAGEConv

PATHS = ("kernels", "torch")


def random_edges(num_inner, num_halo, edges, seed):
    """Edges into the inner rows (some inner rows without any), from inner and halo rows (some never used)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_inner + num_halo, edges)
    dst = rng.integers(0, max(1, num_inner - 3), edges) if num_inner else np.zeros(0, np.int64)
    return src[:len(dst)], dst


def both(num_inner=40, num_halo=60, edges=500, self_loop=False, seed=0):
    """(our block, DGL's block of the same edges, self-loops added as DGL's users add them)."""
    src, dst = random_edges(num_inner, num_halo, edges, seed)
    rng = np.random.default_rng(seed + 1)
    out_deg = rng.integers(0, 9, num_inner + num_halo)  # global degrees; 0 is clamped to 1, as GraphConv does
    in_deg = np.bincount(dst, minlength=num_inner) + rng.integers(0, 3, num_inner)
    ours = relation_block(src, dst, num_inner + num_halo, num_inner, True, self_loop, in_deg, out_deg)
    if self_loop:
        loops = np.arange(num_inner)
        src, dst = np.concatenate([src, loops]), np.concatenate([dst, loops])
    theirs = dgl.create_block((torch.tensor(src), torch.tensor(dst)), num_src_nodes=num_inner + num_halo,
                              num_dst_nodes=num_inner)
    return ours, theirs


def run(path, fn):
    if path == "torch":
        with torch_ops():
            return fn()
    return fn()


def compare(ours, theirs, forward_ours, forward_theirs, x, path):
    """Same output, input gradient and parameter gradients (ours' parameters named as theirs)."""
    theirs.load_state_dict(ours.state_dict())
    xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    yo, yt = run(path, lambda: forward_ours(ours, xo)), forward_theirs(theirs, xt)
    torch.testing.assert_close(yo, yt)
    g = torch.randn_like(yo)
    params_t = dict(theirs.named_parameters())
    names = [n for n, _ in ours.named_parameters()]
    go = run(path, lambda: torch.autograd.grad(yo, [xo, *ours.parameters()], g))
    gt = torch.autograd.grad(yt, [xt, *(params_t[n] for n in names)], g)
    for name, a, b in zip(["input", *names], go, gt):
        torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d_in,d_out", [(12, 5), (5, 12)])
@pytest.mark.parametrize("num_halo,self_loop", [(60, False), (0, True)])
def test_gcn_equals_dgls_graphconv_with_the_normalisation_as_edge_weights(path, d_in, d_out, num_halo, self_loop):
    ours_block, theirs_block = both(num_halo=num_halo, self_loop=self_loop)
    src, dst = (t.long() for t in theirs_block.edges())
    # DGL's per-edge weight from our block's (global) degrees: out_degree(u)^-1/2 * in_degree(v)^-1/2
    w = ours_block.out_degree.double().clamp(min=1).pow(-0.5)[src] * \
        ours_block.in_degree.double().clamp(min=1).pow(-0.5)[dst]
    torch.manual_seed(0)
    ours = GraphConv(d_in, d_out).double()
    torch.nn.init.normal_(ours.bias)
    theirs = DGLGraphConv(d_in, d_out, norm="none", allow_zero_in_degree=True).double()
    compare(ours, theirs, lambda m, x: m(ours_block, x), lambda m, x: m(theirs_block, x, edge_weight=w),
            torch.randn(ours_block.num_src, d_in, dtype=torch.float64), path)


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d_in,d_out", [(12, 5), (5, 12)])
@pytest.mark.parametrize("num_halo", [60, 0])
def test_graphsage_mean_equals_dgls_sageconv(path, d_in, d_out, num_halo):
    ours_block, theirs_block = both(num_halo=num_halo)
    torch.manual_seed(0)
    ours = MeanSAGEConv(d_in, d_out).double()
    compare(ours, DGLSAGEConv(d_in, d_out, "mean").double(), lambda m, x: m(ours_block, x),
            lambda m, x: m(theirs_block, x), torch.randn(ours_block.num_src, d_in, dtype=torch.float64), path)


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("num_halo,self_loop", [(60, False), (0, True)])
def test_gat_equals_dgls_gatconv(path, heads, num_halo, self_loop):
    ours_block, theirs_block = both(num_halo=num_halo, self_loop=self_loop)
    torch.manual_seed(0)
    ours = GATConv(12, 7, heads).double()
    torch.nn.init.normal_(ours.bias)
    theirs = DGLGATConv(12, 7, heads, allow_zero_in_degree=True).double()
    compare(ours, theirs, lambda m, x: m(ours_block, x), lambda m, x: m(theirs_block, x),
            torch.randn(ours_block.num_src, 12, dtype=torch.float64), path)


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
def test_float32_layers_agree_with_float64(path):
    block, _ = both(num_inner=300, num_halo=500, edges=6000)
    torch.manual_seed(0)
    x = torch.randn(block.num_src, 16)
    for layer in (GraphConv(16, 8), MeanSAGEConv(16, 8), GATConv(16, 8, 2)):
        y32 = run(path, lambda layer=layer: layer(block, x))
        y64 = run(path, lambda layer=layer: layer.double()(block, x.double()))
        assert y32.dtype == torch.float32
        torch.testing.assert_close(y32.double(), y64, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_kernels_gradients_match_finite_differences():
    block, _ = both(num_inner=8, num_halo=8, edges=40)
    x = torch.randn(block.num_src, 2, dtype=torch.float64, requires_grad=True)
    ss = torch.rand(block.num_src, dtype=torch.float64) + 0.5
    ds = torch.rand(block.num_dst, dtype=torch.float64) + 0.5
    for scales in ((None, None), (ss, None), (None, ds), (ss, ds)):
        assert torch.autograd.gradcheck(lambda t, scales=scales: aggregate(block, t, *scales), (x,))
    feat = torch.randn(block.num_src, 2, 2, dtype=torch.float64, requires_grad=True)
    el = torch.randn(block.num_src, 2, dtype=torch.float64, requires_grad=True)
    er = torch.randn(block.num_dst, 2, dtype=torch.float64, requires_grad=True)
    for p in (0.0, 0.5):
        def f(a, b, c, p=p):
            torch.manual_seed(3)  # the same attention dropout mask at every evaluation
            return attend(block, a, b, c, 0.2, p)
        assert torch.autograd.gradcheck(f, (feat, el, er))


@pytest.mark.slow
def test_attention_dropout_drops_a_share_p_of_edge_weights_and_scales_the_rest():
    """Every destination has ``deg`` in-edges of equal score (a weight of 1 / deg before dropout), each from a
    source of its own that carries a 1 in the edge's column only: the output summed over destinations is each
    edge's dropped-out weight."""
    n, deg, p = 200, 50, 0.3
    dst = np.repeat(np.arange(n), deg)
    src = np.random.default_rng(0).permutation(n * deg)
    block = relation_block(src, dst, n + n * deg - n, n, True, False, np.full(n, deg), np.ones(n * deg, np.int64))
    feat = torch.zeros(n * deg, 2, n * deg, dtype=torch.float64)
    feat[block.indices.long(), :, torch.arange(n * deg)] = 1.0
    torch.manual_seed(0)
    zeros = torch.zeros(n * deg, 2, dtype=torch.float64)
    weights = attend(block, feat, zeros, zeros[:n], 0.2, p).sum(0)  # (heads, edges)
    kept = weights != 0
    assert abs(1 - kept.double().mean().item() - p) < 0.01
    torch.testing.assert_close(weights[kept], torch.full_like(weights[kept], 1 / deg / (1 - p)))
    assert not torch.equal(kept[0], kept[1])  # heads draw masks of their own


@pytest.mark.unit
@pytest.mark.parametrize("path", PATHS)
def test_empty_blocks_and_destinations_without_edges_give_zeros(path):
    for num_inner, num_halo, edges in ((0, 5, 0), (4, 3, 0), (6, 0, 0)):
        src, dst = random_edges(num_inner, num_halo, edges, 0)
        block = relation_block(src, dst, num_inner + num_halo, num_inner, True, False, np.zeros(num_inner, np.int64),
                               np.zeros(num_inner + num_halo, np.int64))
        x = torch.randn(block.num_src, 4, dtype=torch.float64, requires_grad=True)
        for layer in (GraphConv(4, 3).double(), MeanSAGEConv(4, 3).double(), GATConv(4, 3, 2).double()):
            torch.nn.init.zeros_(layer.bias if hasattr(layer, "bias") else layer.fc_self.bias)
            y = run(path, lambda layer=layer, x=x, block=block: layer(block, x))
            if isinstance(layer, MeanSAGEConv):  # the self branch alone
                y = y - layer.fc_self(x[:block.num_dst])
            assert y.shape[0] == num_inner and torch.count_nonzero(y) == 0
            (g,) = run(path, lambda y=y, x=x: torch.autograd.grad(y.sum(), x, allow_unused=True))
            assert g is None or g.shape == x.shape


@pytest.mark.unit
def test_out_edges_by_numba_and_by_torch_are_the_same_arrays():
    block, _ = both(num_inner=300, num_halo=400, edges=5000)
    cpu = transpose(block.indptr, block.indices, block.num_src, edges=True)
    gpu = transpose_torch(block.indptr, block.indices, block.num_src, edges=True)  # a GPU's path, on the CPU
    for a, b in ((cpu.indptr, gpu.indptr), (cpu.dst, gpu.dst), (cpu.edge, gpu.edge)):
        assert a.dtype == b.dtype and torch.equal(a, b)
    for lean in (transpose(block.indptr, block.indices, block.num_src),  # without the edges' positions
                 transpose_torch(block.indptr, block.indices, block.num_src)):
        assert lean.edge is None and torch.equal(lean.indptr, cpu.indptr) and torch.equal(lean.dst, cpu.dst)
    assert block.transpose().edge is None  # made lean, made again with the positions when they are asked for
    assert torch.equal(block.transpose(edges=True).edge, cpu.edge) and block.transpose().edge is not None
    order = torch.argsort(block.indices, stable=True)  # by source, each source's edges in the block's order
    assert torch.equal(cpu.edge.long(), order)
    assert torch.equal(cpu.dst.long(), block.dst_of_edges()[order])
    assert torch.equal(cpu.indptr[1:] - cpu.indptr[:-1], torch.bincount(block.indices.long(),
                                                                          minlength=block.num_src))


@pytest.mark.unit
def test_work_chunks_cover_every_row_once_and_balance_edges():
    indptr = np.concatenate([[0], np.cumsum(np.random.default_rng(0).lognormal(2, 1.5, 10_000).astype(np.int64))])
    bounds = aggregate_cpu.balanced_chunks(indptr, 32)
    assert bounds[0] == 0 and bounds[-1] == 10_000 and np.all(np.diff(bounds) > 0)
    work = np.diff(indptr[bounds]) + np.diff(bounds)
    assert work.max() < 2.5 * (indptr[-1] + 10_000) / 32
    # serial and parallel kernels: the same sums
    x = torch.randn(1 + int(indptr[-1] % 5000), 8)
    ids = torch.from_numpy(np.random.default_rng(1).integers(0, x.shape[0], int(indptr[-1])).astype(np.int32))
    ip = torch.from_numpy(indptr)
    one = aggregate_cpu.gather_sum(ip, ids, x, None, None, np.array([0, 10_000]))
    many = aggregate_cpu.gather_sum(ip, ids, x, None, None, bounds)
    assert torch.equal(one, many)


@pytest.mark.unit
def test_csc_sorts_unsorted_edges_keeps_sorted_ones_and_adds_self_loops_last():
    src, dst = np.array([4, 0, 2, 1, 3]), np.array([1, 0, 1, 2, 0])
    indptr, ids = csc(src, dst, 3, 5, self_loop=False)
    assert indptr.tolist() == [0, 2, 4, 5] and ids.tolist() == [0, 3, 4, 2, 1] and ids.dtype == np.int32
    indptr, ids = csc(src, dst, 3, 5, self_loop=True)
    assert indptr.tolist() == [0, 3, 6, 8] and ids.tolist() == [0, 3, 0, 4, 2, 1, 1, 2]
    with pytest.raises(ValueError, match="destinations"):
        csc(src, dst, 2, 5, self_loop=False)


@pytest.mark.unit
def test_halo_subblock_keeps_the_kept_rows_edges_and_their_degrees():
    block, _ = both(num_inner=30, num_halo=50, edges=400)
    kept = torch.tensor([0, 3, 7, 8, 20, 49])
    sub = halo_subblock(block, kept)
    assert sub.num_dst == 30 and sub.num_src == 30 + len(kept) and sub.indices.dtype == block.indices.dtype
    old_of_new = torch.cat([torch.arange(30), 30 + kept])
    src, dst = block.indices.long(), block.dst_of_edges()
    keep = (src < 30) | torch.isin(src - 30, kept)
    sub_src = old_of_new[sub.indices.long()]
    assert torch.equal(sub_src, src[keep]) and torch.equal(sub.dst_of_edges(), dst[keep])
    dropped = torch.bincount(dst[~keep], minlength=30)
    assert torch.equal(sub.in_degree, block.in_degree - dropped)
    assert torch.equal(sub.out_degree, block.out_degree[old_of_new])


@pytest.mark.unit
def test_the_sum_of_a_constant_input_is_kept_with_the_block_while_the_input_is_unchanged():
    block, _ = both()
    x = torch.randn(block.num_src, 6, dtype=torch.float64)
    scale = torch.rand(block.num_dst, dtype=torch.float64)
    first = aggregate(block, x, None, scale, "mean")
    assert aggregate(block, x, None, scale, "mean") is first  # an epoch's first layer: summed once
    assert aggregate(block, x, None, scale, "other") is not first  # other scales
    x.mul_(2)  # modified in place: summed again
    torch.testing.assert_close(aggregate(block, x, None, scale, "mean"), 2 * first)
    y = x.clone()
    assert aggregate(block, y, None, scale, "mean") is not aggregate(block, x.clone(), None, scale, "mean")
    z = x.clone().requires_grad_()
    assert aggregate(block, z, None, scale, "mean") is not aggregate(block, z, None, scale, "mean")
    sampled = dataclasses.replace(block, src_ids=torch.arange(block.num_src), _cache={})  # a minibatch's: used once
    assert aggregate(sampled, x, None, scale, "mean") is not aggregate(sampled, x, None, scale, "mean")


@pytest.mark.unit
def test_inference_alone_keeps_no_sum():
    block, _ = both()
    x = torch.randn(block.num_src, 6, dtype=torch.float64)
    scale = torch.rand(block.num_dst, dtype=torch.float64)
    with torch.no_grad():
        first = aggregate(block, x, None, scale, "mean")
        assert aggregate(block, x, None, scale, "mean") is not first and "constant-input" not in block._cache
    kept = aggregate(block, x, None, scale, "mean")  # training keeps it, and inference then uses it
    with torch.no_grad():
        assert aggregate(block, x, None, scale, "mean") is kept


@pytest.mark.unit
def test_the_same_seed_gives_the_initial_weights_our_dgl_based_layers_had():
    """Each layer draws its weights as it did when it was DGL's layer (GraphConv; SAGEConv redrawn as torch's
    Linear, both branches; GATConv with fc redrawn), so a seed's run starts where it started before."""
    from sylvie.models.initialisation import initialise_gat

    class OldSAGE(DGLSAGEConv):
        def __init__(self, i, o):
            super().__init__(i, o, "mean")

        def reset_parameters(self):
            self.fc_self.reset_parameters()
            self.fc_neigh.reset_parameters()

    pairs = [(lambda: GraphConv(9, 4), lambda: DGLGraphConv(9, 4, norm="none")),
             (lambda: MeanSAGEConv(9, 4), lambda: OldSAGE(9, 4)),
             (lambda: initialise_gat(GATConv(9, 4, 3)), lambda: DGLGATConv(9, 4, 3))]
    for ours, theirs in pairs:
        torch.manual_seed(7)
        a = ours().state_dict()
        torch.manual_seed(7)
        b = theirs()
        if isinstance(b, DGLGATConv):
            b.fc.reset_parameters()  # what initialise_gat did to DGL's GATConv
        b = b.state_dict()
        assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a), type(ours())
