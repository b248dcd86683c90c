"""The sampler's draws: the kernel against its plain-Python specification, each neighbour's inclusion frequency
against min(1, fanout / degree) (Monte Carlo), the same minibatches on any number of threads, and blocks shaped as
the models take them."""
import hashlib
import threading

import numba
import numpy as np
import pytest
import torch

from sylvie.sampling import neighbor_picks
from sylvie.sampling.neighbor_picks import hop_key, pick_neighbors, reference_picks
from sylvie.sampling.neighbor_sampler import NeighborSampler


def _random_csc(n: int, avg_degree: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """In-edges by destination of a random multigraph with skewed in-degrees (some 0, some far above any fanout);
    sources sorted per destination, as the topology stores them."""
    rng = np.random.default_rng(seed)
    deg = np.minimum(rng.pareto(1.5, n) * avg_degree / 3, 40 * avg_degree).astype(np.int64)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(deg, out=indptr[1:])
    src = rng.integers(0, n, int(indptr[-1]))
    for v in range(n):  # sorted per destination
        src[indptr[v]:indptr[v + 1]].sort()
    return indptr, src.astype(np.int32)


@pytest.mark.parametrize("self_loop", [False, True])
@pytest.mark.parametrize("fanout", [1, 3, 10, 40])
@pytest.mark.unit
def test_the_kernel_draws_what_its_python_specification_draws(fanout, self_loop):
    indptr, src = _random_csc(3000, 12, seed=fanout)
    frontier = np.random.default_rng(1).permutation(3000)[:2500]
    key = hop_key(0xDEADBEEF12345, 2)
    offsets, picked = pick_neighbors(indptr, src, frontier, fanout, key, self_loop)
    for i in range(0, len(frontier), 7):
        v = int(frontier[i])
        assert picked[offsets[i]:offsets[i + 1]].tolist() == reference_picks(indptr, src, v, fanout, key, self_loop)


@pytest.mark.unit
def test_a_vertex_draws_min_fanout_degree_distinct_positions_all_when_fanout_reaches_the_degree():
    indptr, src = _random_csc(2000, 15, seed=3)
    positions = np.arange(src.shape[0], dtype=np.int32)  # "sources" that name their own in-edge: distinctness shows
    for fanout in (1, 5, 25):
        offsets, picked = pick_neighbors(indptr, positions, np.arange(2000), fanout, hop_key(7, 0))
        for v in range(2000):
            got, d = picked[offsets[v]:offsets[v + 1]], indptr[v + 1] - indptr[v]
            assert len(got) == min(fanout, d) and len(np.unique(got)) == len(got)
            assert np.all((got >= indptr[v]) & (got < indptr[v + 1]))
            if fanout >= d:
                np.testing.assert_array_equal(got, np.arange(indptr[v], indptr[v + 1]))


@pytest.mark.parametrize("degree,fanout", [(20, 5), (7, 6), (300, 15)])
@pytest.mark.slow
def test_each_neighbour_is_included_with_probability_fanout_over_degree_and_pairs_as_a_uniform_subset(degree, fanout):
    """Over 20,000 independent keys: each in-edge's inclusion frequency is f / d within 5 standard errors, and
    the frequency of the pair (first, last) is f (f - 1) / (d (d - 1)), as for a uniform f-subset."""
    indptr = np.array([0, degree], np.int64)
    positions = np.arange(degree, dtype=np.int64)
    draws = 20_000
    hits, pair = np.zeros(degree), 0
    for k in range(draws):
        _, picked = pick_neighbors(indptr, positions, np.array([0]), fanout, hop_key(k, 0))
        hits[picked] += 1
        pair += int(0 in picked and degree - 1 in picked)
    p = fanout / degree
    np.testing.assert_allclose(hits / draws, p, atol=5 * np.sqrt(p * (1 - p) / draws))
    q = fanout * (fanout - 1) / (degree * (degree - 1))
    assert abs(pair / draws - q) <= 5 * np.sqrt(q * (1 - q) / draws) + 1e-9
    # and the draws of different keys are not the same subsets
    assert hits.min() > 0


@pytest.mark.unit
def test_the_serial_and_the_parallel_kernel_give_the_same_bits_at_every_thread_count():
    indptr, src = _random_csc(20_000, 10, seed=5)
    frontier = np.random.default_rng(2).permutation(20_000)[:12_000].astype(np.int64)
    assert frontier.shape[0] >= neighbor_picks.PARALLEL_MIN_FRONTIER
    key = hop_key(99, 1)
    offsets, _ = pick_neighbors(indptr, src, frontier, 10, key)
    serial = np.empty(int(offsets[-1]), np.int64)
    neighbor_picks._pick_serial(indptr, 1, 0, src, frontier, offsets, 0, key, neighbor_picks._NONE, serial, 10)
    before = numba.get_num_threads()
    try:
        for threads in range(1, numba.config.NUMBA_NUM_THREADS + 1):
            numba.set_num_threads(threads)
            parallel = np.empty_like(serial)
            neighbor_picks._pick_parallel(indptr, 1, 0, src, frontier, offsets, 0, key, neighbor_picks._NONE, parallel,
                                          10)
            np.testing.assert_array_equal(parallel, serial)
    finally:
        numba.set_num_threads(before)


def _sampler(indptr, src, train, fanouts=(5, 10, 15), self_loop=False, rank=0):
    return NeighborSampler(indptr, src, list(fanouts), train, 8, seed=3, rank=rank, self_loop=self_loop)


def _relations(mb) -> list:
    """A homogeneous minibatch's blocks: the one relation of each."""
    return [b.relations[0] for b in mb.blocks]


def _digest(mb) -> str:
    h = hashlib.sha256(mb.seeds.numpy().tobytes())
    for b in _relations(mb):
        for t in (b.src_ids, b.dst_ids, b.indptr, b.indices, b.out_degree, b.in_degree):
            h.update(t.numpy().tobytes())
    return h.hexdigest()


@pytest.mark.unit
def test_a_minibatch_is_a_function_of_its_seed_epoch_rank_and_index_not_of_the_order_or_the_thread():
    indptr, src = _random_csc(5000, 12, seed=8)
    train = np.arange(0, 5000, 3)
    sampler = _sampler(indptr, src, train)
    batches = sampler.epoch_seeds(1)
    forward = [_digest(sampler.sample(s, 1, i)) for i, s in enumerate(batches)]
    backward = [_digest(sampler.sample(s, 1, i)) for i, s in reversed(list(enumerate(batches)))][::-1]
    assert forward == backward and len(set(forward)) == len(forward)
    threads = [None, None]

    def in_a_thread(j):
        threads[j] = [_digest(sampler.sample(s, 1, i)) for i, s in enumerate(batches)]

    workers = [threading.Thread(target=in_a_thread, args=(j,)) for j in range(2)]  # two at once, one scratch each
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert threads == [forward, forward]
    assert _digest(sampler.sample(batches[0], 2, 0)) != forward[0]  # another epoch draws anew
    assert _digest(_sampler(indptr, src, train, rank=1).sample(batches[0], 1, 0)) != forward[0]


@pytest.mark.parametrize("self_loop", [False, True])
@pytest.mark.unit
def test_blocks_are_shaped_as_the_models_take_them(self_loop):
    indptr, src = _random_csc(4000, 12, seed=9)
    train = np.random.default_rng(0).permutation(4000)[:600]
    mb = _sampler(indptr, src, train, self_loop=self_loop).sample(train[:100], 0, 0)
    blocks = _relations(mb)
    assert torch.equal(blocks[-1].dst_ids, mb.seeds)  # the last block's destinations: the seeds, in order
    assert torch.equal(mb.input_nodes, blocks[0].src_ids)
    for inner, outer in zip(blocks[1:], blocks[:-1]):
        assert torch.equal(outer.dst_ids, inner.src_ids)  # block i's destinations feed block i+1
    for b in blocks:
        ids = b.src_ids.numpy()
        assert b.idtype == torch.int32 and len(np.unique(ids)) == len(ids)
        assert torch.equal(b.src_ids[:b.num_dst], b.dst_ids)  # destinations first
        assert torch.equal(b.out_degree, torch.bincount(b.indices.long(), minlength=b.num_src))
        assert torch.equal(b.in_degree, b.local_in_degree())
        t = b._transpose  # the out-edges, built in the sampling thread
        assert t is not None and torch.equal(t.indptr[1:] - t.indptr[:-1], b.out_degree)
        u, v = b.indices.long(), b.dst_of_edges()
        gu, gv = ids[u.numpy()], b.dst_ids.numpy()[v.numpy()]
        for a, c in list(zip(gu, gv))[::37]:  # every edge is an in-edge of the topology (or a loop)
            assert (self_loop and a == c) or a in src[indptr[c]:indptr[c + 1]]


@pytest.mark.unit
def test_an_empty_minibatch_gives_empty_blocks():
    indptr, src = _random_csc(100, 5, seed=1)
    mb = _sampler(indptr, src, np.arange(10)).sample(np.array([], np.int64), 0, 0)
    assert [b.num_src for b in _relations(mb)] == [0, 0, 0] and mb.input_nodes.shape == (0,)


@pytest.mark.unit
def test_a_fanout_below_one_is_refused():
    with pytest.raises(ValueError, match="fanouts"):
        _sampler(np.array([0]), np.array([], np.int32), np.array([], np.int64), fanouts=(5, 0))
