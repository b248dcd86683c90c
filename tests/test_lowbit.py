"""The Low-bit Module against its definition: unbiased stochastic rounding, per-row error bounds, the
byte layout, edge cases, and CPU kernels bit-identical to the CUDA kernels (run by numba's simulator)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from support.commands import REPO

from sylvie.comm.lowbit import NonFiniteRowsError, decode, encode, message_key
from sylvie.comm.lowbit.format import Layout, buffer_bytes, row_bytes
from sylvie.comm.lowbit.scalar import fp16_directed, fp16_value


def rows_of_many_kinds(n=12, d=37, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    x[1] = torch.rand(d, generator=g)  # non-negative (post-ReLU)
    x[2] *= 1e-6  # gradient-sized
    x[3] = x[3] * 1e4 + 3e4  # large offset
    x[4, :] = 0.3  # constant, not representable in fp16
    return x


def transmitted_grid(enc) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's grid minimum and step as sent (fp16 * 2**e), read from the buffer per its documented layout."""
    mins, steps = [], []
    for part, n in zip(enc.parts(), enc.layout.counts):
        b = part.numpy().astype(np.int64)
        min_bits = b[0:2 * n:2] | (b[1:2 * n:2] << 8)
        step_bits = b[2 * n:4 * n:2] | (b[2 * n + 1:4 * n:2] << 8)
        e = b[4 * n:5 * n]
        e = np.where(e >= 128, e - 256, e)
        mins += [float(fp16_value(int(m))) * 2.0 ** int(k) for m, k in zip(min_bits, e)]
        steps += [float(fp16_value(int(s))) * 2.0 ** int(k) for s, k in zip(step_bits, e)]
    return torch.tensor(mins, dtype=torch.float64), torch.tensor(steps, dtype=torch.float64)


def transmitted_steps(enc) -> torch.Tensor:
    return transmitted_grid(enc)[1]


@pytest.mark.unit
@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_unbiased_mean_of_2000_decodes_within_3_standard_errors(bits):
    """E[decode(encode(x))] = x, per element: z = (mean of 2,000 decodes - x) / standard error.

    The standard error is the exact one of stochastic rounding between the element's two grid neighbours
    a < b: (b - a) sqrt(p (1 - p) / 2000) with p = (x - a) / (b - a), from the grid as transmitted (a
    sample estimate is 0 where an up-move has probability 1e-5 and 2,000 draws show none). Decoded values
    are float32, so the mean can only come within float32 rounding of the grid points (half an ulp), which
    is added. Over many elements a few |z| > 3 happen by chance (0.27% each), so: at most 1% beyond 3,
    none beyond 4.5 (chance 7e-6 each), and the mean z over all elements within 3 of its own standard
    error (a bias common to many elements shows there first).
    """
    x = rows_of_many_kinds(n=12, d=29)
    draws = torch.stack([decode(e.buffer, e.layout) for e in (encode(x, bits, key=k) for k in range(2000))]).double()
    grid_min, step = transmitted_grid(encode(x, bits))
    t = (x.double() - grid_min[:, None]) / step.clamp_min(1e-300)[:, None]
    p = (t - t.floor()).clamp(0, 1)
    se = step[:, None] * torch.sqrt(p * (1 - p) / len(draws))
    half_ulp = torch.from_numpy(np.spacing(draws.abs().max(0).values.float().numpy())).double() / 2
    z = (draws.mean(0) - x.double()) / (se + half_ulp)
    assert float((z.abs() > 3).double().mean()) <= 0.01, z
    assert float(z.abs().max()) <= 4.5, z
    assert abs(float(z.mean())) <= 3 / np.sqrt(z.numel()), f"common bias: mean z {float(z.mean()):.3f}"


@pytest.mark.unit
@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_error_per_element_within_one_grid_step(bits):
    x = rows_of_many_kinds(n=40, d=53, seed=1)
    x = x[torch.arange(40) != 4]  # row 4 (constant) is checked in its own test
    lo, hi = x.min(1).values.double(), x.max(1).values.double()
    ideal = (hi - lo) / (2**bits - 1)
    for key in range(50):
        enc = encode(x, bits, [13, 0, 26], key=key)
        err = (decode(enc.buffer, enc.layout).double() - x.double()).abs().max(1).values
        step = transmitted_steps(enc)
        assert torch.all(err <= step)
        # The sent step is the ideal (max - min) / (2^b - 1) up to fp16 rounding: the minimum rounded down
        # (relative 2^-10 of |min|) and the step rounded up (relative 2^-10).
        assert torch.all(step <= ideal * (1 + 2**-10) + lo.abs() * 2**-10 / (2**bits - 1) * (1 + 2**-10))


@pytest.mark.unit
def test_8_bit_round_trip_error_below_half_a_percent_of_the_row_range():
    x = rows_of_many_kinds(n=200, d=256, seed=2)
    x = x[torch.arange(200) != 4]
    enc = encode(x, 8, key=3)
    err = (decode(enc.buffer, enc.layout) - x).abs().max(1).values
    assert torch.all(err < 0.005 * (x.max(1).values - x.min(1).values))


@pytest.mark.unit
def test_1_bit_at_256_features_takes_at_most_a_25th_of_fp32():
    x = torch.randn(1000, 256)
    enc = encode(x, 1, [250, 250, 500])
    assert enc.buffer.numel() <= x.numel() * 4 / 25
    # per row 32 code bytes + fp16 min + fp16 step + int8 exponent; each peer's buffer padded to 8 bytes
    assert enc.buffer.numel() == 2 * 9256 + 18504


@pytest.mark.unit
def test_fp16_rounding_of_the_row_header_matches_numpy_float16():
    """The header's fp16 min (rounded down) and step (rounded up), computed on float32 bit patterns, against
    numpy's float16 (round to nearest, then one step toward the required direction), normals, subnormals and
    the edges."""
    from numba import njit
    directed = njit(lambda v, up: fp16_directed(v, up))
    rng = np.random.default_rng(0)
    vals = rng.standard_normal(5000) * 10.0 ** rng.uniform(-10, 4.7, 5000)
    edges = [0.0, -0.0, 65504.0, -65504.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -14,
             2.0 ** -14 * (1 - 2 ** -11),
             1.0, 2047.5, 2048 - 2 ** -10, 65500.0, 1e-40]
    vals = np.concatenate([vals, edges, np.negative(edges)]).astype(np.float32)
    vals = vals[np.abs(vals) <= 65504]
    for v in vals:
        for up in (True, False):
            ref = np.float16(v)
            if up and np.float32(ref) < v:
                ref = np.nextafter(ref, np.float16(np.inf))
            if not up and np.float32(ref) > v:
                ref = np.nextafter(ref, np.float16(-np.inf))
            bits, value = directed(v, up)
            got = np.array([bits], np.uint16).view(np.float16)[0]
            assert np.float32(got) == np.float32(ref) == value, (v, up, got, ref, value)
            assert float(fp16_value(int(bits))) == float(ref)


@pytest.mark.unit
def test_layout_sizes_and_alignment():
    assert row_bytes(13, 1) == 2 and row_bytes(13, 2) == 4 and row_bytes(13, 4) == 7 and row_bytes(13, 8) == 13
    assert buffer_bytes(0, 13, 1) == 0 and buffer_bytes(3, 13, 32) == 3 * 13 * 4
    layout = Layout.of([3, 0, 5], 13, 2)  # 9 bytes per row (4 code bytes + 5 header bytes)
    assert layout.sizes == (32, 0, 48) and layout.offsets == (0, 32, 32) and layout.used == (27, 0, 45)


@pytest.mark.unit
def test_constant_rows_decode_unbiased_and_zero_rows_exactly():
    x = torch.zeros(3, 13)
    x[1] = 0.3  # not representable in fp16: stochastic between its two fp16 neighbours
    x[2] = -2.5  # representable: exact
    draws = torch.stack([decode(e.buffer, e.layout) for e in (encode(x, 1, key=k) for k in range(2000))]).double()
    assert torch.equal(draws[:, 0], torch.zeros_like(draws[:, 0]))
    assert torch.equal(draws[:, 2], torch.full_like(draws[:, 2], -2.5))
    target = float(x[1, 0])  # float32 0.3
    values = torch.unique(draws[:, 1])
    assert len(values) == 2 and values[0] < target < values[1]  # rounded stochastically between two neighbours
    gap, p = float(values[1] - values[0]), (target - float(values[0])) / float(values[1] - values[0])
    se = gap * np.sqrt(p * (1 - p) / draws[:, 1].numel())
    assert abs(float(draws[:, 1].mean()) - target) <= 3 * se + np.spacing(np.float32(0.3)) / 2


@pytest.mark.unit
@pytest.mark.parametrize("dim", [1, 7, 9, 13, 602])
def test_feature_dimensions_that_are_not_multiples_of_8(dim):
    x = torch.randn(5, dim)
    for bits in (1, 2, 4, 8):
        enc = encode(x, bits, [2, 3], key=1)
        y = decode(enc.buffer, enc.layout)
        assert y.shape == x.shape
        assert torch.all((y - x).abs().max(1).values <= transmitted_steps(enc).float() * (1 + 1e-6))


@pytest.mark.unit
def test_nothing_to_send():
    for bits in (1, 8, 32):
        enc = encode(torch.empty(0, 16), bits, [0, 0, 0])
        assert enc.buffer.numel() == 0 and enc.layout.sizes == (0, 0, 0)
        assert decode(enc.buffer, enc.layout).shape == (0, 16)


@pytest.mark.unit
def test_32_bits_is_the_raw_rows():
    x = torch.randn(4, 9)
    enc = encode(x, 32, [1, 3])
    assert enc.buffer.numel() == 4 * 9 * 4
    assert torch.equal(decode(enc.buffer, enc.layout), x)


@pytest.mark.unit
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rows_are_an_error_naming_the_layer(bad):
    x = torch.randn(6, 10)
    x[4, 7] = bad
    with pytest.raises(NonFiniteRowsError, match=r"layer 2 forward features: 1 of 6 rows .* \(first: row 4\)"):
        encode(x, 1, key=0, what="layer 2 forward features")


@pytest.mark.unit
def test_extreme_magnitudes_keep_their_relative_precision():
    x = torch.randn(4, 64) * torch.tensor([[1e-30], [1e-12], [1e12], [1e30]])
    enc = encode(x, 8, key=5)
    rel = (decode(enc.buffer, enc.layout) - x).abs().max(1).values / (x.max(1).values - x.min(1).values)
    assert torch.all(rel < 0.005)


@pytest.mark.unit
def test_same_key_same_bytes_other_key_other_bytes():
    x = torch.randn(20, 40)
    a, b, c = encode(x, 1, key=message_key(0, 1, 2)), encode(x, 1, key=message_key(0, 1, 2)), encode(x, 1, key=7)
    assert torch.equal(a.buffer, b.buffer) and not torch.equal(a.buffer, c.buffer)
    assert message_key(0, 1) != message_key(1, 0)


@pytest.mark.unit
def test_bad_arguments():
    with pytest.raises(ValueError, match="bits must be one of"):
        encode(torch.randn(2, 3), 3)
    with pytest.raises(ValueError, match="do not add up"):
        encode(torch.randn(5, 3), 1, [2, 2])
    with pytest.raises(ValueError, match="float32"):
        encode(torch.randn(2, 3, dtype=torch.float64), 1)


@pytest.mark.slow
def test_cpu_and_cuda_kernels_write_identical_bytes_under_the_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    worker = REPO / "tests" / "workers" / "lowbit_simulator_worker.py"
    r = subprocess.run([sys.executable, str(worker)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical: 18 of 18" in r.stdout, r.stdout


@pytest.mark.slow
def test_cuda_kernels_compile_for_a_real_gpu():
    """Type-checks and compiles the numba-cuda kernels to PTX (sm_80) without a GPU, which the simulator
    (plain Python) does not: catches code the simulator accepts but the CUDA target cannot compile."""
    worker = REPO / "tests" / "workers" / "lowbit_ptx_worker.py"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, str(worker)], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "encode ptx" in r.stdout and "decode ptx" in r.stdout
