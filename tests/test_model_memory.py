"""What a layer keeps for the backward pass on a rank of a partitioned graph, and that keeping less changes nothing:
dropout without a stored mask, GraphSAGE aggregating before its linear map, 32-bit in-edge-only blocks, GAT's
attention keeping nothing per edge."""
import numpy as np
import pytest
import torch
from dgl.nn import SAGEConv

from sylvie.models.block import Block
from sylvie.models.blocks import relation_block
from sylvie.models.dropout import Dropout
from sylvie.models.gnn import GNN
from sylvie.models.sage import MeanSAGEConv

pytestmark = pytest.mark.unit


def test_dropout_zeroes_a_share_p_scales_the_rest_and_its_gradient_is_the_same_mask():
    torch.manual_seed(0)
    drop = Dropout(0.3)
    x = torch.randn(20_000, 8, dtype=torch.float64, requires_grad=True)
    y = drop(x)
    kept = y != 0
    assert abs(1 - kept.double().mean().item() - 0.3) < 0.01
    torch.testing.assert_close(y[kept], x.detach()[kept] / 0.7)
    g = torch.randn_like(y)
    y.backward(g)
    torch.testing.assert_close(x.grad, g * kept / 0.7)
    drop.eval()
    assert drop(x) is x


def test_dropout_after_a_head_is_the_concatenation_and_passes_the_heads_gradient_through():
    drop = Dropout(0.5)
    head = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    rows = torch.randn(50, 4, dtype=torch.float64, requires_grad=True)
    out = drop.after(head, rows)
    torch.testing.assert_close(out[:7], head.detach())
    kept = out[7:] != 0
    torch.testing.assert_close(out[7:][kept], 2 * rows.detach()[kept])
    g = torch.randn_like(out)
    out.backward(g.clone())
    torch.testing.assert_close(head.grad, g[:7])
    torch.testing.assert_close(rows.grad, 2 * g[7:] * kept)


def test_dropout_repeats_under_the_same_torch_seed():
    x = torch.randn(100, 16)
    torch.manual_seed(5)
    a = Dropout(0.5)(x)
    torch.manual_seed(5)
    b = Dropout(0.5)(x)
    assert torch.equal(a, b)


def _random_block(num_inner=30, num_halo=50, edges=400, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_inner + num_halo, edges)
    dst = rng.integers(0, num_inner, edges)
    in_deg = np.bincount(dst, minlength=num_inner)
    out_deg = rng.integers(1, 9, num_inner + num_halo)
    return src, dst, relation_block(src, dst, num_inner + num_halo, num_inner, True, False, in_deg, out_deg)


@pytest.mark.parametrize("d_in,d_out", [(12, 5), (5, 12)])
@pytest.mark.parametrize("apart", [False, True])
def test_mean_sage_equals_dgls_sageconv_in_either_order(d_in, d_out, apart):
    """Destinations apart and a gradient on the input: aggregate, then fc_neigh; else DGL's order."""
    src, dst, block = _random_block()
    torch.manual_seed(1)
    ours = MeanSAGEConv(d_in, d_out).double()
    theirs = SAGEConv(d_in, d_out, "mean").double()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(block.num_src, d_in, dtype=torch.float64, requires_grad=True)
    y_ours = ours(block, (x, x[:block.num_dst]) if apart else x)
    y_theirs = theirs(dgl_block(src, dst, block), x)
    torch.testing.assert_close(y_ours, y_theirs)
    g = torch.randn_like(y_ours)
    (grad_ours,) = torch.autograd.grad(y_ours, x, g, retain_graph=True)
    (grad_theirs,) = torch.autograd.grad(y_theirs, x, g, retain_graph=True)
    torch.testing.assert_close(grad_ours, grad_theirs)
    y_ours.backward(g)
    y_theirs.backward(g)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_a_block_keeps_32_bit_in_edges_by_destination_and_nothing_else():
    src, dst, block = _random_block()
    assert block.indices.dtype == torch.int32 and block.indptr.dtype == torch.int64
    assert block._transpose is None  # out-edges only once a backward asks for them
    order = np.lexsort((np.arange(len(dst)), dst))  # by destination, the order given within one
    assert np.array_equal(block.indices.numpy(), src[order])
    assert np.array_equal(block.local_in_degree().numpy(), np.bincount(dst, minlength=block.num_dst))


def test_gat_keeps_nothing_per_edge_for_the_backward():
    """DGL's GATConv keeps its scores, weights and dropout mask per edge and head; ours keeps per destination and
    head the softmax's maximum and denominator only."""
    _, _, block = _random_block(edges=2000)
    model = GNN("gat", 12, 8, 5, layers=2, dropout=0.5, heads=4).train()
    x = torch.randn(block.num_src, 12)
    saved = []

    def keep(t):
        saved.append(t.shape[0] if t.dim() else 0)
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        out = model([Block.homogeneous(block), Block.homogeneous(block_of_destinations(block))], x)
    assert out.shape[0] == block.num_dst
    assert max(saved) < block.num_edges, f"kept a tensor of {max(saved)} rows; the block has {block.num_edges} edges"


def block_of_destinations(block):
    """``block`` with its destinations as its sources too (a second layer over the first's outputs)."""
    from sylvie.models.blocks import relation_block
    n = block.num_dst
    dst = np.repeat(np.arange(n), block.local_in_degree().numpy())
    src = block.indices.numpy() % n
    return relation_block(src, dst, n, n, True, False, np.bincount(dst, minlength=n), np.bincount(src, minlength=n))


def dgl_block(src, dst, block):
    import dgl
    return dgl.create_block((torch.tensor(src), torch.tensor(dst)), num_src_nodes=block.num_src,
                            num_dst_nodes=block.num_dst)


def test_graphsage_keeps_no_tensor_over_every_source_row_for_the_backward():
    """With 50 halo rows for 30 inner rows (products at 4 parts: 2.6x), a layer after the first keeps only
    inner-row tensors; before, its input over every source row (and a float32 dropout mask of it) stayed."""
    _, _, block = _random_block()
    n_src, n_inner, hidden = block.num_src, block.num_dst, 16
    model = GNN("sage", 12, hidden, 5, layers=3, dropout=0.5).train()
    x = torch.randn(n_src, 12)

    def halo(h, layer):  # differentiable, as the exchange, and keeps nothing of its own (one node type)
        return [h[0].mean(0, keepdim=True) + torch.randn(n_src - n_inner, h[0].shape[1])]

    saved = []

    def keep(t):
        if t.data_ptr() != x.data_ptr():
            saved.append(t.shape[0] if t.dim() else 0)
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        out = model(Block.homogeneous(block), x, halo)
    assert out.shape == (n_inner, 5)
    assert saved and max(saved) <= n_inner, f"kept tensors of {max(saved)} rows; the inner rows are {n_inner}"
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
