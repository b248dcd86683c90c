"""Sampled link prediction (``train.task`` link, ``train.mode`` sampled): edge minibatches (a rank's training pairs
shuffled into batches, their negatives drawn as full-graph training draws them, their ends the seeds), sampled without
the batch's own edges and their reverses (what DGL's sample_neighbors draws with exclude_edges); the first steps on 1
and 2 ranks against single-process DGL in float64; the VIP of edge minibatches against a Monte Carlo of the sampler
itself; the cache changing only where rows come from; `sylvie train --task link --mode sampled` on 1 and 2 ranks
without DGL, its loss falling and its validation MRR above chance."""
import json

import dgl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr
from support.commands import REPO, ranks, refused_line
from support.no_dgl import NoDGL
from test_link_exactness import LinkReference, _assert_same

from sylvie.atomic import read_jsonl
from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TRAIN, read_link_pairs
from sylvie.formats.partition_manifest import read_manifest
from sylvie.formats.vip_file import minibatch_seeds, read_vip
from sylvie.models.state_dict_adapter import one_relation_keys
from sylvie.partition.shard_reader import read_topology
from sylvie.sampling.edge_batches import EdgeBatches
from sylvie.sampling.edge_seeds import EdgeSeeds, edge_seed_probability, edge_seeds
from sylvie.sampling.excluded_edges import pair_edges
from sylvie.sampling.negatives import joint_negatives, local_negatives, negatives_key, uniform_negatives
from sylvie.sampling.neighbor_picks import hop_key, pick_neighbors, reference_picks
from sylvie.sampling.neighbor_sampler import NeighborSampler
from sylvie.sampling.vip import edge_destinations, iterations_per_epoch, vertex_inclusion_probability
from sylvie.sampling.vip_stage import write_vip

SAMPLED_LINK = ["--task", "link", "--mode", "sampled", "--arch", "sage", "--no-self-loop", "--fanouts", "10", "10",
                "--log-every", "1", "--seed", "0", "--no-progress"]


def _training_pairs(part_dir):
    """The partition's topology, and its training pairs: their numbers, sources and destinations in partition ids."""
    manifest = read_manifest(part_dir)
    topo = read_topology(part_dir, manifest)
    pairs = read_link_pairs(part_dir, topo.num_nodes, manifest["link_pairs"])
    new_of = np.empty(topo.num_nodes, np.int64)
    new_of[topo.original_id] = np.arange(topo.num_nodes)
    number = np.flatnonzero(pairs.split == TRAIN)
    return topo, number, new_of[pairs.src[number]], new_of[pairs.dst[number]], new_of


def _edge_batches(part_dir, part, batch_size, negatives=1):
    """Part ``part``'s edge batches (uniform negatives, seed 0) and its sampler's topology, as the trainer makes
    them, with the negatives drawn here from the hashes of ``sylvie.sampling.negatives``."""
    topo, number, src, dst, new_of = _training_pairs(part_dir)
    owner = topo.owner(src)
    mine = owner == part
    iterations = iterations_per_epoch(np.bincount(owner), batch_size)

    def draw(numbers, dst_type, epoch, batch):
        return new_of[uniform_negatives(negatives_key(0, epoch), numbers, negatives, 0, topo.num_nodes)]

    zeros = np.zeros(int(mine.sum()), np.int64)
    return topo, EdgeBatches(number[mine], src[mine], dst[mine], None, zeros, zeros, 1, iterations, 0, part, draw)


def _block_edges(blocks) -> set:
    """Every (source, destination) the blocks drew, in partition ids."""
    out = set()
    for block in blocks:
        b = block.relations[0]
        src = b.src_ids[b.indices.long()].numpy()
        dst = np.repeat(b.dst_ids.numpy(), np.diff(b.indptr.numpy()))
        out |= set(zip(src.tolist(), dst.tolist()))
    return out


def _both_ways(src, dst) -> set:
    return set(zip(np.asarray(src).tolist(), np.asarray(dst).tolist())) | \
        set(zip(np.asarray(dst).tolist(), np.asarray(src).tolist()))


# ---- the draws: exclusion before the draw --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("self_loop", [False, True])
def test_excluded_edges_leave_the_candidates_and_the_rest_is_drawn_uniformly(cora_link_partitions, self_loop):
    """The kernel with edges excluded draws what its plain-Python specification draws; with none excluded, the same
    bits as without the argument; a vertex with x of its d in-edges excluded draws each of the others with
    probability f / (d - x) (20,000 keys, within 5 standard errors) and never an excluded one."""
    topo = read_topology(cora_link_partitions[1])
    indptr, src = topo.in_indptr, topo.in_src
    rng = np.random.default_rng(0)
    excluded = np.unique(rng.choice(src.shape[0], 600, replace=False))
    frontier = rng.permutation(topo.num_nodes)[:1500]
    key = hop_key(0xC0FFEE, 1)
    for fanout in (1, 3, 200):
        offsets, picked = pick_neighbors(indptr, src, frontier, fanout, key, self_loop, excluded=excluded)
        for i in range(0, len(frontier), 5):
            v = int(frontier[i])
            assert picked[offsets[i]:offsets[i + 1]].tolist() == \
                reference_picks(indptr, src, v, fanout, key, self_loop, excluded), (fanout, v)
        plain = pick_neighbors(indptr, src, frontier, fanout, key, self_loop)
        none = pick_neighbors(indptr, src, frontier, fanout, key, self_loop, excluded=np.zeros(0, np.int64))
        assert all(np.array_equal(a, b) for a, b in zip(plain, none))
    degree = np.diff(indptr)
    v = int(np.flatnonzero(degree >= 20)[0])
    first, d = int(indptr[v]), int(degree[v])
    gone = np.array([first + 1, first + 4, first + d - 1])
    positions = np.arange(src.shape[0], dtype=np.int64)  # "sources" that name their own in-edge
    hits, draws, fanout = np.zeros(d), 20_000, 5
    for k in range(draws):
        _, got = pick_neighbors(indptr, positions, np.array([v]), fanout, hop_key(k, 0), excluded=gone)
        assert len(got) == fanout
        hits[got - first] += 1
    p = fanout / (d - len(gone))
    kept = np.setdiff1d(np.arange(d), gone - first)
    assert hits[gone - first].sum() == 0
    np.testing.assert_allclose(hits[kept] / draws, p, atol=5 * np.sqrt(p * (1 - p) / draws))


@pytest.mark.unit
def test_with_every_neighbour_a_hop_draws_what_dgls_sample_neighbors_draws_with_the_pairs_edges_excluded(
        cora_link_partitions):
    """A batch's seeds, fanout above every degree: the edges our first hop draws are those of DGL's
    sample_neighbors(exclude_edges=...) over the same graph, the pairs' edges both ways found by DGL's edge_ids."""
    topo, batches = _edge_batches(cora_link_partitions[2], 0, 64)
    dst = edge_destinations(topo.in_indptr)
    g = dgl.graph((torch.from_numpy(topo.in_src.astype(np.int64)), torch.from_numpy(dst)), num_nodes=topo.num_nodes)
    sampler = NeighborSampler(topo.in_indptr, topo.in_src, [1000], np.zeros(0, np.int64), batches.iterations, 0, 0)
    for i in (0, 5):
        b = batches.epoch(3)[i]
        u, v = torch.from_numpy(np.concatenate([b.src, b.dst])), torch.from_numpy(np.concatenate([b.dst, b.src]))
        eids = g.edge_ids(u, v)  # every pair is a training edge, stored both ways
        sub = dgl.sampling.sample_neighbors(g, torch.from_numpy(b.seeds[0]), -1, exclude_edges=eids)
        theirs = set(zip(*(t.tolist() for t in sub.edges())))
        ours = _block_edges(sampler.sample(b.seeds, 3, i, exclude_pairs=b.exclude_pairs).blocks)
        assert ours == theirs and not ours & _both_ways(b.src, b.dst)
        np.testing.assert_array_equal(np.sort(pair_edges(topo.in_indptr, topo.in_src, b.src, b.dst)),
                                      np.sort(eids.numpy()))


@pytest.mark.unit
def test_an_epochs_edge_batches_hold_each_training_pair_once_with_their_negatives_as_rows_of_their_seeds(
        cora_link_partitions):
    """Every training pair of the part in exactly one batch an epoch, the same number of batches on every part,
    shuffled afresh each epoch; a batch's negatives are its pairs' hashes (the full-graph epoch's), its seeds the
    distinct ends and negatives, and its rows of the seeds name them; a joint batch's negatives are the batch's."""
    part_dir = cora_link_partitions[2]
    topo, batches = _edge_batches(part_dir, 1, 100, negatives=3)
    epoch = batches.epoch(2)
    assert len(epoch) == batches.iterations == _edge_batches(part_dir, 0, 100)[1].iterations
    numbers = np.concatenate([epoch[i].number for i in range(len(epoch))])
    assert sorted(numbers.tolist()) == sorted(batches.number.tolist())
    assert not np.array_equal(epoch.positions[0], batches.epoch(3).positions[0])
    _, _, _, _, new_of = _training_pairs(part_dir)
    for i in (0, len(epoch) - 1):
        b = epoch[i]
        np.testing.assert_array_equal(b.negatives, new_of[uniform_negatives(negatives_key(0, 2), b.number, 3, 0,
                                                                             topo.num_nodes)])
        seeds = b.seeds[0]
        assert (np.diff(seeds) > 0).all()
        assert set(seeds.tolist()) == set(np.concatenate([b.src, b.dst, b.negatives.ravel()]).tolist())
        np.testing.assert_array_equal(seeds[b.src_at], b.src)
        np.testing.assert_array_equal(seeds[b.dst_at], b.dst)
        np.testing.assert_array_equal(seeds[b.neg_at], b.negatives)
        again = batches.epoch(2)[i]
        assert np.array_equal(again.number, b.number) and np.array_equal(again.negatives, b.negatives)
    joint = EdgeBatches(batches.number, batches.src, batches.dst, None, batches.src_type, batches.dst_type, 1,
                        batches.iterations, 0, 1,
                        lambda n, t, e, i: joint_negatives(negatives_key(0, e, i, 1), 4, 0, topo.num_nodes))
    b = joint.epoch(0)[3]
    assert b.negatives.shape == (4,) and b.neg_at.shape == (4,)
    np.testing.assert_array_equal(b.seeds[0][b.neg_at], joint_negatives(negatives_key(0, 0, 3, 1), 4, 0,
                                                                         topo.num_nodes))


@pytest.mark.unit
def test_a_batchs_blocks_hold_none_of_its_pairs_edges_in_either_direction(cora_link_partitions):
    """Every batch of an epoch of either part, two hops of fanout 5: no block holds a pair's edge or its reverse;
    sampled without exclusion, the same seeds' blocks hold many (the check can fail)."""
    part_dir = cora_link_partitions[2]
    leaked = 0
    for part in (0, 1):
        topo, batches = _edge_batches(part_dir, part, 64)
        sampler = NeighborSampler(topo.in_indptr, topo.in_src, [5, 5], np.zeros(0, np.int64), batches.iterations, 0,
                                  part)
        for i, b in enumerate(batches.epoch(1)):
            pairs = _both_ways(b.src, b.dst)
            assert not _block_edges(sampler.sample(b.seeds, 1, i, exclude_pairs=b.exclude_pairs).blocks) & pairs
            leaked += len(_block_edges(sampler.sample(b.seeds, 1, i).blocks) & pairs)
    assert leaked > 1000


# ---- the VIP of edge minibatches ------------------------------------------------------------------------------------

def _random_graph(n=4000, avg_degree=6, seed=0):
    """An undirected random graph (both directions stored, by destination then source): locally tree-like, where the
    VIP recurrence's independence holds; each edge once as a training pair of the part owning its smaller end."""
    rng = np.random.default_rng(seed)
    m = n * avg_degree // 2
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    key = np.unique(np.minimum(u, v)[u != v] * n + np.maximum(u, v)[u != v])
    u, v = key // n, key % n
    src, dst = np.concatenate([u, v]), np.concatenate([v, u])
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[order].astype(np.int64), u, v


def _measured(sampler, batches, epochs):
    """The share of batches in which each vertex is an input, and in which it is a seed; the number of batches."""
    inputs, seeds, count = np.zeros(sampler.indptr.shape[0] - 1), np.zeros(sampler.indptr.shape[0] - 1), 0
    for e in range(epochs):
        for i, b in enumerate(batches.epoch(e)):
            mb = sampler.sample(b.seeds, e, i, exclude_pairs=b.exclude_pairs)
            inputs[mb.input_nodes.numpy()] += 1
            seeds[mb.seeds.numpy()] += 1
            count += 1
    return inputs / count, seeds / count, count


def _errors(estimate, measured, count):
    """(mean error in mean standard errors, share within 3 standard errors) of ``estimate`` against frequencies
    ``measured`` over ``count`` batches."""
    stderr = np.sqrt(np.maximum(measured * (1 - measured), 1 / count) / count)
    error = np.abs(estimate - measured)
    return error.mean() / stderr.mean(), (error <= 3 * stderr).mean()


@pytest.mark.slow
@pytest.mark.parametrize(("fanouts", "batch", "epochs"), [([10, 5], 16, 10), ([3, 2], 16, 10), ([5, 3], 64, 30)])
def test_the_vip_of_edge_minibatches_is_the_samplers_inclusion_frequency_within_the_monte_carlos_error(
        fanouts, batch, epochs):
    """On a locally tree-like graph, about 2,800 batches of the sampler itself (pairs and uniform negatives, the
    pairs' edges excluded): each vertex's share of batches it is a seed of against ``edge_seed_probability``, and of
    batches it is an input of against its VIP, each within the Monte Carlo's error (mean error at most 1.5 standard
    errors, 95% of the vertices within 3), the expected inputs per batch within 2%. Measured: seeds 0.5 standard
    errors; VIP 0.6 / 0.6 / 0.7. Dropping either correction of the recurrence (a pair's ends seeds together; a pair
    end drawing from one candidate fewer) costs 1.5 to 3.6 standard errors in at least one regime, which the test
    tells apart."""
    indptr, in_src, u, v = _random_graph()
    n = indptr.shape[0] - 1
    mine = u < n // 2
    src, dst = u[mine], v[mine]
    iterations = max(1, len(src) // batch)
    draw = lambda numbers, t, e, i: uniform_negatives(negatives_key(0, e), numbers, 1, 0, n)  # noqa: E731
    zeros = np.zeros(len(src), np.int64)
    batches = EdgeBatches(np.arange(len(src)), src, dst, None, zeros, zeros, 1, iterations, 0, 0, draw)
    sampler = NeighborSampler(indptr, in_src, fanouts, np.zeros(0, np.int64), iterations, 0, 0)
    inputs, seeds, count = _measured(sampler, batches, epochs)
    per_batch = len(src) / iterations
    analysis = edge_seeds(indptr, in_src, src, dst, None, zeros, per_batch, 1, "uniform", [np.arange(n)])
    mean, within = _errors(analysis.probability, seeds, count)
    assert mean <= 1.0 and within >= 0.97, (mean, within)
    vip = vertex_inclusion_probability(indptr, in_src, None, None, fanouts[::-1], edge_seeds=analysis)
    mean, within = _errors(vip, inputs, count)
    assert mean <= 1.5 and within >= 0.95, (mean, within)
    assert abs(vip.sum() / inputs.sum() - 1) < 0.02
    cruder = [EdgeSeeds(analysis.probability, np.zeros(0, np.float32), analysis.excluded),
              EdgeSeeds(analysis.probability, analysis.together, np.zeros(0))]
    worst = max(_errors(vertex_inclusion_probability(indptr, in_src, None, None, fanouts[::-1], edge_seeds=c),
                        inputs, count)[0] for c in cruder)
    assert worst > 1.5 * _errors(vip, inputs, count)[0]


@pytest.mark.slow
def test_the_vip_stage_serves_a_link_run_and_ranks_vertices_as_the_sampler_draws_them(cora_link_partitions, tmp_path):
    """`sylvie vip --task link`'s arrays are the analysis of each part's edge batches (local negatives here: the part's
    own nodes). On Cora, whose dense clusters the recurrence's independence overestimates, they rank vertices as a
    Monte Carlo of the sampler does (rank correlation above 0.9; measured 0.99 on both parts, mean error 0.03, 2.3
    standard errors, expected inputs 8% high) and far closer than the node batches' analysis of the same partition,
    which knows no pairs (mean error 0.20). The manifest records the minibatches; a run of other negatives, or a
    node-classification run, refuses it."""
    part_dir = cora_link_partitions[2]
    link = section("link", {"negatives": 2, "negative_sampler": "local"})
    sampling = section("sampling", {"fanouts": [10, 5], "batch_size": 32})
    out = write_vip(part_dir, tmp_path / "vip", sampling, progress=False, link=link)
    assert out["seeds"] == {"task": "link", "negatives": 2, "negative_sampler": "local"}
    node = write_vip(part_dir, tmp_path / "node-vip", sampling, progress=False)
    manifest = read_manifest(part_dir)
    topo, number, src, dst, new_of = _training_pairs(part_dir)
    for part in (0, 1):
        vip = read_vip(tmp_path / "vip", part, manifest["checksum"], [10, 5], 32, minibatch_seeds("link", link))
        mine = topo.owner(src) == part
        iterations = iterations_per_epoch(np.bincount(topo.owner(src)), 32)
        own = np.arange(topo.part_offsets[part], topo.part_offsets[part + 1])
        p0 = edge_seed_probability(topo.num_nodes, src[mine], dst[mine], np.zeros(mine.sum()), mine.sum() / iterations,
                                   2, "local", [own])
        assert np.abs(p0[np.setdiff1d(np.arange(topo.num_nodes), np.concatenate([own, dst[mine]]))]).max() == 0

        def draw(numbers, t, e, i, own=own, part=part):
            return local_negatives(negatives_key(0, e, rank=part), numbers, 2, own)

        zeros = np.zeros(int(mine.sum()), np.int64)
        batches = EdgeBatches(number[mine], src[mine], dst[mine], None, zeros, zeros, 1, iterations, 0, part, draw)
        sampler = NeighborSampler(topo.in_indptr, topo.in_src, [10, 5], np.zeros(0, np.int64), iterations, 0, part)
        inputs, _, count = _measured(sampler, batches, 8)
        touched = (inputs > 0) | (vip > 0)
        assert spearmanr(vip[touched], inputs[touched]).correlation > 0.9
        node_vip = read_vip(tmp_path / "node-vip", part, manifest["checksum"], [10, 5], 32)
        assert np.abs(node_vip - inputs).mean() > 3 * np.abs(vip - inputs).mean()
    other = minibatch_seeds("link", section("link", {"negatives": 1}))
    with pytest.raises(SylvieError, match="link.negatives 2, link.negative_sampler local.*--task link --negatives 1 "
                                          "--negative-sampler uniform"):
        read_vip(tmp_path / "vip", 0, manifest["checksum"], [10, 5], 32, other)
    with pytest.raises(SylvieError, match="for the minibatches of link prediction .* not of node classification"):
        read_vip(tmp_path / "vip", 0, manifest["checksum"], [10, 5], 32)
    assert node["seeds"] == {"task": "node"}


@pytest.mark.unit
def test_link_settings_the_sampled_path_would_ignore_are_refused(cora_link_partitions, tmp_path, capsys):
    line = refused_line(["vip", str(cora_link_partitions[2]), "--out", str(tmp_path / "v"), "--negatives", "3"],
                        capsys)
    assert "--negatives" in line and "add --task link" in line
    line = refused_line(["train", "--partition", str(cora_link_partitions[2]), "--out", str(tmp_path / "r"),
                         *SAMPLED_LINK, "--pair-bits", "1"], capsys)
    assert "link.pair_bits 1" in line and "set link.pair_bits to 32" in line
    assert not (tmp_path / "v").exists() and not (tmp_path / "r").exists()


# ---- training --------------------------------------------------------------------------------------------------------

FANOUT_ALL = "200-200"  # above Cora's largest degree: every neighbour but the excluded edges
# arch:decoder:loss:sampler:negatives (no MLP decoder under the contrastive loss: tests/test_link_exactness.py says why)
STEP_CASES = {1: ["sage:dot:bce:uniform:2"],
              2: ["sage:dot:bce:uniform:1", "sage:mlp:bce:uniform:2", "sage:dot:contrastive:local:3",
                  "gat:distmult:bce:joint:4"]}


def reference_steps(graph, case, states, batches):
    """Loss and gradients of the whole-graph float64 reference from each of ``states`` (our weights before each
    step): at every step each rank's batch (``batches[rank][step]``: its pairs and negatives) scored from embeddings
    of the training graph less that batch's pairs' edges both ways, the ranks' summed losses over their targets."""
    arch, decoder, loss_kind, _, k = case.split(":")
    n, k = graph.num_nodes, int(k)
    x = torch.tensor(graph.features).double()
    edge_key = graph.src * n + graph.dst
    model = LinkReference(arch, decoder, x.shape[1]).double()
    losses, grads = [], []
    for step, state in enumerate(states):
        model.load_state_dict({(f"encoder.{m}" if m.startswith("convs") else m): v.double()
                               for m, v in one_relation_keys(state).items()})
        model.zero_grad()
        total, positives = 0.0, 0
        for per_rank in batches:
            b = per_rank[step]
            src, dst, neg = (torch.from_numpy(np.asarray(b[a], np.int64)) for a in ("src", "dst", "negatives"))
            excluded = np.concatenate([b["src"] * n + b["dst"], b["dst"] * n + b["src"]])
            keep = ~np.isin(edge_key, excluded)
            g = dgl.graph((torch.from_numpy(graph.src[keep]), torch.from_numpy(graph.dst[keep])), num_nodes=n)
            if arch in ("gcn", "gat"):
                g = dgl.add_self_loop(g)
            h = model.encoder(g, x)
            pos = model.decoder(h[src], h[dst])
            negs = model.decoder(h[src].unsqueeze(1), h[neg] if neg.dim() == 2 else h[neg].unsqueeze(0))
            if loss_kind == "bce":
                total = total + F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos), reduction="sum") + \
                    F.binary_cross_entropy_with_logits(negs, torch.zeros_like(negs), reduction="sum")
            else:
                total = total + F.cross_entropy(torch.cat([pos.unsqueeze(1), negs], 1),
                                                torch.zeros(len(pos), dtype=torch.long), reduction="sum")
            positives += len(pos)
        loss = total / (positives * (1 + k) if loss_kind == "bce" else positives)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({m.removeprefix("encoder."): p.grad.clone() for m, p in model.named_parameters()})
    return losses, grads


@pytest.fixture(scope="module")
def sampled_steps(cora_link_partitions, tmp_path_factory):
    """parts -> case -> (rank 0's states, losses and gradients; every rank's batches), every case of a part count in
    one launch, the ranks without DGL."""
    done = {}
    no_dgl = NoDGL(tmp_path_factory.mktemp("no-dgl"))

    def steps(parts):
        if parts not in done:
            out = tmp_path_factory.mktemp(f"sampled-link-steps-p{parts}")
            no_dgl.clear()
            ranks(parts, REPO / "tests" / "workers" / "sampled_link_steps_worker.py", cora_link_partitions[parts],
                  ",".join(STEP_CASES[parts]), out, FANOUT_ALL, 64, env=no_dgl.env)
            no_dgl.assert_sylvie_never_asked(parts)
            done[parts] = {}
            for c in STEP_CASES[parts]:
                name = c.replace(":", "-")
                done[parts][c] = (torch.load(out / f"{name}.pt", weights_only=False),
                                  [torch.load(out / f"{name}-rank{r}.pt", weights_only=False)["batches"]
                                   for r in range(parts)])
        return done[parts]

    return steps


@pytest.mark.slow
@pytest.mark.parametrize(("parts", "case"), [(p, c) for p, cases in STEP_CASES.items() for c in cases])
def test_sampled_link_steps_with_every_neighbour_match_whole_graph_dgl_less_each_batchs_edges(
        parts, case, cora_link_dir, cora_link_partitions, sampled_steps):
    """Fanouts above every degree, 64 pairs a batch and rank: the first two steps' loss and every gradient equal the
    float64 DGL reference's (1e-4), its graph per rank the training graph less that rank's batch's pairs' edges both
    ways; the blocks drew none of them; the batches' negatives are the pairs' hashes (uniform) or the batch's (joint),
    and the ranks' batches are disjoint."""
    ours, batches = sampled_steps(parts)[case]
    graph = load_graph(cora_link_dir)
    topo = read_topology(cora_link_partitions[parts])
    _, _, _, sampler, k = case.split(":")
    k = int(k)
    for rank, per_rank in enumerate(batches):
        own = topo.original_id[topo.part_offsets[rank]:topo.part_offsets[rank + 1]]  # canonical ids
        for step, b in enumerate(per_rank):
            drawn = set(map(tuple, b["edges"].tolist()))
            assert not drawn & _both_ways(b["src"], b["dst"])
            if sampler == "uniform":
                expected = uniform_negatives(negatives_key(0, 0), b["number"], k, 0, graph.num_nodes)
            elif sampler == "local":
                expected = local_negatives(negatives_key(0, 0, rank=rank), b["number"], k, own)
            else:
                expected = joint_negatives(negatives_key(0, 0, step, rank), k, 0, graph.num_nodes)
            np.testing.assert_array_equal(b["negatives"], expected)
            np.testing.assert_array_equal(b["src"], graph.link.src[b["number"]])
    numbers = np.concatenate([b["number"] for per_rank in batches for b in per_rank])
    assert len(np.unique(numbers)) == len(numbers)
    ref_losses, ref_grads = reference_steps(graph, case, ours["states"], batches)
    torch.testing.assert_close(torch.tensor(ours["losses"], dtype=torch.float64),
                               torch.tensor(ref_losses, dtype=torch.float64), rtol=1e-4, atol=0)
    _assert_same(ours["grads"], ref_grads, 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("parts", [1, 2])
def test_sylvie_train_trains_sampled_link_prediction_without_dgl(parts, cora_link_partitions, tmp_path):
    """`sylvie train --task link --mode sampled` on P ranks, DGL refused: 4 epochs of 128 pairs a batch and rank, the
    loss falls, every epoch's validation and test MRR is finite and the last above chance (0.17 for a pair among 20
    random negatives), the record says MRR, and model.pt is written."""
    no_dgl = NoDGL(tmp_path / "no-dgl")
    out = tmp_path / "run"
    ranks(parts, "--no-python", "sylvie", "train", "--partition", cora_link_partitions[parts], "--out", out,
          *SAMPLED_LINK, "--batch-size", "128", "--epochs", "4", "--alpha", "0", env=no_dgl.env)
    no_dgl.assert_sylvie_never_asked(parts)
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in records] == list(range(4))
    assert all(r["metric"] == "mrr" and r["mode"] == "sampled" for r in records)
    assert records[-1]["loss"] < records[0]["loss"]
    assert all(np.isfinite(r["val_acc"]) and np.isfinite(r["test_acc"]) for r in records)
    assert records[-1]["val_acc"] > 0.2
    assert (out / "model.pt").is_file()


@pytest.mark.slow
def test_the_cache_changes_only_where_a_link_runs_rows_come_from(cora_link_partitions, tmp_path):
    """Same seed, 2 ranks: no cache, a VIP cache of 1 x N / 2 rows (the link analysis), every row everywhere (alpha
    2, no prefetch) and the simulation policy (pre-sampled edge batches) give identical losses and validation MRRs;
    only the rows' sources differ."""
    part_dir = cora_link_partitions[2]
    sections = {"model": {"arch": "sage", "self_loop": False},
                "train": {"epochs": 3, "log_every": 1, "progress": False},
                "sampling": {"fanouts": [10, 10], "batch_size": 128}, "link": {"negatives": 2}}
    write_vip(part_dir, tmp_path / "vip", section("sampling", sections["sampling"]), progress=False,
              link=section("link", sections["link"]))
    settings = {"none": {"cache": {"alpha": 0}}, "vip1": {"cache": {"alpha": 1}},
                "all": {"cache": {"alpha": 2}, "sampling": {**sections["sampling"], "prefetch": 0}},
                "sim1": {"cache": {"alpha": 1, "policy": "simulation"}}}
    jobs = [{"partition": str(part_dir), "out": str(tmp_path / name), "seed": 0, "vip": str(tmp_path / "vip"),
             **sections, **extra} for name, extra in settings.items()]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    ranks(2, REPO / "tests" / "workers" / "sampled_link_runs_worker.py", tmp_path / "jobs.json")
    records = {name: read_jsonl(tmp_path / name / "metrics.jsonl") for name in settings}
    base = records["none"]
    for name, recs in records.items():
        assert [r["loss"] for r in recs] == [r["loss"] for r in base], name
        assert [r["val_acc"] for r in recs] == [r["val_acc"] for r in base], name
        assert [r["rows_local"] + r["rows_cached"] + r["rows_remote"] for r in recs] == \
               [r["rows_local"] + r["rows_cached"] + r["rows_remote"] for r in base], name
    assert all(r["rows_cached"] == 0 and r["rows_remote"] > 0 for r in base)
    assert all(r["rows_remote"] == 0 for r in records["all"])
    assert sum(r["rows_remote"] for r in records["vip1"]) < 0.5 * sum(r["rows_remote"] for r in base)
