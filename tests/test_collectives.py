"""The all-reduce of sums on the CPU, made of one all-to-all (sylvie/comm/collective.py): every rank gets the same
bits, the copies added in rank order, which is the sum (against float64); ranks simulated in one process."""
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.comm.collective import all_reduce_by_all_to_all

pytestmark = pytest.mark.unit


def _reduced(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    world = len(tensors)

    def rank_main(rank, all_to_all):
        def exchange(recv, send):
            all_to_all(recv, send, [recv.numel() // world] * world, [send.numel() // world] * world)

        t = tensors[rank].clone()
        assert all_reduce_by_all_to_all(t, world, exchange) is t  # in place
        return t

    return SimulatedRanks(world).run(rank_main)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_every_rank_gets_the_same_bits_the_sum_in_rank_order(world, dtype):
    tensors = [(1e3 * torch.randn(5, 7, generator=torch.Generator().manual_seed(r))).to(dtype) for r in range(world)]
    results = _reduced(tensors)
    in_order = tensors[0].clone()
    for t in tensors[1:]:
        in_order += t
    for r in results:
        assert torch.equal(r, in_order)
    exact = sum(t.double() for t in tensors)
    assert torch.allclose(results[0].double(), exact, rtol=1e-6, atol=0)


def test_a_tensor_that_is_not_contiguous_is_summed_in_place():
    bases = [torch.arange(12.0).reshape(3, 4) * (r + 1) for r in range(3)]
    views = [b.t() for b in bases]  # column-major views of the rank's tensor
    world = 3

    def rank_main(rank, all_to_all):
        def exchange(recv, send):
            all_to_all(recv, send, [recv.numel() // world] * world, [send.numel() // world] * world)

        all_reduce_by_all_to_all(views[rank], world, exchange)
        return bases[rank]

    for b in SimulatedRanks(world).run(rank_main):
        assert torch.equal(b, torch.arange(12.0).reshape(3, 4) * 6)
