"""Link prediction's ranking metrics (sylvie/runtime/ranking.py) against OGB's ``ogb.linkproppred.Evaluator``: MRR and
Hits@K of per-pair negatives as ogbl-citation2 ranks them, Hits@K of shared negatives as ogbl-collab, -ppa and -ddi
do, on random scores with many ties; AUC against a pairwise count; the edge cases (one negative, all ties, no pairs,
no negatives, NaN scores); and chunking that changes nothing."""
import math

import numpy as np
import pytest
import torch
from ogb.linkproppred import Evaluator

from sylvie.runtime.ranking import pair_ranks, ranking_metrics, shared_negative_metrics

pytestmark = pytest.mark.unit


def _scores(shape, seed, levels=None, dtype=torch.float32):
    """Random scores; with ``levels``, drawn from that many values only (ties everywhere)."""
    g = torch.Generator().manual_seed(seed)
    if levels is not None:
        return torch.randint(0, levels, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g, dtype=dtype)


def _pairwise_auc(pos, neg) -> float:
    """Every positive against every negative, counted one by one (a tie counts half)."""
    p, q = pos.double()[:, None], neg.double().reshape(-1)[None, :]
    return float(((p > q).double() + 0.5 * (p == q).double()).mean())


@pytest.mark.parametrize("levels", [None, 3, 20])
@pytest.mark.parametrize("chunk", [7, 1 << 22])  # several rows per chunk, and all at once
def test_per_pair_negatives_rank_as_ogbl_citation2s_evaluator(levels, chunk):
    pos, neg = _scores((300,), 1, levels), _scores((300, 100), 2, levels)
    ogb = Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})
    ours = ranking_metrics(pos, neg, hits=(1, 3, 10), chunk=chunk)
    # OGB's lists are float32: its ranks exactly (1/r of a rank up to 101), its MRR to float32's precision
    ranks = pair_ranks(pos, neg, chunk=chunk)
    assert ranks.dtype == torch.float64 and ranks.shape == (300,)
    torch.testing.assert_close(1.0 / ranks.float(), ogb["mrr_list"], rtol=0, atol=0)
    assert ours["mrr"] == pytest.approx(float(ogb["mrr_list"].double().mean()), rel=1e-6)
    for k in (1, 3, 10):
        assert ours[f"hits@{k}"] == float(ogb[f"hits@{k}_list"].double().mean())
    assert list(ours) == ["mrr", "hits@1", "hits@3", "hits@10", "auc"]
    if levels == 3:  # (many ties: the ranks are halves, and some are not whole)
        assert (ranks != ranks.round()).any()


@pytest.mark.parametrize("dataset", ["ogbl-collab", "ogbl-ppa", "ogbl-ddi"])
@pytest.mark.parametrize("levels", [None, 5, 200])
def test_shared_negatives_hit_as_ogbs_evaluator(dataset, levels):
    evaluator = Evaluator(dataset)
    own_k = evaluator.K  # 50, 100, 20
    pos, neg = _scores((400,), 3, levels), _scores((1000,), 4, levels)
    ks = sorted({1, 10, 50, 100, own_k, 1000, 1001})  # 1001: fewer negatives than K
    ours = shared_negative_metrics(pos, neg, hits=ks, chunk=64)
    for k in ks:
        evaluator.K = k  # (as OGB's own examples set it)
        assert ours[f"hits@{k}"] == evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})[f"hits@{k}"], k
    assert ours["hits@1001"] == 1.0 and "mrr" not in ours
    assert ours["auc"] == pytest.approx(_pairwise_auc(pos, neg), abs=1e-12)


def test_fewer_shared_negatives_than_k_is_ogbs_one():
    pos, neg = _scores((10,), 5), _scores((30,), 6)
    evaluator = Evaluator("ogbl-collab")  # K 50
    assert shared_negative_metrics(pos, neg, hits=(50,))["hits@50"] == 1.0 == \
        evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})["hits@50"]
    assert shared_negative_metrics(pos, neg[:0], hits=(1,)) == {"hits@1": 1.0, "auc": pytest.approx(math.nan,
                                                                                                    nan_ok=True)}


@pytest.mark.parametrize("levels", [None, 4])
def test_auc_is_the_pairwise_count(levels):
    pos, neg = _scores((23,), 7, levels, torch.float64), _scores((23, 9), 8, levels, torch.float64)
    expected = _pairwise_auc(pos, neg)
    for chunk in (1, 5, 1 << 22):
        assert ranking_metrics(pos, neg, chunk=chunk)["auc"] == pytest.approx(expected, abs=1e-12)
        assert shared_negative_metrics(pos, neg.reshape(-1), chunk=chunk)["auc"] == pytest.approx(expected, abs=1e-12)
    # ties half: positives all above but one tie
    assert ranking_metrics(torch.tensor([2.0, 1.0]), torch.tensor([[0.0], [1.0]]))["auc"] == pytest.approx(
        (1 + 1 + 1 + 0.5) / 4)


def test_one_negative_per_pair():
    pos, neg = torch.tensor([3.0, 1.0, 2.0]), torch.tensor([[1.0], [2.0], [2.0]])
    assert pair_ranks(pos, neg).tolist() == [1.0, 2.0, 1.5]
    m = ranking_metrics(pos, neg, hits=(1, 2))
    assert m["mrr"] == pytest.approx((1 + 0.5 + 1 / 1.5) / 3) and m["hits@1"] == pytest.approx(1 / 3)
    assert m["hits@2"] == 1.0 and m["auc"] == pytest.approx(_pairwise_auc(pos, neg))


def test_all_ties():
    """Every score equal: each positive ranks in the middle of its k negatives (k/2 + 1), AUC one half, and no
    positive is above the K-th shared negative."""
    pos, neg = torch.zeros(6), torch.zeros(6, 4)
    assert pair_ranks(pos, neg).tolist() == [3.0] * 6
    assert ranking_metrics(pos, neg, hits=(1, 3)) == {"mrr": pytest.approx(1 / 3), "hits@1": 0.0, "hits@3": 1.0,
                                                      "auc": 0.5}
    assert shared_negative_metrics(pos, torch.zeros(10), hits=(1, 10)) == {"hits@1": 0.0, "hits@10": 0.0,
                                                                           "auc": 0.5}


def test_no_pairs_is_nan_and_no_negatives_is_refused_or_nan():
    """n = 0: every metric NaN (eval.json writes null, as for a split without nodes). Per-pair negatives of width 0
    (a split whose negatives are shared pairs) are refused; no shared negatives: OGB's Hits of 1, AUC NaN."""
    empty = ranking_metrics(torch.zeros(0), torch.zeros(0, 5), hits=(1,))
    assert list(empty) == ["mrr", "hits@1", "auc"] and all(math.isnan(v) for v in empty.values())
    assert pair_ranks(torch.zeros(0), torch.zeros(0, 5)).shape == (0,)
    shared = shared_negative_metrics(torch.zeros(0), torch.zeros(5), hits=(1,))
    assert list(shared) == ["hits@1", "auc"] and all(math.isnan(v) for v in shared.values())
    with pytest.raises(ValueError, match="use shared_negative_metrics"):
        ranking_metrics(torch.zeros(3), torch.zeros(3, 0))
    assert pair_ranks(torch.zeros(3), torch.zeros(3, 0)).tolist() == [1.0] * 3  # as OGB ranks it


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="NaN"):
        ranking_metrics(torch.tensor([math.nan, 1.0]), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="NaN"):
        shared_negative_metrics(torch.ones(2), torch.tensor([0.0, math.nan]))
    with pytest.raises(ValueError, match="one row of negatives per positive"):
        pair_ranks(torch.zeros(3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="2-dimensional"):
        ranking_metrics(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="1-dimensional"):
        shared_negative_metrics(torch.zeros(3), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="positive integer"):
        ranking_metrics(torch.zeros(3), torch.zeros(3, 2), hits=(0,))


def test_float64_scores_are_compared_in_float64():
    """Scores closer than float32 can tell apart stay apart (also against float32 negatives: the common dtype)."""
    pos = torch.tensor([1.0 + 1e-12, 1.0 - 1e-12], dtype=torch.float64)
    neg = torch.tensor([[1.0], [1.0]], dtype=torch.float32)
    assert pair_ranks(pos, neg).tolist() == [1.0, 2.0]
    assert ranking_metrics(pos, neg, hits=(1,)) == {"mrr": 0.75, "hits@1": 0.5, "auc": 0.5}
    assert shared_negative_metrics(pos, neg.reshape(-1), hits=(1,)) == {"hits@1": 0.5, "auc": 0.5}
    # float32 positives against a float64 negative just below them: above it, not tied with it
    below = torch.tensor([1.0 - 1e-12], dtype=torch.float64)
    assert shared_negative_metrics(torch.ones(2), below, hits=(1,)) == {"hits@1": 1.0, "auc": 1.0}
    assert ranking_metrics(torch.ones(2), below.expand(2, 1), hits=(1,)) == {"mrr": 1.0, "hits@1": 1.0, "auc": 1.0}


def test_numpy_and_integer_scores_and_infinities():
    pos, neg = np.array([5, 1, 3]), np.array([[4, 6], [0, 1], [3, 3]])
    assert pair_ranks(pos, neg).tolist() == [2.0, 1.5, 2.0]
    inf = ranking_metrics(torch.tensor([math.inf, -math.inf]), torch.tensor([[0.0], [0.0]]), hits=(1,))
    assert inf == {"mrr": 0.75, "hits@1": 0.5, "auc": 0.5}
