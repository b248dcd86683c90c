"""Pipelined halo exchange and the Bounded Staleness Adaptor."""
import math

import pytest
import torch
from support.commands import REPO, ranks

from sylvie.comm.staleness import BoundedStalenessAdaptor


@pytest.mark.slow
def test_pipelined_epochs_compute_with_what_peers_sent_one_epoch_earlier(cora_partitions, tmp_path):
    out, epochs, bound = tmp_path / "rec", 8, 3
    ranks(2, REPO / "tests" / "workers" / "pipeline_worker.py", cora_partitions[2], out, bound, epochs)
    recs = [torch.load(f"{out}.{r}.pt") for r in (0, 1)]
    modes = recs[0]["modes"]
    assert modes == recs[1]["modes"] == [0, 1, 1, 0, 1, 1, 0, 1]  # sync at 0 and every 3rd epoch
    for me, peer in ((0, 1), (1, 0)):
        for (epoch, layer), used in recs[me]["used"].items():
            # With 2 ranks, every halo row of one rank is a row the other sends it, in the same order.
            source = epoch - modes[epoch]  # the epoch whose data this one computes with
            assert torch.equal(used, recs[peer]["sent"][(source, layer)]), (me, epoch, layer)
            if modes[epoch]:  # and not this epoch's own, which differs after a step of training
                assert not torch.equal(used, recs[peer]["sent"][(epoch, layer)])
        for (epoch, layer), grads in recs[me]["grad_used"].items():  # stale epochs: last epoch's gradients
            assert modes[epoch] == 1
            assert torch.equal(grads, recs[peer]["grad_sent"][(epoch - 1, layer)]), (me, epoch, layer)
        stale = [e for e in range(epochs) if modes[e]]
        assert {e for e, _ in recs[me]["grad_used"]} == set(stale)


@pytest.mark.unit
@pytest.mark.parametrize("bound", [2, 3, 5])
def test_bound_k_makes_every_kth_epoch_synchronous(bound):
    a = BoundedStalenessAdaptor(pipeline=True, bound=bound)
    sync = []
    for e in range(30):
        sync.append(a.mode(e).synchronous)
        a.observe(e, drift=0.0)
    assert [e for e, s in enumerate(sync) if s] == list(range(0, 30, bound))


@pytest.mark.unit
def test_adaptive_policy_goes_synchronous_on_drift_within_the_bound():
    a = BoundedStalenessAdaptor(pipeline=True, bound=5, policy="adaptive", drift_tolerance=0.1)
    drifts = [math.nan, 0.5, 0.3, 0.05, 0.02, 0.01, 0.01, 0.01, 0.01, 0.01, 0.2, 0.01, 0.01, 0.01, 0.01, 0.01]
    sync, reasons = [], {}
    for e, d in enumerate(drifts):
        sync.append(a.mode(e).synchronous)
        reasons[e] = a.mode(e).reason
        a.observe(e, d)
    # the drift seen at epoch t decides epoch t+2 (0.5 at 1 -> 3, 0.3 at 2 -> 4, 0.2 at 10 -> 12); the bound
    # counts from the last synchronous epoch, whatever made it so (4 -> 9)
    assert [e for e, s in enumerate(sync) if s] == [0, 3, 4, 9, 12]
    assert reasons[3] == "drift 0.5 > 0.1" and reasons[9] == "bound 5" and reasons[12] == "drift 0.2 > 0.1"
    assert reasons[5] == "stale"


@pytest.mark.unit
def test_not_pipelined_is_always_synchronous_and_bound_one_too():
    for a in (BoundedStalenessAdaptor(pipeline=False, bound=0), BoundedStalenessAdaptor(pipeline=True, bound=1)):
        for e in range(6):
            assert a.mode(e).synchronous
            a.observe(e, 0.0)


@pytest.mark.unit
def test_resume_starts_synchronous():
    a = BoundedStalenessAdaptor(pipeline=True, bound=4, start=7)
    assert a.mode(7).synchronous and a.mode(7).reason == "resumed" and not a.mode(8).synchronous
