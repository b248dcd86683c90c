"""The pieces of sampled training, in one process: minibatches of the sampler over the replicated topology, the
models on a list of blocks, the rows a rank gathers (own, cached, fetched) for every cache policy and alpha, the
sampling thread, and the config's checks."""
import numpy as np
import pytest
import torch
from support.simulated_ranks import SimulatedRanks

from sylvie.config import resolve_runs
from sylvie.errors import SylvieError
from sylvie.features.cache_policy import POLICIES, cache_budget, local_order, select_cache
from sylvie.features.rank_features import RankFeatures
from sylvie.models.blocks import whole_graph_block
from sylvie.models.gnn import GNN
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.sampling.neighbor_sampler import (
    NeighborSampler,
    simulated_access_counts,
)
from sylvie.sampling.pipeline import SamplingPipeline
from sylvie.sampling.vip import iterations_per_epoch, vertex_inclusion_probability

PARTS = 4


def _part(cora_partitions, k):
    topo = read_topology(cora_partitions[PARTS])
    shard = read_shard(cora_partitions[PARTS], k)
    return topo, shard, topo.part_offsets[k] + np.flatnonzero(shard.train)


@pytest.mark.unit
def test_an_epoch_uses_every_training_vertex_once_in_the_same_number_of_batches(cora_partitions):
    counts = [int(_part(cora_partitions, k)[1].train.sum()) for k in range(PARTS)]
    iterations = iterations_per_epoch(counts, batch_size=8)
    assert iterations == -(-max(counts) // 8)
    topo, _, train = _part(cora_partitions, 2)
    sampler = NeighborSampler(topo.in_indptr, topo.in_src, [5, 5], train, iterations, 0, 2)
    batches = sampler.epoch_seeds(3)
    assert len(batches) == iterations and max(len(b) for b in batches) <= 8
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.sort(train))
    assert all(np.array_equal(a, b) for a, b in zip(batches, sampler.epoch_seeds(3)))  # seeded by epoch
    assert not all(np.array_equal(a, b) for a, b in zip(batches, sampler.epoch_seeds(4)))


@pytest.mark.unit
def test_with_self_loops_every_vertex_of_a_full_neighbourhood_block_has_itself_as_a_source_once(cora_partitions):
    """A model with self-loops samples each vertex's loop like any other in-edge: with a fanout above every degree,
    a destination's sources are its in-neighbours (with repeats, as the topology has them) plus itself once."""
    topo, _, train = _part(cora_partitions, 0)
    mb = NeighborSampler(topo.in_indptr, topo.in_src, [10_000], train, 1, 0, 0, self_loop=True).sample(train, 0, 0)
    (block,) = (b.relations[0] for b in mb.blocks)
    src_ids, dst_ids = block.src_ids[block.indices.long()].numpy(), block.dst_ids[block.dst_of_edges()].numpy()
    for v in train[:50]:
        expected = np.sort(np.append(topo.in_src[topo.in_indptr[v]:topo.in_indptr[v + 1]], v))
        np.testing.assert_array_equal(np.sort(src_ids[dst_ids == v]), expected)
    assert int(block.in_degree.sum()) == block.num_edges


@pytest.mark.unit
@pytest.mark.parametrize("arch", ["sage", "gcn"])
def test_a_model_on_full_neighbourhood_blocks_computes_what_it_does_on_the_whole_graph(cora_partitions, arch):
    """Blocks that sample every neighbour are the whole graph around the seeds: the same model (same weights) gives
    the seeds the same outputs on them as on one whole-graph block (float64)."""
    topo, shard, train = _part(cora_partitions, 1)
    feats = torch.randn(topo.num_nodes, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.manual_seed(0)
    model = GNN(arch, 12, 16, 7, layers=2, dropout=0.0).double().eval()
    sampler = NeighborSampler(topo.in_indptr, topo.in_src, [10_000, 10_000], train, 1, 0, 1)
    mb = sampler.sample(train, epoch=0, iteration=0)
    dst = np.repeat(np.arange(topo.num_nodes), np.diff(topo.in_indptr))
    whole = whole_graph_block(topo.in_src, dst, topo.num_nodes, self_loop=False)
    if arch == "gcn":  # sampled blocks normalise by their own degrees; with every neighbour, those are the global ones
        for b in (b.relations[0] for b in mb.blocks):
            b.out_degree = torch.from_numpy(np.bincount(topo.in_src, minlength=topo.num_nodes))[b.src_ids]
    with torch.no_grad():
        on_blocks = model(mb.blocks, feats[mb.input_nodes])
        on_whole = model(whole, feats)[torch.from_numpy(train)]
    torch.testing.assert_close(on_blocks, on_whole, rtol=1e-10, atol=1e-10)


def _global_table(part_dir):
    """Every vertex's row, in the partition's id space (part k's rows at its id range)."""
    return torch.cat([torch.tensor(read_shard(part_dir, k).feat) for k in range(PARTS)])


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
def test_the_rows_a_rank_gathers_are_the_global_tables_rows_bitwise(cora_partitions, policy):
    """For every policy and alpha: own rows, cached rows and rows fetched from their owners (fp32) together equal
    the global feature table's rows of the minibatch's input vertices; how many came from where adds up."""
    part_dir = cora_partitions[PARTS]
    table = _global_table(part_dir)
    topo = read_topology(part_dir)
    for alpha in (0.0, 0.05, 0.2, 1.0, 4.0):
        def rank_fn(rank, a2a, alpha=alpha):
            _, shard, train = _part(cora_partitions, rank)
            vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, train, 16, [5, 10])
            sampler = NeighborSampler(topo.in_indptr, topo.in_src, [10, 5], train, 3, 0, rank)
            counts = simulated_access_counts(sampler, 1, topo.num_nodes) if policy == "simulation" else None
            cached = select_cache(policy, rank, topo.part_offsets, cache_budget(alpha, topo.num_nodes, PARTS), vip=vip,
                                  access_counts=counts, in_indptr=topo.in_indptr, in_src=topo.in_src,
                                  train_nodes=train, seed=1)
            features = RankFeatures(rank, topo.part_offsets, shard.feat, local_order(vip, rank, topo.part_offsets),
                                    cached, a2a)
            out = []
            for i, seeds in enumerate(sampler.epoch_seeds(0)):
                mb = sampler.sample(seeds, 0, i)
                rows, where = features.gather(mb.input_nodes)
                out.append((mb.input_nodes, rows, where))
            return out

        for rank, batches in enumerate(SimulatedRanks(PARTS).run(rank_fn)):
            for ids, rows, where in batches:
                assert torch.equal(rows, table[ids]), (policy, alpha, rank)
                assert where.local + where.cached + where.remote == len(ids)
                assert where.local == int((torch.from_numpy(topo.owner(ids.numpy())) == rank).sum())
                if alpha == 0 or policy == "none":
                    assert where.cached == 0
                if alpha >= PARTS and policy in ("vip", "degree", "random"):
                    assert where.remote == 0, (policy, alpha)  # every remote vertex a minibatch can reach is cached


@pytest.mark.unit
def test_local_rows_are_stored_hottest_first(cora_partitions):
    topo, shard, train = _part(cora_partitions, 0)
    vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, train, 16, [5, 10])
    order = local_order(vip, 0, topo.part_offsets)

    def rank_fn(rank, a2a):
        return RankFeatures(0, topo.part_offsets[:2], shard.feat, order, np.zeros(0, np.int64), a2a)

    (features,) = SimulatedRanks(1).run(rank_fn)
    assert (np.diff(vip[order]) <= 0).all()
    assert torch.equal(features.table[0], torch.tensor(shard.feat[order[0] - topo.part_offsets[0]]))


@pytest.mark.unit
def test_the_sampling_thread_keeps_order_and_depth_and_reports_errors():
    pipeline = SamplingPipeline(depth=2, timeout=5)
    started = []

    def produce(i):
        started.append(i)
        return i * i

    seen = []
    for i, item in enumerate(pipeline.map(produce, 6)):
        seen.append(item)
        assert max(started) <= i + 2  # never more than `depth` ahead of the consumer
        if i == 0:
            __import__("time").sleep(0.3)  # while the consumer computes, the thread works ahead
            assert started == [0, 1, 2]
    assert seen == [i * i for i in range(6)]

    def failing(i):
        if i == 3:
            raise ValueError("minibatch 3 is broken")
        return i

    with pytest.raises(ValueError, match="minibatch 3 is broken"):
        list(pipeline.map(failing, 6))
    slow = SamplingPipeline(depth=0, timeout=0.2)
    with pytest.raises(SylvieError, match="delivered no minibatch 1 of 1 in 0 s"):
        list(slow.map(lambda i: __import__("time").sleep(1), 1))
    pipeline.close()
    slow.close()


@pytest.mark.slow
def test_vip_matches_dgls_sampler_on_a_synthetic_graph():
    """Monte Carlo: 2,000 minibatches of DGL's sampler per part on a synthetic power-law graph."""
    from scipy.stats import spearmanr
    from test_topology_and_vip import _measured_inclusion

    from sylvie.data.synthetic import generate
    from sylvie.partition.shard_format import Topology

    g = generate(nodes=4000, avg_degree=12, features=4, classes=4, homophily=0.8, feature_noise=1.0,
                 train_fraction=0.2, val_fraction=0.1, seed=0)
    order = np.argsort(g.dst, kind="stable")
    src, dst = g.src[order], g.dst[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=g.num_nodes))])
    topo = Topology(indptr, src, np.arange(g.num_nodes), np.array([0, 2000, g.num_nodes]))
    train_all = np.flatnonzero(g.train_mask)
    for part in (0, 1):  # part k's training vertices: those in its id range
        train = train_all[topo.owner(train_all) == part]
        measured = _measured_inclusion(topo, train, 64, [10, 5], batches=2000, seed=part)
        vip = vertex_inclusion_probability(indptr, src, train, 64, [5, 10])
        ignoring_fanouts = vertex_inclusion_probability(indptr, src, train, 64, [1, 1])
        touched = (measured > 0) | (vip > 0)
        mae = np.abs(vip - measured).mean()
        rho = spearmanr(vip[touched], measured[touched]).correlation
        # measured on this graph: MAE about 0.04 and rank correlation about 0.95; ignoring the fanouts is off by 0.45
        assert mae < 0.06 and rho > 0.9, (part, mae, rho)
        assert np.abs(ignoring_fanouts - measured).mean() > 5 * mae


def _config(**run):
    return {"datasets": {"cora": {"source": "planetoid"}}, "runs": {"r": run}}


@pytest.mark.parametrize("run, field", [
    ({"train": {"mode": "sampled"}, "sampling": {"fanouts": []}}, "sampling.fanouts"),
    ({"train": {"mode": "sampled"}, "sampling": {"fanouts": [10, 0]}}, "sampling.fanouts.1"),
    ({"train": {"mode": "sampled"}, "sampling": {"fanouts": [-5, 10]}}, "sampling.fanouts.0"),
    ({"train": {"mode": "sampled"}, "sampling": {"batch_size": 0}}, "sampling.batch_size"),
    ({"train": {"mode": "sampled"}, "cache": {"alpha": -0.1}}, "cache.alpha"),
    ({"train": {"mode": "sampled"}, "cache": {"policy": "lru"}}, "cache.policy"),
    ({"train": {"mode": "sampled"}, "sampling": {"remote_bits": 3}}, "sampling.remote_bits"),
])
@pytest.mark.unit
def test_bad_sampling_settings_name_their_field(run, field):
    with pytest.raises(SylvieError, match=f"'runs.r.{field}'"):
        resolve_runs(_config(**run))


@pytest.mark.unit
def test_fanouts_of_the_wrong_length_are_a_clear_error():
    with pytest.raises(SylvieError, match=r"runs.r: sampling.fanouts has 3 entries \[15, 10, 5\] but model.layers "
                                          r"is 2; give one fanout per layer"):
        resolve_runs(_config(train={"mode": "sampled"}, sampling={"fanouts": [15, 10, 5]}))
    with pytest.raises(SylvieError, match=r"runs.r.sampling: a setting of sampled training"):  # a full-graph run
        resolve_runs(_config(sampling={"fanouts": [15, 10, 5]}))  # does not sample: its own sampling is refused
