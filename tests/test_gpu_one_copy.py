"""A sampled minibatch reaches a real GPU in one copy (`make gpu`): PyTorch's profiler counts exactly one
host-to-device copy a minibatch, from pinned memory, for every way the feature store serves rows (zero-copy reads,
a device tier, the CPU's gather), and the blocks, labels and input rows on the GPU are the sampler's and the
graph's. Two ranks (threads, an in-memory all-to-all), so some rows are fetched from the other. Skipped where torch
sees no CUDA device; tests/test_one_copy_minibatch.py checks the same layout on the CPU."""
import numpy as np
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.features.features_by_type import FeaturesByType, TypeSpaces
from sylvie.sampling.batch_transfer import BatchTransfer, wait
from sylvie.sampling.neighbor_sampler import NeighborSampler
from sylvie.train.sampled_batches import BatchPreparer

pytestmark = [pytest.mark.unit, pytest.mark.gpu]
CUDA = torch.device("cuda")


def _graph(n: int, degree: int, seed: int = 0):
    """In-edges by destination: ``degree`` random sources each."""
    src = np.random.default_rng(seed).integers(0, n, n * degree)
    indptr = np.arange(0, n * degree + 1, degree, dtype=np.int64)
    return indptr, src.astype(np.int64)


@pytest.mark.parametrize("gpu_fraction, zero_copy", [(0.0, "on"), (0.5, "on"), (0.0, "off"), (0.5, "off")])
def test_one_pinned_host_to_device_copy_a_minibatch(gpu_fraction, zero_copy):
    from torch.profiler import ProfilerActivity, profile

    n, offsets, batches = 4000, [0, 2000, 4000], 4
    indptr, src = _graph(n, 8)
    table = torch.randn(n, 100, generator=torch.Generator().manual_seed(1))
    labels = torch.arange(n) % 7
    spaces = TypeSpaces(np.array(offsets), [[2000], [2000]])

    def build(rank, a2a):
        lo = offsets[rank]
        others = np.setdiff1d(np.arange(n), np.arange(lo, lo + 2000))
        cached = np.random.default_rng(rank).choice(others, 300, replace=False)
        features = FeaturesByType(rank, spaces, [table[lo:lo + 2000].numpy()], [lo + np.arange(2000)[::-1]],
                                     [cached], a2a, gpu_fraction=gpu_fraction, zero_copy=zero_copy, device=CUDA)
        sampler = NeighborSampler(indptr, src, [5, 5], lo + np.arange(0, 2000, 4), batches, 0, rank)
        transfer = BatchTransfer(CUDA, 3)
        return sampler, transfer, BatchPreparer(sampler, features, labels[lo:lo + 2000], lo, transfer)

    def run(rank, a2a):
        sampler, transfer, preparer = built[rank]
        seeds = sampler.epoch_seeds(0)
        produce = preparer.producer(0, seeds)
        out = []
        for i in range(batches):
            batch = produce(i)
            wait(batch.ready)
            want = sampler.sample(seeds[i], 0, i)
            out.append((torch.equal(batch.x[0].cpu(), table[want.input_nodes]),
                        torch.equal(batch.labels.cpu(), labels[want.seeds]),
                        all(torch.equal(g.relations[0].indices.cpu(), w.relations[0].indices)
                            and torch.equal(g.relations[0].indptr.cpu(), w.relations[0].indptr)
                            for g, w in zip(batch.blocks, want.blocks, strict=True)),
                        batch.x[0].is_cuda and batch.blocks[0].relations[0].indices.is_cuda))
        torch.cuda.synchronize()
        return out, transfer.sends

    ranks = SimulatedRanks(2)
    built = ranks.run(build)  # the stores' set-up (the cache's fill, the device tier) before the profiler
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        results = ranks.run(run)
    copies = [e.name for e in prof.events() if "HtoD" in e.name]
    for rank, (checks, sends) in enumerate(results):
        assert sends == batches and all(all(c) for c in checks), (rank, checks)
    assert len(copies) == 2 * batches, copies
    assert all("Pinned" in name for name in copies), copies
