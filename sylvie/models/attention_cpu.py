"""The CPU kernels of GAT's attention (numba): per destination and head, the softmax of the edges' scores
``leaky_relu(el[u] + er[v])`` over its in-edges, dropped out, weighting a sum of the sources' rows. Nothing per edge
lives between the passes: the forward keeps per destination and head the scores' maximum and the softmax's
denominator, and the backward recomputes every weight from them and redraws the dropout mask.
"""
# The mask is a counter-based hash of (seed, edge, head), as ``dropout_cpu``'s. (DGL keeps the scores, the weights and a
# float mask, several floats an edge and head, from the forward to the backward.)
#
# The backward runs twice over the edges: by destination (each edge's weight gradient through the softmax and the leaky
# ReLU, and the destinations' score gradients), then by source along the block's out-edges (the sources' feature and
# score gradients), so that no two threads write one row. Between them, two floats per edge and head (the gradient of
# its score, its dropped-out weight) live for the backward's length only. Rows are cut into chunks of about equal work,
# as ``aggregate_cpu`` does; the GIL is released.
from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from sylvie.models.dropout_cpu import SEGMENT, _kept, _key, threshold

_LOW = SEGMENT - 1  # an element's position in its key's segment


@njit(cache=True, inline="always")
def _leaky(z, slope):
    return z if z > 0 else z * slope


@njit(cache=True, inline="always")
def _weight_scale(keys, thr, scale, e, h, heads):
    """The attention dropout's factor of edge ``e``, head ``h``: 0 (dropped) or 1 / (1 - p)."""
    k = e * heads + h
    return scale if _kept(keys[k >> 31], thr, k & _LOW) else 0.0


@njit(cache=True, inline="always")
def _forward_rows(indptr, indices, feat, el, er, slope, keys, thr, scale, out, mx, den, acc, a1, start, stop):
    heads, width = feat.shape[1], feat.shape[2]
    drop = thr > 0
    for v in range(start, stop):
        lo, hi = indptr[v], indptr[v + 1]
        for h in range(heads):
            r = er[v, h]
            m = -np.inf
            for e in range(lo, hi):
                z = _leaky(el[indices[e], h] + r, slope)
                if z > m:
                    m = z
            s = 0.0
            for e in range(lo, hi):
                s += np.exp(_leaky(el[indices[e], h] + r, slope) - m)
            acc[:] = 0
            if hi > lo:
                inv = 1.0 / s
                for e in range(lo, hi):
                    u = indices[e]
                    a = np.exp(_leaky(el[u, h] + r, slope) - m) * inv
                    if drop:
                        a *= _weight_scale(keys, thr, scale, e, h, heads)
                        if a == 0:
                            continue
                    a1[0] = a  # in the rows' float type, so the loop below stays in it
                    w = a1[0]
                    for f in range(width):
                        acc[f] += w * feat[u, h, f]
            for f in range(width):
                out[v, h, f] = acc[f]
            mx[v, h] = m
            den[v, h] = s


@njit(cache=True, nogil=True, parallel=True)
def _forward(indptr, indices, feat, el, er, slope, keys, thr, scale, out, mx, den, bounds):
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty(feat.shape[2], dtype=out.dtype)
        a1 = np.empty(1, dtype=out.dtype)
        _forward_rows(indptr, indices, feat, el, er, slope, keys, thr, scale, out, mx, den, acc, a1, bounds[c],
                      bounds[c + 1])


@njit(cache=True, inline="always")
def _edge_grad_rows(indptr, indices, feat, el, er, slope, keys, thr, scale, grad, mx, den, g_score, weight,
                    g_er, start, stop):
    heads, width = feat.shape[1], feat.shape[2]
    drop = thr > 0
    for v in range(start, stop):
        lo, hi = indptr[v], indptr[v + 1]
        for h in range(heads):
            r, m = er[v, h], mx[v, h]
            if hi == lo:
                g_er[v, h] = 0
                continue
            inv = 1.0 / den[v, h]
            t = 0.0
            for e in range(lo, hi):
                u = indices[e]
                a = np.exp(_leaky(el[u, h] + r, slope) - m) * inv
                k = _weight_scale(keys, thr, scale, e, h, heads) if drop else 1.0
                ga = 0.0
                if k != 0:
                    for f in range(width):
                        ga += grad[v, h, f] * feat[u, h, f]
                    ga *= k
                g_score[e, h] = ga  # the softmax output's gradient, for now
                weight[e, h] = a * k
                t += a * ga
            total = 0.0
            for e in range(lo, hi):
                z = el[indices[e], h] + r
                a = np.exp(_leaky(z, slope) - m) * inv
                gz = a * (g_score[e, h] - t)
                if z <= 0:
                    gz *= slope
                g_score[e, h] = gz
                total += gz
            g_er[v, h] = total


@njit(cache=True, nogil=True, parallel=True)
def _edge_grads(indptr, indices, feat, el, er, slope, keys, thr, scale, grad, mx, den, g_score, weight, g_er,
                bounds):
    for c in prange(bounds.shape[0] - 1):
        _edge_grad_rows(indptr, indices, feat, el, er, slope, keys, thr, scale, grad, mx, den, g_score, weight,
                        g_er, bounds[c], bounds[c + 1])


@njit(cache=True, inline="always")
def _source_grad_rows(t_indptr, t_dst, t_edge, grad, g_score, weight, g_feat, g_el, acc, start, stop):
    heads, width = grad.shape[1], grad.shape[2]
    for u in range(start, stop):
        acc[:] = 0
        for h in range(heads):
            g_el[u, h] = 0
        for i in range(t_indptr[u], t_indptr[u + 1]):
            v, e = t_dst[i], t_edge[i]
            for h in range(heads):
                g_el[u, h] += g_score[e, h]
                w = weight[e, h]
                if w != 0:
                    for f in range(width):
                        acc[h, f] += w * grad[v, h, f]
        for h in range(heads):
            for f in range(width):
                g_feat[u, h, f] = acc[h, f]


@njit(cache=True, nogil=True, parallel=True)
def _source_grads(t_indptr, t_dst, t_edge, grad, g_score, weight, g_feat, g_el, bounds):
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty((grad.shape[1], grad.shape[2]), dtype=g_feat.dtype)
        _source_grad_rows(t_indptr, t_dst, t_edge, grad, g_score, weight, g_feat, g_el, acc, bounds[c],
                          bounds[c + 1])


def dropout_keys(p: float, seed: int, elements: int) -> tuple[np.ndarray, int, float]:
    """(a key per 2**31 elements, the threshold, 1 / (1 - p)) of the attention dropout of ``seed``; threshold 0
    (nothing dropped) when ``p`` is 0."""
    if p <= 0:
        return np.zeros(1, np.int32), 0, 1.0
    keys = np.array([_key(seed, s) for s in range(max(1, -(-elements // SEGMENT)))], dtype=np.int32)
    return keys, threshold(p), 1.0 / (1.0 - p)


def attend(indptr: torch.Tensor, indices: torch.Tensor, feat: torch.Tensor, el: torch.Tensor, er: torch.Tensor,
           slope: float, p: float, seed: int, bounds: np.ndarray):
    """(out ``(num_dst, heads, width)``, score maxima, softmax denominators (both ``(num_dst, heads)``, float64))."""
    heads = feat.shape[1]
    keys, thr, scale = dropout_keys(p, seed, indices.shape[0] * heads)
    num_dst = indptr.shape[0] - 1
    out = torch.empty((num_dst,) + tuple(feat.shape[1:]), dtype=feat.dtype)
    mx = torch.empty((num_dst, heads), dtype=torch.float64)
    den = torch.empty((num_dst, heads), dtype=torch.float64)
    if num_dst:
        _forward(indptr.numpy(), indices.numpy(), feat.numpy(), el.numpy(), er.numpy(), float(slope), keys, thr,
                 scale, out.numpy(), mx.numpy(), den.numpy(), bounds)
    return out, mx, den


def attend_backward(indptr, indices, transpose, feat, el, er, slope, p, seed, grad, mx, den, dst_bounds, src_bounds):
    """(grad of feat, of el, of er) given ``grad`` of ``attend``'s output (contiguous, the output's shape)."""
    heads = feat.shape[1]
    keys, thr, scale = dropout_keys(p, seed, indices.shape[0] * heads)
    edges, num_dst = indices.shape[0], indptr.shape[0] - 1
    # torch's, not numpy's: a rank's allocator (launch.allocator) serves them with its other tensors
    g_score_t, weight_t = (torch.empty((edges, heads), dtype=feat.dtype) for _ in range(2))
    g_score, weight = g_score_t.numpy(), weight_t.numpy()
    g_er = torch.zeros((num_dst, heads), dtype=feat.dtype)
    if num_dst:
        _edge_grads(indptr.numpy(), indices.numpy(), feat.numpy(), el.numpy(), er.numpy(), float(slope), keys, thr,
                    scale, grad.numpy(), mx.numpy(), den.numpy(), g_score, weight, g_er.numpy(), dst_bounds)
    g_feat = torch.empty_like(feat)
    g_el = torch.empty_like(el)
    if feat.shape[0]:
        _source_grads(transpose.indptr.numpy(), transpose.dst.numpy(), transpose.edge.numpy(), grad.numpy(), g_score,
                      weight, g_feat.numpy(), g_el.numpy(), src_bounds)
    return g_feat, g_el, g_er
