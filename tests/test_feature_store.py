"""The feature store and its gather kernels: the CPU gather against numpy, the zero-copy CUDA kernel under the
simulator (bitwise) and compiled to PTX, the store's tiers returning the same rows, and bad input."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from support.commands import REPO

from sylvie.comm.gather_cpu import gather_rows, gather_rows_at, put_rows
from sylvie.config import resolve_runs
from sylvie.errors import SylvieError
from sylvie.features.host_memory import huge_page_table
from sylvie.features.tiered_rows import TieredRows


def _table(rows, width, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, width)).astype(dtype)


@pytest.mark.unit
@pytest.mark.parametrize("shape, dtype", [((3000, 100), torch.float32), ((7, 3), torch.float16),
                                          ((0, 5), torch.float32)])
def test_a_huge_page_table_is_an_ordinary_writable_tensor(shape, dtype):
    t = huge_page_table(shape, dtype)
    assert t.shape == shape and t.dtype == dtype and t.is_contiguous() and not t.is_pinned()
    values = torch.arange(t.numel(), dtype=torch.float32).reshape(shape).to(dtype)
    t.copy_(values)
    table = t.numpy()
    del t  # the array keeps the memory
    assert np.array_equal(gather_rows(table, np.arange(shape[0])[::-1].copy()), values.numpy()[::-1])


@pytest.mark.unit
@pytest.mark.parametrize("width, dtype", [(100, np.float32), (128, np.float32), (602, np.float32),
                                          (300, np.float16)])
def test_the_cpu_gather_is_numpys_fancy_indexing_bitwise(width, dtype):
    table = _table(500, width, dtype)
    rng = np.random.default_rng(1)
    for idx in (rng.integers(0, 500, 1000), np.array([7, 7, 499, 0, 7]), np.zeros(0, dtype=np.int64),
                np.arange(500, dtype=np.int32)):
        out = gather_rows(table, idx)
        assert out.dtype == table.dtype and np.array_equal(out.view(np.uint8), table[idx].view(np.uint8))


@pytest.mark.unit
def test_bad_gather_input_is_a_clear_error():
    table = _table(10, 4)
    with pytest.raises(IndexError, match="index 10 is out of range for a table of 10 rows"):
        gather_rows(table, np.array([0, 10]))
    with pytest.raises(IndexError, match="index -1 is out of range"):
        gather_rows(table, np.array([-1]))
    with pytest.raises(ValueError, match="C-contiguous.*np.ascontiguousarray"):
        gather_rows(table[:, ::2], np.array([0]))
    with pytest.raises(ValueError, match="must be 2-D"):
        gather_rows(table.reshape(2, 5, 4), np.array([0]))
    with pytest.raises(ValueError, match="1-D integer array"):
        gather_rows(table, np.array([0.0]))


@pytest.mark.unit
@pytest.mark.parametrize("width, dtype", [(64, np.float32), (3, np.float16), (5, np.uint8)])
def test_gathering_and_putting_rows_in_place_is_numpys_indexed_assignment_bitwise(width, dtype):
    table = _table(400, width, dtype)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 400, 600)
    at = rng.permutation(900)[:600]  # distinct rows of the output, some left untouched
    out = np.full((900, width), 7, dtype)
    expected = out.copy()
    expected[at] = table[idx]
    assert gather_rows_at(table, idx, out, at) is out
    assert np.array_equal(out.view(np.uint8), expected.view(np.uint8))
    rows = _table(600, width, dtype, seed=5)
    expected[at] = rows
    put_rows(rows, out, at.astype(np.int32))
    assert np.array_equal(out.view(np.uint8), expected.view(np.uint8))
    assert gather_rows_at(table, idx[:0], out, at[:0]) is out  # nothing to move


@pytest.mark.unit
def test_bad_in_place_gather_input_is_a_clear_error():
    table, out = _table(10, 4), np.zeros((5, 4), np.float32)
    with pytest.raises(IndexError, match="index 10 is out of range for a table of 10 rows"):
        gather_rows_at(table, np.array([0, 10]), out, np.array([0, 1]))
    with pytest.raises(IndexError, match="index 5 is out of range for a destination table of 5 rows"):
        gather_rows_at(table, np.array([0, 1]), out, np.array([0, 5]))
    with pytest.raises(ValueError, match="at must be integers, one per index"):
        gather_rows_at(table, np.array([0, 1]), out, np.array([0]))
    with pytest.raises(ValueError, match="out must be a C-contiguous float32 array of 4 columns"):
        gather_rows_at(table, np.array([0]), np.zeros((5, 4), np.float64), np.array([0]))


@pytest.mark.unit
@pytest.mark.parametrize("gpu_fraction", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("zero_copy", ["auto", "off"])
def test_the_store_returns_the_same_rows_whatever_its_tiers(gpu_fraction, zero_copy):
    table = torch.from_numpy(_table(300, 100))
    store = TieredRows(table, gpu_fraction, zero_copy)
    slots = torch.from_numpy(np.random.default_rng(2).integers(0, 300, 700))
    out, at = torch.zeros(1000, 100), torch.randperm(1000)[:700]
    store.gather_into(slots, out, at)
    assert torch.equal(out[at], table[slots]) and out.abs().sum(1).eq(0).sum() == 300
    assert store.bytes_served == {"device": 0, "host": 700 * 400}  # no GPU here: one host tier
    with pytest.raises(IndexError, match="row 300 is out of range for a feature store of 300 rows"):
        store.gather_into(torch.tensor([300]), out, torch.tensor([0]))


@pytest.mark.unit
def test_bad_store_settings_are_clear_errors():
    table = torch.zeros(4, 2)
    with pytest.raises(SylvieError, match="features.gpu_fraction must lie within 0..1.*1.5"):
        TieredRows(table, 1.5)
    with pytest.raises(SylvieError, match="features.zero_copy is on but the rank trains without a GPU"):
        TieredRows(table, 0.0, "on")
    with pytest.raises(ValueError, match="C-contiguous"):
        TieredRows(table.t(), 0.0)
    config = {"datasets": {"cora": {"source": "planetoid"}}, "runs": {"r": {"features": {"gpu_fraction": -0.1}}}}
    with pytest.raises(SylvieError, match="'runs.r.features.gpu_fraction'"):
        resolve_runs(config)


def _worker(name, env):
    return subprocess.run([sys.executable, str(REPO / "tests" / "workers" / name)], env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_the_zero_copy_kernel_gathers_bitwise_under_the_simulator():
    """Tables of random bytes; every unit the launch picks (16, 8, 4, 2, 1 bytes), a warp per row (fp32 rows of 100,
    128 and 602) and several rows a warp (fp32 rows of 3 and 16, fp16 rows of 7 and 8); table bases 128-byte aligned
    and not, an output off a 16-byte boundary; random, repeated and empty index lists; aligned and unaligned."""
    r = _worker("gather_simulator_worker.py", {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical: 37 of 37" in r.stdout, r.stdout
    for covered in ("16-byte units, 1 row(s) a warp", "16-byte units, 8 row(s) a warp", "8-byte units", "4-byte units",
                    "2-byte units", "1-byte units", "32 row(s) a warp"):
        assert covered in r.stdout, covered


@pytest.mark.slow
def test_the_zero_copy_kernels_compile_for_a_real_gpu():
    r = _worker("gather_ptx_worker.py", {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"})
    if r.returncode == 3:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gather ptx: 5 kernels" in r.stdout
