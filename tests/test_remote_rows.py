"""Fetching rows other ranks own, in one process with simulated ranks: exact in fp32, within a grid step at low
bit widths, in the order asked, with any mix of owners (none included)."""
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.comm.remote_rows import RemoteRows

pytestmark = pytest.mark.unit

OFFSETS = [0, 7, 7, 19, 30]  # rank 1 owns nothing
WORLD, DIM = 4, 6


def _table():
    return torch.randn(OFFSETS[-1], DIM, generator=torch.Generator().manual_seed(0))


def _requests(rank):
    g = torch.Generator().manual_seed(10 + rank)
    n = [5, 0, 40, 1][rank]  # rank 1 asks for nothing; rank 2 asks for repeats
    return torch.randint(0, OFFSETS[-1], (n,), generator=g)


@pytest.mark.parametrize("bits", [32, 16, 8, 1])
def test_fetched_rows_are_the_owners_rows(bits):
    table = _table()

    def rank_fn(rank, a2a):
        own = table[OFFSETS[rank]:OFFSETS[rank + 1]].clone()
        return RemoteRows(rank, OFFSETS, own, bits=bits, all_to_all=a2a).fetch(_requests(rank))

    for rank, rows in enumerate(SimulatedRanks(WORLD).run(rank_fn)):
        want = table[_requests(rank)]
        assert rows.shape == want.shape
        if bits == 32:
            assert torch.equal(rows, want)  # bitwise
        elif bits == 16:
            assert torch.equal(rows, want.half().float())
        else:
            step = (want.amax(1) - want.amin(1)) / (2 ** bits - 1)
            assert ((rows - want).abs() <= step[:, None] * 1.001 + 1e-3).all()


def test_rows_of_a_wrong_size_are_refused():
    with pytest.raises(ValueError, match="holds 3 rows but owns 7 ids"):
        RemoteRows(0, OFFSETS, torch.zeros(3, DIM))


def test_rows_stored_in_another_order_are_found_through_own_index():
    table = _table()

    def rank_fn(rank, a2a):
        own = table[OFFSETS[rank]:OFFSETS[rank + 1]]
        perm = torch.randperm(own.shape[0], generator=torch.Generator().manual_seed(rank))  # row i holds perm[i]
        index = torch.empty_like(perm)
        index[perm] = torch.arange(perm.numel())
        return RemoteRows(rank, OFFSETS, own[perm].clone(), all_to_all=a2a, own_index=index).fetch(_requests(rank))

    for rank, rows in enumerate(SimulatedRanks(WORLD).run(rank_fn)):
        assert torch.equal(rows, table[_requests(rank)])
