"""Ranking metrics of link prediction: each positive pair's score ranked among negative scores, as OGB's
``ogb.linkproppred.Evaluator`` ranks them, and the ROC AUC of positives against negatives.

Two protocols, after OGB's link datasets:

- per-pair negatives (ogbl-citation2's ``target_node_neg``, our ``LinkPairs.negatives``): positive i is ranked among
  its own row of k negatives (``pair_ranks``); ``ranking_metrics`` gives MRR, Hits@K and AUC;
- shared negatives (ogbl-collab's, -ppa's, -ddi's ``edge_neg``, our ``LinkPairs.negative_pairs``): every positive is
  compared with one set of m negative scores; ``shared_negative_metrics`` gives Hits@K (OGB's rule) and AUC. MRR is
  not defined there.

Scores are compared in their own dtype (the common one of positives and negatives), never rounded to a narrower one;
counts are integers and the means float64. Work goes in chunks of about ``CHUNK`` negatives (each converted to the
common dtype on its own), so the largest inputs (a hundred thousand pairs by a thousand negatives) need little memory
beyond the scores themselves.

Where there is nothing to measure the value is NaN, as an accuracy is for a split without nodes (eval.json writes it
as null): no positives (n = 0) makes every metric NaN, no negatives makes AUC NaN. A NaN score is a ValueError (it
would rank as the best of all under OGB's comparisons); so are mis-shaped inputs, and per-pair negatives of width 0
(``LinkPairs``'s mark of a split whose negatives are shared pairs: use ``shared_negative_metrics``).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

HITS = (1, 10, 50, 100)  # the Hits@K reported by default
CHUNK = 1 << 22  # negatives per step (whole rows of [n, k]): compared with their positives, or sorted for AUC


def _scores(x, name: str, ndim: int) -> torch.Tensor:
    t = torch.as_tensor(x).detach().cpu()
    if t.dim() != ndim:
        raise ValueError(f"{name}: a {ndim}-dimensional tensor of scores expected, got shape {tuple(t.shape)}")
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name}: real scores expected, got {t.dtype}")
    if t.is_floating_point() and torch.isnan(t).any():
        raise ValueError(f"{name}: holds NaN scores (a NaN ranks above every negative under OGB's comparisons); "
                         "the model's scores are not finite")
    return t


def _common(pos: torch.Tensor, neg: torch.Tensor) -> torch.dtype:
    """The dtype both are compared in (float32 against float64: float64), so no comparison rounds either side; each
    chunk is converted on its own, never the whole of the negatives at once."""
    return torch.promote_types(pos.dtype, neg.dtype)


def _hits(hits: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in hits)
    if any(k < 1 for k in ks):
        raise ValueError(f"hits: every K is a positive integer, got {list(hits)}")
    return ks


def pair_ranks(pos, neg, *, chunk: int = CHUNK) -> torch.Tensor:
    """Each positive's rank among its own negatives, float64 ``[n]``: ``pos[i]`` against ``neg[i, :]``, exactly as
    OGB's Evaluator (metric mrr) ranks it: optimistic = #negatives > pos, pessimistic = #negatives >= pos,
    rank = (optimistic + pessimistic) / 2 + 1 (a tie counts half; 1 is the best). ``neg`` of width 0 ranks every
    positive 1, as OGB's does."""
    pos, neg = _scores(pos, "pos", 1), _scores(neg, "neg", 2)
    if neg.shape[0] != pos.shape[0]:
        raise ValueError(f"neg: one row of negatives per positive expected, got {neg.shape[0]} rows for "
                         f"{pos.shape[0]} positives")
    dtype = _common(pos, neg)
    n, k = neg.shape
    ranks = torch.empty(n, dtype=torch.float64)
    rows = max(1, chunk // max(k, 1))
    for a in range(0, n, rows):
        p, q = pos[a:a + rows, None].to(dtype), neg[a:a + rows].to(dtype)
        above = (q > p).sum(dim=1)  # int64 counts: exact
        at_least = (q >= p).sum(dim=1)
        ranks[a:a + rows] = (above + at_least).to(torch.float64) * 0.5 + 1.0
    return ranks


def _numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor's values as a numpy array, a view where numpy has the dtype (bfloat16: float32, exact)."""
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _auc(pos: torch.Tensor, negatives, count: int, dtype: torch.dtype) -> float:
    """ROC AUC of every positive against every negative: the share of (positive, negative) pairs where the positive
    scores higher, a tie counting half. Each chunk of negatives is sorted and every positive placed in it by binary
    search (O(N log chunk + n log chunk per chunk), never the n x N comparisons); ``negatives`` yields 1-d chunks,
    ``count`` negatives in all, compared in ``dtype``. (numpy sorts: torch.sort, which also returns indices, is many
    times slower.)"""
    n = pos.shape[0]
    if n == 0 or count == 0:
        return math.nan
    p = np.sort(_numpy(pos.to(dtype)))  # sorted queries: the binary searches walk each chunk in order
    twice = 0  # per positive, 2 * (negatives below it) + (negatives tied with it), summed: an exact integer
    for q in negatives:
        q = np.sort(_numpy(q.to(dtype)))
        twice += int(np.searchsorted(q, p, side="left").sum()) + int(np.searchsorted(q, p, side="right").sum())
    return twice / (2.0 * n * count)


def _rows_flat(neg: torch.Tensor, chunk: int):
    rows = max(1, chunk // max(neg.shape[1], 1))
    for a in range(0, neg.shape[0], rows):
        yield neg[a:a + rows].reshape(-1)


def ranking_metrics(pos, neg, hits: Sequence[int] = HITS, *, chunk: int = CHUNK) -> dict[str, float]:
    """Per-pair negatives (``pos`` ``[n]``, ``neg`` ``[n, k]``, ``pos[i]`` ranked among ``neg[i]``): ``mrr`` (mean of
    1 / ``pair_ranks``), ``hits@K`` for each K of ``hits`` (the share of pairs with rank <= K; OGB's hits@K_list
    means) and ``auc`` (every positive against every negative of all rows, ties counting half). n = 0: every value
    NaN. k = 0 is refused (those pairs' negatives are shared: ``shared_negative_metrics``)."""
    ks = _hits(hits)
    pos, neg = _scores(pos, "pos", 1), _scores(neg, "neg", 2)
    if neg.shape[0] == pos.shape[0] and pos.shape[0] > 0 and neg.shape[1] == 0:
        raise ValueError("neg: no negatives per pair (width 0), nothing to rank against; where a split's negatives "
                         "are shared pairs, use shared_negative_metrics")
    ranks = pair_ranks(pos, neg, chunk=chunk)
    n = ranks.shape[0]
    if n == 0:
        return {"mrr": math.nan, **{f"hits@{k}": math.nan for k in ks}, "auc": math.nan}
    return {"mrr": float((1.0 / ranks).mean()),
            **{f"hits@{k}": float((ranks <= k).sum()) / n for k in ks},
            "auc": _auc(pos, _rows_flat(neg, chunk), neg.numel(), _common(pos, neg))}


def shared_negative_metrics(pos, neg, hits: Sequence[int] = HITS, *, chunk: int = CHUNK) -> dict[str, float]:
    """Shared negatives (``pos`` ``[n]``, ``neg`` ``[m]``, every positive against all of ``neg``), OGB-collab style:
    ``hits@K`` for each K of ``hits`` by OGB's rule, the share of positives scoring strictly above the K-th highest
    negative score, and 1.0 where there are fewer than K negatives (m = 0 included); and ``auc`` (NaN for m = 0).
    No MRR. n = 0: every value NaN (OGB's Evaluator divides by zero there)."""
    ks = _hits(hits)
    pos, neg = _scores(pos, "pos", 1), _scores(neg, "neg", 1)
    dtype, n, m = _common(pos, neg), pos.shape[0], neg.shape[0]
    if n == 0:
        return {**{f"hits@{k}": math.nan for k in ks}, "auc": math.nan}
    out = {}
    if ks:
        top = torch.topk(neg, min(max(ks), m)).values.to(dtype)  # descending
    for k in ks:
        out[f"hits@{k}"] = 1.0 if m < k else float((pos.to(dtype) > top[k - 1]).sum()) / n
    step = max(1, chunk)
    out["auc"] = _auc(pos, (neg[a:a + step] for a in range(0, m, step)), m, dtype)
    return out
