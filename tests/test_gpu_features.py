"""The feature store on a real GPU (`make gpu`): the zero-copy gather kernel reading pinned host memory against
``index_select`` (bitwise), the store's tiers (device rows, zero-copy host rows, the conventional staged copy)
returning the same rows and counting the bytes each served, and two ranks' features (own, cached and fetched rows)
on one GPU. Skipped where torch sees no CUDA device (the CUDA simulator runs the kernel in
tests/test_feature_store.py)."""
import numpy as np
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.features.gather_cuda import SEGMENT_BYTES, launch_gather
from sylvie.features.rank_features import RankFeatures
from sylvie.features.tiered_rows import TieredRows
from sylvie.numba_cuda import cuda

pytestmark = [pytest.mark.unit, pytest.mark.gpu]
CUDA = torch.device("cuda")


def pinned_table(rows: int, width: int, dtype: torch.dtype, shift_bytes: int, seed: int = 0) -> torch.Tensor:
    """A pinned C-contiguous table whose base address lies ``shift_bytes`` past a 128-byte boundary."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    raw = torch.empty(rows * width * itemsize + 2 * SEGMENT_BYTES, dtype=torch.uint8).pin_memory()
    start = (-raw.data_ptr()) % SEGMENT_BYTES + shift_bytes
    table = raw[start:start + rows * width * itemsize].view(dtype).view(rows, width)
    table.copy_(torch.randn(rows, width, generator=torch.Generator().manual_seed(seed)).to(dtype))
    assert table.data_ptr() % SEGMENT_BYTES == shift_bytes and table.is_pinned()
    return table


def mapped(table: torch.Tensor):
    """The pinned table as a device array (under unified addressing its device address is its own), as the feature
    store maps its host tier."""
    flat = table.reshape(-1)
    typestr = np.dtype(torch.empty(0, dtype=table.dtype).numpy().dtype).str
    return cuda.from_cuda_array_interface({"shape": (flat.numel(),), "typestr": typestr,
                                           "data": (flat.data_ptr(), False), "version": 3}, owner=flat, sync=False)


def bit_pattern(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits, on the host (NaN rows compare as what they are)."""
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16).cpu()


@pytest.mark.parametrize("width, dtype", [(100, torch.float32), (128, torch.float32), (602, torch.float32),
                                          (300, torch.float16), (3, torch.float32)])
@pytest.mark.parametrize("shift", [0, 16])
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "unaligned"])
def test_the_zero_copy_kernel_is_index_select_bitwise(width, dtype, shift, aligned):
    table = pinned_table(3000, width, dtype, shift, seed=width)
    resident = table.to(CUDA)
    rng = np.random.default_rng(width)
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    cases = {"random": rng.integers(0, 3000, 5000), "repeated": np.array([3, 3, 2999, 0, 3]),
             "empty": np.zeros(0, dtype=np.int64), "every row": rng.permutation(3000)}
    for name, idx in cases.items():
        for max_blocks in (65_535, 2):  # a grid that covers the rows, and a grid-stride over them
            idx_dev = torch.from_numpy(idx.astype(np.int64)).to(CUDA)
            out = torch.full((idx.shape[0], width), float("nan"), dtype=dtype, device=CUDA)
            launch_gather(mapped(table), cuda.as_cuda_array(idx_dev), cuda.as_cuda_array(out), aligned=aligned,
                          stream=stream, max_blocks=max_blocks)
            expected = torch.index_select(resident, 0, idx_dev)
            assert torch.equal(bit_pattern(out), bit_pattern(expected)), (name, max_blocks)


@pytest.mark.parametrize("gpu_fraction", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("zero_copy", ["auto", "on", "off"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_stores_gpu_tiers_return_the_same_rows_and_count_their_bytes(gpu_fraction, zero_copy, dtype):
    table = torch.randn(3000, 100, generator=torch.Generator().manual_seed(1)).to(dtype)
    store = TieredRows(table.clone(), gpu_fraction, zero_copy, CUDA)
    num_device = int(round(gpu_fraction * 3000))
    assert store.num_device == num_device and store.zero_copy == (zero_copy != "off")
    assert store.device_rows.is_cuda and store.device_rows.shape[0] == num_device
    assert store.table.is_pinned() == store.zero_copy  # the host tier is read zero-copy from pinned memory
    rng = np.random.default_rng(2)
    slots = torch.from_numpy(rng.integers(0, 3000, 7000))
    out = torch.zeros(9000, 100, dtype=dtype, device=CUDA)
    at = torch.randperm(9000, generator=torch.Generator().manual_seed(3))[:7000]
    store.gather_into(slots, out, at)
    assert out.is_cuda
    assert torch.equal(out.cpu()[at], table[slots])
    assert int((out.cpu().abs().sum(1) == 0).sum()) == 2000  # the rows not asked for are untouched
    on_device = int((slots < num_device).sum())
    row_bytes = 100 * table.element_size()
    assert store.bytes_served == {"device": on_device * row_bytes, "host": (7000 - on_device) * row_bytes}
    store.gather_into(slots[:0], out, at[:0])  # nothing to gather
    with pytest.raises(IndexError, match="row 3000 is out of range for a feature store of 3000 rows"):
        store.gather_into(torch.tensor([3000]), out, torch.tensor([0]))


@pytest.mark.parametrize("gpu_fraction, zero_copy", [(0.0, "on"), (0.5, "auto"), (1.0, "on"), (0.5, "off")])
def test_two_ranks_features_on_one_gpu_are_the_graphs_rows(gpu_fraction, zero_copy):
    """Two ranks (threads, an in-memory all-to-all) of 1,000 vertices each, own rows in a shuffled (VIP-like) order,
    a cache of 300 of the other rank's rows, the rest fetched: every minibatch's rows are the graph's, bitwise, on
    the GPU, and counted by where they came from."""
    n, offsets = 2000, [0, 1000, 2000]
    rows = torch.randn(n, 64, generator=torch.Generator().manual_seed(4))

    def rank_fn(rank, a2a):
        rng = np.random.default_rng(rank)
        lo, hi = offsets[rank], offsets[rank + 1]
        others = np.setdiff1d(np.arange(n), np.arange(lo, hi))
        cached = rng.choice(others, 300, replace=False)
        features = RankFeatures(rank, offsets, rows[lo:hi].numpy(), lo + rng.permutation(hi - lo), cached, a2a,
                                gpu_fraction=gpu_fraction, zero_copy=zero_copy, device=CUDA)
        results = []
        for batch in range(3):
            ids = torch.from_numpy(rng.integers(0, n, 700))
            x, counts = features.gather(ids, key=(0, batch))
            own = int(((ids >= lo) & (ids < hi)).sum())
            in_cache = int(torch.isin(ids, torch.from_numpy(cached)).sum())
            results.append((x.is_cuda, torch.equal(x.cpu(), rows[ids]),
                            (counts.local, counts.cached, counts.remote) == (own, in_cache, 700 - own - in_cache)))
        return results

    for rank, results in enumerate(SimulatedRanks(2).run(rank_fn)):
        assert all(on_gpu and same and counted for on_gpu, same, counted in results), (rank, results)
