"""The halo exchange's autograd, in one process with simulated ranks: fresh and stale, fp32 and quantized,
against the exact gather (forward) and scatter-add (backward), and torch.autograd.gradcheck."""
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan

WORLD, INNER, HALO_PER_PEER, DIM = 3, 6, 2, 5


def _graph(seed=0):
    """Each rank needs HALO_PER_PEER rows of every peer: (owner, index in the owner's inner rows), by owner."""
    g = torch.Generator().manual_seed(seed)
    needs = [[(j, int(i)) for j in range(WORLD) if j != r
              for i in torch.randperm(INNER, generator=g)[:HALO_PER_PEER]] for r in range(WORLD)]
    inner = [torch.randn(INNER, DIM, generator=g) for _ in range(WORLD)]
    return needs, inner


def _plan(needs, rank) -> HaloPlan:
    send_index = [i for peer in range(WORLD) for (owner, i) in needs[peer] if owner == rank]
    send_counts = [sum(owner == rank for owner, _ in needs[peer]) for peer in range(WORLD)]
    recv_counts = [sum(owner == j for owner, _ in needs[rank]) for j in range(WORLD)]
    return HaloPlan(torch.tensor(send_index, dtype=torch.long), send_counts, recv_counts, INNER, len(needs[rank]))


def _reference_halo(needs, inner, rank):
    return torch.stack([inner[o][i] for o, i in needs[rank]])


def _reference_inner_grad(needs, grads, rank):
    """What rank's inner rows receive when every peer's halo rows get gradient ``grads[peer]``."""
    out = torch.zeros(INNER, DIM)
    for peer in range(WORLD):
        for k, (owner, i) in enumerate(needs[peer]):
            if owner == rank:
                out[i] += grads[peer][k]
    return out


def _exchange(needs, rank, a2a, bits=32, pipelined=False, gradient_bits=0):
    return HaloExchange(_plan(needs, rank), bits=bits, seed=7, rank=rank, pipelined=pipelined, all_to_all=a2a,
                        gradient_bits=gradient_bits)


@pytest.mark.unit
@pytest.mark.parametrize("bits", [32, 8, 1])
def test_fresh_exchange_forward_and_backward(bits):
    needs, inner = _graph()
    out_grads = [torch.randn(len(needs[r]), DIM, generator=torch.Generator().manual_seed(100 + r))
                 for r in range(WORLD)]

    def rank_fn(rank, a2a):
        exch = _exchange(needs, rank, a2a, bits)
        x = inner[rank].clone().requires_grad_()
        halo = exch(x, layer=1)
        halo.backward(out_grads[rank])
        return halo.detach(), x.grad

    results = SimulatedRanks(WORLD).run(rank_fn)
    for rank, (halo, grad) in enumerate(results):
        ref_halo, ref_grad = _reference_halo(needs, inner, rank), _reference_inner_grad(needs, out_grads, rank)
        if bits == 32:
            torch.testing.assert_close(halo, ref_halo, rtol=0, atol=0)
            torch.testing.assert_close(grad, ref_grad, rtol=1e-6, atol=1e-6)
        else:  # stochastic rounding: within one grid step of each row's range, per element
            step = (ref_halo.amax(1) - ref_halo.amin(1)) / (2 ** bits - 1)
            assert ((halo - ref_halo).abs() <= step[:, None] * 1.001 + 1e-3).all()
            grad_bound = sum((g.amax(1) - g.amin(1)).max() for g in out_grads) / (2 ** bits - 1) * HALO_PER_PEER
            assert ((grad - ref_grad).abs() <= grad_bound * 1.001 + 1e-3).all()


@pytest.mark.unit
@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("bits, gradient_bits", [(1, 4), (1, 32), (2, 8), (8, 1)])
def test_gradients_travel_at_gradient_bits_and_features_at_bits(bits, gradient_bits, pipelined):
    """comm.gradient_bits: the halo rows are those of an exchange at ``bits`` and the owners' gradients those of one
    at ``gradient_bits`` (the same random streams), byte for byte, fresh and stale; the bytes sent are the two
    messages' at their widths."""
    needs, inner = _graph()
    out_grads = [[torch.randn(len(needs[r]), DIM, generator=torch.Generator().manual_seed(100 * k + r))
                  for r in range(WORLD)] for k in range(2)]

    def rounds(bits_, gradient_bits_):
        def rank_fn(rank, a2a):
            exch = _exchange(needs, rank, a2a, bits_, pipelined, gradient_bits_)
            out = []
            for k in range(2):  # a fresh round keeping its rows, then a stale one where pipelined
                exch.start_epoch()
                exch.begin_round(k, fresh=not (pipelined and k == 1), keep=pipelined)
                x = (inner[rank] * (k + 1)).clone().requires_grad_()
                halo = exch(x, layer=1)
                halo.backward(out_grads[k][rank])
                out.append((halo.detach(), x.grad, exch.stats.bytes_sent))
            return out
        return SimulatedRanks(WORLD).run(rank_fn)

    mixed, forward_like, backward_like = rounds(bits, gradient_bits), rounds(bits, 0), rounds(gradient_bits, 0)
    for rank in range(WORLD):
        for k in range(2):
            (halo, grad, sent), (f_halo, _, f_sent), (_, b_grad, b_sent) = (
                mixed[rank][k], forward_like[rank][k], backward_like[rank][k])
            assert torch.equal(halo, f_halo)
            assert torch.equal(grad, b_grad)
            assert sent == (f_sent + b_sent) // 2


@pytest.mark.unit
def test_layer_0_is_always_exact():
    needs, inner = _graph()
    results = SimulatedRanks(WORLD).run(lambda rank, a2a: _exchange(needs, rank, a2a, bits=1)(inner[rank], layer=0))
    for rank, halo in enumerate(results):
        torch.testing.assert_close(halo, _reference_halo(needs, inner, rank), rtol=0, atol=0)


class _AllRanks(torch.autograd.Function):
    """inner rows of every rank -> halo rows of every rank, each rank's HaloExchange run in its own thread, forward
    and backward (the real autograd of the exchange; this only lets gradcheck see the ranks as one function)."""

    @staticmethod
    def forward(ctx, sim, exchanges, *inners):
        def fwd(rank, _a2a):
            with torch.enable_grad():
                x = inners[rank].detach().requires_grad_()
                return x, exchanges[rank](x, layer=1)
        ctx.sim, ctx.saved = sim, sim.run(fwd)
        return tuple(halo.detach() for _, halo in ctx.saved)

    @staticmethod
    def backward(ctx, *grads):
        def bwd(rank, _a2a):
            x, halo = ctx.saved[rank]
            return torch.autograd.grad(halo, x, grads[rank])[0]
        return (None, None, *ctx.sim.run(bwd))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Input #\\d+ requires gradient and is not a double precision")
def test_gradcheck_of_the_fp32_exchange():
    needs, inner = _graph(seed=3)
    sim = SimulatedRanks(WORLD)
    exchanges = [_exchange(needs, r, sim.all_to_all(r)) for r in range(WORLD)]
    inputs = tuple(x.clone().requires_grad_() for x in inner)
    # float32 (the wire's type); the exchange is linear, so central differences are exact up to rounding
    assert torch.autograd.gradcheck(lambda *xs: _AllRanks.apply(sim, exchanges, *xs), inputs, eps=1e-2, atol=1e-3,
                                    rtol=1e-3, check_undefined_grad=False, check_batched_grad=False)


@pytest.mark.unit
@pytest.mark.parametrize("bits", [32, 1])
def test_a_stale_round_computes_with_the_previous_rounds_rows_and_gradients(bits):
    """Round 0 fresh (and kept); round 1 stale: forward returns round 0's halo rows, backward adds round 0's
    halo gradients into the inner rows, while round 1's own data goes out for round 2."""
    needs, inner0 = _graph(seed=1)
    _, inner1 = _graph(seed=2)
    g0 = [torch.randn(len(needs[r]), DIM, generator=torch.Generator().manual_seed(10 + r)) for r in range(WORLD)]
    g1 = [torch.randn(len(needs[r]), DIM, generator=torch.Generator().manual_seed(20 + r)) for r in range(WORLD)]

    def rank_fn(rank, a2a):
        exch = _exchange(needs, rank, a2a, bits, pipelined=True)
        out = []
        for rnd, (inner, grads, fresh) in enumerate(((inner0, g0, True), (inner1, g1, False), (inner1, g1, True))):
            exch.begin_round(rnd, fresh=fresh, keep=rnd == 0 or rnd == 1)
            x = inner[rank].clone().requires_grad_()
            halo = exch(x, layer=1)
            halo.backward(grads[rank])
            out.append((halo.detach(), x.grad))
        return out

    results = SimulatedRanks(WORLD).run(rank_fn)
    for rank, rounds in enumerate(results):
        (h0, d0), (h1, d1), (h2, _) = rounds
        if bits == 32:
            torch.testing.assert_close(h1, _reference_halo(needs, inner0, rank), rtol=0, atol=0)
            torch.testing.assert_close(d1, _reference_inner_grad(needs, g0, rank), rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(h2, _reference_halo(needs, inner1, rank), rtol=0, atol=0)
        else:  # the stale round returns exactly what the fresh round received, quantization and all
            torch.testing.assert_close(h1, h0, rtol=0, atol=0)
            torch.testing.assert_close(d1, d0, rtol=0, atol=0)
