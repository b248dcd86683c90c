"""Message passing on a ``RelationBlock`` with PyTorch's autograd: ``aggregate`` (a sum over in-edges with node factors:
GCN's normalisation, GraphSAGE's mean) and ``attend`` (GAT's attention), the operations our layers are made of. On the
CPU both run on our numba kernels (``aggregate_cpu``, ``attention_cpu``), whose backward runs along the out-edges rather
than scattering; elsewhere on PyTorch. ``torch_ops()`` sends the CPU down PyTorch's path too, so that tests compare the
two.
"""
# - ``aggregate(block, x, src_scale, dst_scale)``:
#   ``out[v] = dst_scale[v] * sum over in-edges u -> v of src_scale[u] * x[u]``
#   (GCN: the symmetric normalisation's node factors; GraphSAGE: ``mean``, 1 / in-edges).
# - ``attend(block, feat, el, er, slope, p)``: per destination and head, the softmax over its in-edges of
#   ``leaky_relu(el[u] + er[v])``, dropped out with probability ``p``, weighting the sum of ``feat[u]``.
#
# The CPU kernels (float32, float64) run parallel over rows with the GIL released, the backward along the out-edges
# (``RelationBlock.transpose``). On CUDA the aggregation is a CSR matrix product (cuSPARSE) with the normalisation as
# the matrix's values, its backward the product with the transposed matrix; the attention uses gathers, a
# ``scatter_reduce`` maximum and ``index_add_``. Tests check PyTorch's path against the kernels and against DGL where no
# GPU is.
from __future__ import annotations

import contextlib
import threading
import warnings

import torch

from sylvie.models.relation_block import RelationBlock

_PREFER_TORCH = threading.local()


@contextlib.contextmanager
def torch_ops():
    """Within: every device runs PyTorch's operations (the CUDA path), the CPU too."""
    before = getattr(_PREFER_TORCH, "on", False)
    _PREFER_TORCH.on = True
    try:
        yield
    finally:
        _PREFER_TORCH.on = before


def _kernels(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and not getattr(
        _PREFER_TORCH, "on", False)


def _cached(block: RelationBlock, key, make):
    value = block._cache.get(key)
    if value is None:
        value = block._cache[key] = make()
    return value


def _chunks(block: RelationBlock, by_source: bool = False):
    """The kernels' work chunks of the block's destinations (or, ``by_source``, of its sources along the out-edges)
    for numba's thread count now, kept with the block."""
    import numba

    from sylvie.models.aggregate_cpu import work_chunks

    def make():
        return work_chunks((block.transpose().indptr if by_source else block.indptr).numpy())
    return _cached(block, ("chunks", by_source, numba.get_num_threads()), make)


# --- aggregation ---------------------------------------------------------------------------------------------


class _AggregateCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, block, src_scale, dst_scale):
        from sylvie.models.aggregate_cpu import gather_sum
        ctx.block, ctx.src_scale, ctx.dst_scale = block, src_scale, dst_scale
        return gather_sum(block.indptr, block.indices, x, src_scale, dst_scale, _chunks(block))

    @staticmethod
    def backward(ctx, grad):
        from sylvie.models.aggregate_cpu import gather_sum
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        block = ctx.block
        t = block.transpose()
        # over the out-edges: sum of dst_scale[v] * grad[v], times src_scale[u]
        g = gather_sum(t.indptr, t.dst, grad, ctx.dst_scale, ctx.src_scale, _chunks(block, by_source=True))
        return g, None, None, None


def _sparse(block: RelationBlock, values: torch.Tensor, transposed: bool) -> torch.Tensor:
    """The block's adjacency (destinations x sources; ``transposed``: sources x destinations) as a CSR tensor."""
    ids = block.indices.dtype
    if transposed:
        t = block.transpose(edges=True)
        parts, size = (t.indptr.to(ids), t.dst, values[t.edge.long()]), (block.num_src, block.num_dst)
    else:
        parts, size = (block.indptr.to(ids), block.indices, values), (block.num_dst, block.num_src)
    # the arrays are ours and valid by construction (a check would read them all); PyTorch's "beta" notice aside
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(*parts, size=size, check_invariants=False)


class _AggregateSparse(torch.autograd.Function):
    """``A @ x`` for the block's CSR matrix ``A`` whose values are the normalisation per edge; backward
    ``A^T @ grad`` (PyTorch's sparse products: cuSPARSE on a GPU)."""

    @staticmethod
    def forward(ctx, x, block, key, values):
        ctx.block, ctx.key, ctx.values = block, key, values
        if block.num_edges == 0:
            return x.new_zeros((block.num_dst,) + tuple(x.shape[1:]))
        a = _cached(block, ("csr",) + key, lambda: _sparse(block, values, False))
        return torch.sparse.mm(a, x.contiguous())

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        block = ctx.block
        if block.num_edges == 0:
            return grad.new_zeros((block.num_src,) + tuple(grad.shape[1:])), None, None, None
        at = _cached(block, ("csr-t",) + ctx.key, lambda: _sparse(block, ctx.values, True))
        return torch.sparse.mm(at, grad.contiguous()), None, None, None


def _edge_values(block: RelationBlock, src_scale, dst_scale, dtype) -> torch.Tensor:
    v = torch.ones(block.num_edges, dtype=dtype, device=block.device)
    if src_scale is not None:
        v = v * src_scale.to(dtype)[block.indices.long()]
    if dst_scale is not None:
        v = v * torch.repeat_interleave(dst_scale.to(dtype), block.local_in_degree(), output_size=block.num_edges)
    return v


def aggregate(block: RelationBlock, x: torch.Tensor, src_scale: torch.Tensor | None = None,
              dst_scale: torch.Tensor | None = None, scales_key: str | None = None) -> torch.Tensor:
    """``out[v] = dst_scale[v] * sum over in-edges u -> v of src_scale[u] * x[u]``, a ``(num_dst, ...)`` tensor; the
    scales (per source and per destination, or None) are constants of the block, named by ``scales_key`` (``'gcn'``,
    ``'mean'``) so that the sparse path keeps its matrix with the block. In training, the sum of an input without a
    gradient over a kept block (a rank's part, the whole graph; not a minibatch's) is kept and returned again for the
    same unmodified input and scales, so an epoch sums its first layer's input once: a caller must not modify the result
    in place."""
    # A rank's layer-0 rows have no gradient (GCN and GraphSAGE drop out no input features). Kept in training, the sum
    # costs nothing at the peak (the first layer keeps it for its weight gradient anyway); inference alone (autograd
    # off: evaluation, and sampled training's full-neighbourhood validation) keeps nothing, so its sum is freed after
    # the first layer rather than raising a sampled rank's peak.
    if x.shape[0] != block.num_src:
        raise ValueError(f"aggregate: {x.shape[0]} rows for a block of {block.num_src} sources")
    if x.requires_grad or block.src_ids is not None or scales_key is None:
        return _aggregate(block, x, src_scale, dst_scale, scales_key)
    memo = block._cache.get("constant-input")
    if memo is not None and memo[0] is x and memo[1] == x._version and memo[2] == scales_key:
        return memo[3]
    out = _aggregate(block, x, src_scale, dst_scale, scales_key)
    if torch.is_grad_enabled():
        block._cache["constant-input"] = (x, x._version, scales_key, out)
    return out


def _aggregate(block: RelationBlock, x: torch.Tensor, src_scale, dst_scale, scales_key) -> torch.Tensor:
    if _kernels(x):
        shape = x.shape
        flat = x.reshape(shape[0], -1)
        ss = None if src_scale is None else src_scale.to(x.dtype)
        ds = None if dst_scale is None else dst_scale.to(x.dtype)
        return _AggregateCPU.apply(flat, block, ss, ds).view((block.num_dst,) + tuple(shape[1:]))
    key = (scales_key or f"{id(src_scale)}-{id(dst_scale)}", x.dtype)
    values = _cached(block, ("values",) + key, lambda: _edge_values(block, src_scale, dst_scale, x.dtype))
    shape = x.shape
    out = _AggregateSparse.apply(x.reshape(shape[0], -1), block, key, values)
    return out.view((block.num_dst,) + tuple(shape[1:]))


def gcn_scales(block: RelationBlock, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(out_degree^-1/2 per source, in_degree^-1/2 per destination), degrees clamped to >= 1 (as DGL's
    GraphConv), kept with the block."""
    return _cached(block, ("gcn-scales", dtype), lambda: (
        block.out_degree.clamp(min=1).to(dtype).pow(-0.5), block.in_degree.clamp(min=1).to(dtype).pow(-0.5)))


def mean_scale(block: RelationBlock, dtype: torch.dtype) -> torch.Tensor:
    """1 / in-edges per destination (0 in-edges: 1, so the mean is 0), kept with the block."""
    return _cached(block, ("mean-scale", dtype),
                   lambda: block.local_in_degree().clamp(min=1).to(dtype).reciprocal())


# --- attention ---------------------------------------------------------------------------------------------


class _AttendCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat, el, er, block, slope, p, seed):
        from sylvie.models.attention_cpu import attend as kernel
        feat, el, er = feat.contiguous(), el.contiguous(), er.contiguous()
        out, mx, den = kernel(block.indptr, block.indices, feat, el, er, slope, p, seed, _chunks(block))
        ctx.save_for_backward(feat, el, er, mx, den)
        ctx.block, ctx.slope, ctx.p, ctx.seed = block, slope, p, seed
        return out

    @staticmethod
    def backward(ctx, grad):
        from sylvie.models.attention_cpu import attend_backward
        feat, el, er, mx, den = ctx.saved_tensors
        block = ctx.block
        out_edges = block.transpose(edges=True)
        g_feat, g_el, g_er = attend_backward(block.indptr, block.indices, out_edges, feat, el, er, ctx.slope, ctx.p,
                                             ctx.seed, grad.contiguous(), mx, den, _chunks(block),
                                             _chunks(block, by_source=True))
        return g_feat, g_el, g_er, None, None, None, None


def _attend_torch(block: RelationBlock, feat, el, er, slope, p, seed):
    dst = _cached(block, ("dst-of-edges",), block.dst_of_edges)
    src = block.indices.long()
    heads = feat.shape[1]
    z = torch.nn.functional.leaky_relu(el[src] + er[dst], slope)  # (edges, heads)
    index = dst.unsqueeze(1).expand(-1, heads)
    top = torch.full((block.num_dst, heads), float("-inf"), dtype=z.dtype, device=z.device)
    top = top.scatter_reduce(0, index, z.detach(), "amax", include_self=True)
    ex = torch.exp(z - top[dst])
    den = torch.zeros((block.num_dst, heads), dtype=z.dtype, device=z.device).index_add(0, dst, ex)
    a = ex / den[dst]
    if p > 0:
        a = _DropWeights.apply(a, p, seed)
    msg = feat[src] * a.unsqueeze(-1)
    out = torch.zeros((block.num_dst,) + tuple(feat.shape[1:]), dtype=feat.dtype, device=feat.device)
    return out.index_add(0, dst, msg)


class _DropWeights(torch.autograd.Function):
    """Dropout of the attention weights with the mask of ``seed`` (``dropout.drop_into``), drawn again in the
    backward."""

    @staticmethod
    def forward(ctx, a, p, seed):
        from sylvie.models.dropout import drop_into
        ctx.p, ctx.seed = p, seed
        return drop_into(a.contiguous(), torch.empty_like(a, memory_format=torch.contiguous_format), p, seed)

    @staticmethod
    def backward(ctx, grad):
        from sylvie.models.dropout import drop_into
        return drop_into(grad.contiguous(), torch.empty_like(grad, memory_format=torch.contiguous_format), ctx.p,
                         ctx.seed), None, None


def attend(block: RelationBlock, feat: torch.Tensor, el: torch.Tensor, er: torch.Tensor, slope: float = 0.2,
           p: float = 0.0) -> torch.Tensor:
    """GAT's attention over ``block``: ``feat`` ``(num_src, heads, width)``, ``el`` ``(num_src, heads)``, ``er``
    ``(num_dst, heads)``; returns ``(num_dst, heads, width)``. ``p``: the attention dropout (training mode only is
    the caller's business), its seed drawn from PyTorch's default generator (``torch.manual_seed`` repeats it)."""
    if feat.shape[0] != block.num_src or el.shape[0] != block.num_src or er.shape[0] != block.num_dst:
        raise ValueError(f"attend: {feat.shape[0]} / {el.shape[0]} / {er.shape[0]} rows for a block of "
                         f"{block.num_src} sources and {block.num_dst} destinations")
    seed = int(torch.randint(2 ** 62, (1,)).item()) if p > 0 else 0
    if _kernels(feat):
        return _AttendCPU.apply(feat, el, er, block, float(slope), float(p), seed)
    return _attend_torch(block, feat, el, er, slope, p, seed)
