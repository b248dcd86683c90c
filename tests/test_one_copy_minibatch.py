"""A sampled minibatch reaches the training device in one copy (``sylvie.sampling.batch_transfer``): the layout of
its buffer, the blocks, labels and input rows unpacked from it against what the sampler built and the graph's own
rows (four ranks, own, cached and fetched rows), exactly one transfer a minibatch with everything the model takes a
view of it, typed blocks, the layout a GPU takes (rows the CPU gives placed after the copy, rows the device gathers
itself), and the ring of reused buffers. The count of host-to-device copies on a GPU is in
tests/test_gpu_one_copy.py."""
import numpy as np
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.features.batch_rows import BatchRows, gather_once
from sylvie.features.cache_policy import cache_budget, local_order, select_cache
from sylvie.features.features_by_type import FeaturesByType, TypeSpaces
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.sampling.batch_transfer import ALIGN, BatchTransfer, Layout
from sylvie.sampling.neighbor_sampler import NeighborSampler
from sylvie.sampling.packed_blocks import PackedBlocks
from sylvie.sampling.vip import vertex_inclusion_probability
from sylvie.train.sampled_batches import BatchPreparer

pytestmark = pytest.mark.unit
PARTS = 4


def test_a_layout_puts_each_array_on_a_64_byte_boundary_and_views_them_back():
    arrays = [torch.arange(7, dtype=torch.int64), torch.zeros(0, dtype=torch.int32), torch.randn(5, 3),
              torch.arange(3, dtype=torch.int32), torch.randn(2, 2).half(), torch.tensor([True, False])]
    layout = Layout()
    segments = [layout.add_like(a) for a in arrays]
    assert all(s.offset % ALIGN == 0 for s in layout.segments)
    assert layout.nbytes == layout.segments[-1].offset + 2
    buf = torch.full((layout.nbytes + 10,), 0xAB, dtype=torch.uint8)
    views = layout.views(buf)
    for seg, a in zip(segments, arrays, strict=True):
        views[seg].copy_(a)
    for seg, a in zip(segments, layout.views(buf.clone()), strict=True):
        assert torch.equal(a, arrays[seg]) and a.dtype == arrays[seg].dtype
    with pytest.raises(ValueError, match=f"a layout of {layout.nbytes} bytes"):
        layout.views(buf[:layout.nbytes - 1])


def test_the_ring_reuses_its_buffers_and_grows_one_to_the_largest_minibatch():
    transfer = BatchTransfer("cpu", 2)
    k0, a = transfer.host_buffer(1000)
    k1, b = transfer.host_buffer(3 << 20)  # larger than the first buffer: a buffer of its own size
    k2, c = transfer.host_buffer(500)  # the first again, not reallocated
    assert (k0, k1, k2) == (0, 1, 0) and c.data_ptr() == a.data_ptr() and b.numel() == 3 << 20
    _, d = transfer.host_buffer(2 << 20)  # the second, big enough already
    assert d.data_ptr() == b.data_ptr()
    _, e = transfer.host_buffer(4 << 20)  # the first grows (in 2 MiB steps)
    assert e.numel() == 4 << 20 and transfer.host_bytes == (4 << 20) + (4 << 20)
    assert transfer.send(0, e) is e and transfer.sends == 1  # the CPU's "copy" is the buffer itself


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _block_arrays(block) -> list[torch.Tensor]:
    out = []
    for b in block.relations:
        out += [b.indptr, b.indices, b.in_degree, b.out_degree, b.src_ids, b.dst_ids]
        out += [b._transpose.indptr, b._transpose.dst, b._transpose.edge]
    out += list(block.src_ids)
    return out


def _same_blocks(got: list, want: list) -> bool:
    """Every array of every block equal (values, dtype, shape), and the block's sizes."""
    for g, w in zip(got, want, strict=True):
        if type(g) is not type(w) or g.num_src != w.num_src or g.num_dst != w.num_dst:
            return False
        if not all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(_block_arrays(g), _block_arrays(w),
                                                                             strict=True)):
            return False
    return True


@pytest.mark.parametrize("alpha", [0.0, 0.02])
def test_four_ranks_minibatches_unpacked_from_one_buffer_are_the_samplers_and_the_graphs_rows(cora_partitions,
                                                                                             alpha):
    """Each rank's minibatches made ready through the one buffer: the blocks equal the ones the sampler builds again
    for the same (epoch, minibatch), the labels are the seeds', the input rows are the global table's rows of the
    input vertices bitwise (own, cached, fetched in fp32), there is exactly one transfer a minibatch, and every
    tensor the model takes views the one buffer sent."""
    part_dir = cora_partitions[PARTS]
    topo = read_topology(part_dir)
    shards = [read_shard(part_dir, k) for k in range(PARTS)]
    table = torch.cat([torch.tensor(s.feat) for s in shards])
    labels = torch.cat([torch.tensor(s.label) for s in shards])
    offsets = np.asarray(topo.part_offsets, np.int64)
    spaces = TypeSpaces(offsets, np.diff(offsets)[:, None])

    def rank_fn(rank, a2a):
        shard = shards[rank]
        train = offsets[rank] + np.flatnonzero(shard.train)
        vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, train, 16, [5, 10])
        cached = select_cache("vip", rank, offsets, cache_budget(alpha, topo.num_nodes, PARTS), vip=vip)
        features = FeaturesByType(rank, spaces, [shard.feat], [local_order(vip, rank, offsets)], [cached], a2a)
        sampler = NeighborSampler(topo.in_indptr, topo.in_src, [10, 5], train, 4, 0, rank)
        transfer = BatchTransfer("cpu", 3)
        preparer = BatchPreparer(sampler, features, torch.tensor(shard.label), int(offsets[rank]), transfer)
        seeds = sampler.epoch_seeds(1)
        produce = preparer.producer(1, seeds)
        checks = []
        for i in range(len(seeds)):
            batch = produce(i)  # compared now: the ring's buffer is written again three batches on
            want = sampler.sample(seeds[i], 1, i)
            sent = {_storage(t) for t in [batch.labels, *batch.x] + [a for b in batch.blocks for a in _block_arrays(b)]}
            checks.append((_same_blocks(batch.blocks, want.blocks), torch.equal(batch.seeds, want.seeds),
                           torch.equal(batch.labels, labels[want.seeds]),
                           torch.equal(batch.x[0], table[want.input_nodes]), len(sent), transfer.sends == i + 1))
        return checks, features.stores[0].rows

    for rank, (checks, rows) in enumerate(SimulatedRanks(PARTS).run(rank_fn)):
        assert checks and all(c == (True, True, True, True, 1, True) for c in checks), (rank, checks)
        assert rows.remote > 0 and (rows.cached > 0) == (alpha > 0), (rank, rows)


def test_typed_blocks_unpack_to_the_same_blocks_with_shared_arrays_laid_out_once(small_mag_partitions):
    topo = read_topology(small_mag_partitions[2])
    train = topo.part_offsets[0] + np.flatnonzero(read_shard(small_mag_partitions[2], 0).train)
    sampler = NeighborSampler(topo.in_indptr, topo.in_src, [3, 2], train, 2, 0, 0, types=topo.types,
                              in_relation=topo.in_relation)
    mb = sampler.sample(sampler.epoch_seeds(0)[0], 0, 0)
    layout = Layout()
    packed = PackedBlocks(mb.blocks, layout)
    everything = [a for b in mb.blocks for a in _block_arrays(b)]
    assert len(packed.arrays) < len(everything)  # a relation's sources are its source type's: laid out once
    buf = torch.empty(layout.nbytes, dtype=torch.uint8)
    packed.write(layout.views(buf))
    got = packed.unpack(layout.views(buf.clone()))
    assert _same_blocks(got, mb.blocks)
    assert all(b._cache == {} for t in got for b in t.relations)


def test_the_layout_a_gpu_takes_places_the_cpus_rows_and_the_devices_rows_after_the_copy(monkeypatch):
    """On a GPU some rows come from the CPU (fetched ones; the host tier when not read zero-copy), written back to
    back with their places, and the others are gathered by the device: here the store's device tier is played by
    its own first rows on the CPU, so the arrangement is checked without a GPU."""
    rows = torch.randn(300, 16, generator=torch.Generator().manual_seed(0))

    def rank_fn(rank, a2a):
        offsets = np.array([0, 150, 300])
        lo = offsets[rank]
        features = FeaturesByType(rank, TypeSpaces(offsets, np.diff(offsets)[:, None]), [rows[lo:lo + 150].numpy()],
                                     [lo + np.arange(150)[::-1]], [np.arange(150 - lo, 170 - lo)], a2a).stores[0]
        store = features.tiers
        store.device_rows = store.table[:60]  # the first 60 table rows play the device tier
        monkeypatch.setattr(store, "served_by", lambda slots: (slots >= 60, slots < 60, torch.zeros_like(slots,
                                                                                                        dtype=bool)))
        ids = torch.from_numpy(np.random.default_rng(rank).integers(0, 300, 400))
        pending = features.fetch(ids, key=(0, 0))
        layout = Layout()
        batch_rows = BatchRows(features, pending, layout)
        buf = torch.empty(layout.nbytes, dtype=torch.uint8)
        batch_rows.write(layout.views(buf))
        x = batch_rows.finish(layout.views(buf.clone()))
        return (not batch_rows.in_place, batch_rows.resident[0].numel() > 0, pending.fetched.shape[0] > 0,
                torch.equal(x, rows[ids]), torch.equal(gather_once(features, features.fetch(ids)), rows[ids]))

    for rank, result in enumerate(SimulatedRanks(2).run(rank_fn)):
        assert result == (True, True, True, True, True), (rank, result)
