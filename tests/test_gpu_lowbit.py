"""The Low-bit Module's CUDA kernels on a real GPU (`make gpu`): the bytes the CPU kernels write for the same random
numbers (counter-based or given), the same decoded rows, unbiased rounding and one grid step of error, and every edge
case: nothing to send, empty destinations, constant rows, odd row and feature counts, every bit width, rows holding
NaN or inf, extreme magnitudes, a non-default stream. Skipped where torch sees no CUDA device (the CUDA simulator
runs the same kernels in tests/test_lowbit.py)."""
import numpy as np
import pytest
import torch
from test_lowbit import rows_of_many_kinds, transmitted_grid

from sylvie.comm.lowbit import Encoded, NonFiniteRowsError, decode, encode
from sylvie.comm.lowbit.format import Layout

pytestmark = [pytest.mark.unit, pytest.mark.gpu]
CUDA = torch.device("cuda")
BITS = (1, 2, 4, 8)


def on_host(enc: Encoded) -> Encoded:
    return Encoded(enc.buffer.cpu(), enc.layout)


def assert_same_bytes(x: torch.Tensor, bits: int, counts, key: int, uniforms=None):
    """encode on the GPU == encode on the CPU, bytewise; decoding either buffer on either side gives the same rows."""
    gpu = encode(x.to(CUDA), bits, counts, key=key, uniforms=None if uniforms is None else uniforms.to(CUDA))
    cpu = encode(x, bits, counts, key=key, uniforms=uniforms)
    assert gpu.buffer.is_cuda and gpu.layout == cpu.layout
    assert torch.equal(gpu.buffer.cpu(), cpu.buffer), f"bits {bits}, counts {counts}: CUDA bytes differ from CPU"
    rows_gpu = decode(gpu.buffer, gpu.layout)
    assert rows_gpu.is_cuda
    assert torch.equal(rows_gpu.cpu(), decode(cpu.buffer, cpu.layout))  # bitwise: same floats, NaN-free
    return gpu, cpu


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("given", [False, True], ids=["counter-based", "given-uniforms"])
def test_cuda_kernels_write_the_cpu_kernels_bytes(bits, given):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(14, 13, generator=g) * torch.logspace(-8, 8, 14)[:, None]
    x[3], x[4], x[5] = 0.3, 0.0, -2.5  # constant rows
    uniforms = torch.rand(x.shape, generator=g) if given else None
    assert_same_bytes(x, bits, [5, 0, 6, 3], key=11, uniforms=uniforms)  # an empty destination in between
    assert_same_bytes(rows_of_many_kinds(n=40, d=53, seed=bits), bits, [13, 0, 27], key=7,
                      uniforms=torch.rand(40, 53, generator=g) if given else None)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("rows, dim", [(1, 1), (7, 7), (9, 9), (33, 31), (17, 32), (8, 33), (5, 602), (3, 1000)])
def test_odd_row_and_feature_counts(bits, rows, dim):
    """Row counts that do not fill a block of 8 rows, feature counts below, at and above a warp of 32 and rows of
    more code bytes than a warp has threads."""
    x = torch.randn(rows, dim, generator=torch.Generator().manual_seed(rows * dim))
    counts = [rows // 2, 0, rows - rows // 2]
    gpu, _ = assert_same_bytes(x, bits, counts, key=rows + dim)
    steps = transmitted_grid(on_host(gpu))[1]
    err = (decode(gpu.buffer, gpu.layout).cpu().double() - x.double()).abs().max(1).values
    assert torch.all(err <= steps * (1 + 1e-6))


@pytest.mark.parametrize("bits", BITS)
def test_a_large_message_is_the_cpus_bytes(bits):
    """200,000 rows (25,000 blocks) of 128 features, to 4 destinations."""
    x = torch.randn(200_000, 128, generator=torch.Generator().manual_seed(3))
    assert_same_bytes(x, bits, [80_000, 0, 70_000, 50_000], key=12345)


@pytest.mark.parametrize("bits", BITS + (32,))
def test_nothing_to_send(bits):
    enc = encode(torch.empty(0, 16, device=CUDA), bits, [0, 0, 0])
    assert enc.buffer.numel() == 0 and enc.layout.sizes == (0, 0, 0) and enc.buffer.is_cuda
    out = decode(enc.buffer, enc.layout)
    assert out.shape == (0, 16) and out.is_cuda


@pytest.mark.parametrize("bits", BITS)
def test_constant_rows_decode_exactly_or_between_their_two_fp16_neighbours(bits):
    x = torch.zeros(3, 13)
    x[1] = 0.3  # not representable in fp16: stochastic between its two neighbours
    x[2] = -2.5  # representable: exact
    draws = torch.stack([decode(e.buffer, e.layout) for e in (encode(x.to(CUDA), bits, key=k) for k in range(500))])
    draws = draws.cpu().double()
    assert torch.equal(draws[:, 0], torch.zeros_like(draws[:, 0]))
    assert torch.equal(draws[:, 2], torch.full_like(draws[:, 2], -2.5))
    values, target = torch.unique(draws[:, 1]), float(x[1, 0])
    assert len(values) <= 2 and values[0] <= target <= values[-1]
    assert abs(float(draws[:, 1].mean()) - target) <= 1e-3 * target


@pytest.mark.parametrize("bits", BITS)
def test_unbiased_mean_of_2000_decodes_within_standard_errors(bits):
    """As tests/test_lowbit.py's test on the CPU, with 2,000 encodes and decodes on the GPU: per element z = (mean of
    the decodes - x) / exact standard error of stochastic rounding; at most 1% beyond 3, none beyond 4.5, and no
    bias common to the elements."""
    x = rows_of_many_kinds(n=12, d=29)
    xd = x.to(CUDA)
    draws = torch.stack([decode(e.buffer, e.layout) for e in (encode(xd, bits, key=k) for k in range(2000))])
    draws = draws.cpu().double()
    grid_min, step = transmitted_grid(on_host(encode(xd, bits)))
    t = (x.double() - grid_min[:, None]) / step.clamp_min(1e-300)[:, None]
    p = (t - t.floor()).clamp(0, 1)
    se = step[:, None] * torch.sqrt(p * (1 - p) / len(draws))
    half_ulp = torch.from_numpy(np.spacing(draws.abs().max(0).values.float().numpy())).double() / 2
    z = (draws.mean(0) - x.double()) / (se + half_ulp)
    assert float((z.abs() > 3).double().mean()) <= 0.01, z
    assert float(z.abs().max()) <= 4.5, z
    assert abs(float(z.mean())) <= 3 / np.sqrt(z.numel()), f"common bias: mean z {float(z.mean()):.3f}"


@pytest.mark.parametrize("bits", BITS)
def test_error_per_element_within_one_grid_step(bits):
    x = rows_of_many_kinds(n=40, d=53, seed=1)
    x = x[torch.arange(40) != 4]  # the constant row: previous test
    xd = x.to(CUDA)
    for key in range(50):
        enc = encode(xd, bits, [13, 0, 26], key=key)
        err = (decode(enc.buffer, enc.layout).cpu().double() - x.double()).abs().max(1).values
        assert torch.all(err <= transmitted_grid(on_host(enc))[1])


def test_extreme_magnitudes_keep_their_relative_precision():
    x = torch.randn(4, 64) * torch.tensor([[1e-30], [1e-12], [1e12], [1e30]])
    enc = encode(x.to(CUDA), 8, key=5)
    rel = (decode(enc.buffer, enc.layout).cpu() - x).abs().max(1).values / (x.max(1).values - x.min(1).values)
    assert torch.all(rel < 0.005)
    assert torch.equal(enc.buffer.cpu(), encode(x, 8, key=5).buffer)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rows_are_an_error_naming_the_layer(bad):
    x = torch.randn(6, 10)
    x[4, 7] = bad
    with pytest.raises(NonFiniteRowsError, match=r"layer 2 forward features: 1 of 6 rows .* \(first: row 4\)"):
        encode(x.to(CUDA), 1, key=0, what="layer 2 forward features")


def test_into_given_buffers_and_on_another_stream():
    """``out=`` buffers on the GPU are written in place; the kernels run on torch's current stream, so rows made
    on a side stream are encoded after they are written, and decoded rows are there for the next op on it."""
    x = torch.randn(1000, 77, generator=torch.Generator().manual_seed(9))
    layout = Layout.of([600, 400], 77, 2)
    wire = torch.full((layout.total_bytes,), 0xAB, dtype=torch.uint8, device=CUDA)
    back = torch.full((1000, 77), float("nan"), device=CUDA)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        xd = torch.empty(1000, 77, device=CUDA)
        xd.copy_(x, non_blocking=False)
        xd.mul_(1.0)  # queued on the side stream, right before the encode
        enc = encode(xd, 2, [600, 400], key=4, out=wire)
        decode(enc.buffer, enc.layout, out=back)
        total = back.sum()
    side.synchronize()
    assert enc.buffer.data_ptr() == wire.data_ptr()
    cpu = encode(x, 2, [600, 400], key=4)
    assert torch.equal(wire.cpu(), cpu.buffer)
    assert torch.equal(back.cpu(), decode(cpu.buffer, cpu.layout))
    assert torch.isfinite(total)
    with pytest.raises(ValueError, match="out must be a uint8 buffer"):
        encode(xd, 2, [600, 400], out=torch.empty(layout.total_bytes, dtype=torch.uint8))  # on the host
