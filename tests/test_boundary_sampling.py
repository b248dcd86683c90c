"""Boundary-node sampling (BNS-GCN, ``train.boundary_sampling``): the per-epoch sample every rank computes alike,
the sampled block, and training on it against an independent reference (single-process float64 DGL on the whole
graph without the epoch's dropped halo edges); bytes on the wire; pipelined 1-bit training; the config errors.

Multi-rank training runs in this process (``partitioned_ranks``: the trainer's step on simulated ranks); the real
trainer under torchrun is in test_boundary_sampling_trainer.py."""
import dgl
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import GATConv, GraphConv, SAGEConv
from support.partitioned_ranks import dropped_edges, rank_graphs, train
from support.simulated_ranks import SimulatedRanks

from sylvie.cli import main
from sylvie.comm.boundary_drift import BoundaryDrift
from sylvie.comm.boundary_sampling import BoundarySampler, keep_draw
from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.halo_wire import InFlight
from sylvie.comm.stale_halo import StaleHalo
from sylvie.config import resolve_runs, section
from sylvie.data.graph import load_graph
from sylvie.errors import SylvieError
from sylvie.models.blocks import halo_subblock
from sylvie.models.state_dict_adapter import one_relation_keys

HEADS = 4


# ---- the sample ------------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_owner_and_receiver_draw_the_same_rows(cora_partitions):
    """Rank r's kept halo rows from owner j are, row for row, the rows of j's send list to r that j keeps."""
    graphs = rank_graphs(cora_partitions[4], self_loop=False)
    compared = 0
    for epoch in (0, 7):
        samples = [BoundarySampler(g.plan, 0.4, 11, r).sample(epoch) for r, g in enumerate(graphs)]
        for r, g in enumerate(graphs):
            kept = g.shard.halo_global_id[samples[r].halo_kept.numpy()]
            owners = g.shard.halo_owner[samples[r].halo_kept.numpy()]
            for j, owner in enumerate(graphs):
                if j == r:
                    continue
                p = samples[j].plan
                start = sum(p.send_counts[:r])
                sent = owner.shard.global_id[p.send_index[start:start + p.send_counts[r]].numpy()]
                assert sent.tolist() == kept[owners == j].tolist()
                assert p.send_counts[r] == samples[r].plan.recv_counts[j]
                compared += len(sent)
    assert compared > 100


@pytest.mark.unit
def test_the_sample_changes_every_epoch_and_keeps_share_p():
    full = keep_draw(0, 0, 1, 0, 100_000, 0.3)
    assert abs(full.mean() - 0.3) < 0.01
    assert (keep_draw(0, 1, 1, 0, 100_000, 0.3) != full).mean() > 0.3  # drawn afresh
    assert (keep_draw(1, 0, 1, 0, 100_000, 0.3) != full).mean() > 0.3  # another seed
    assert (keep_draw(0, 0, 0, 1, 100_000, 0.3) != full).mean() > 0.3  # the other direction of the pair
    assert np.array_equal(keep_draw(0, 0, 1, 0, 100_000, 0.3), full)  # repeatable


@pytest.mark.unit
def test_at_p_1_the_sample_is_the_full_plan_itself(cora_partitions):
    """p = 1: every epoch's sample is the full plan object and every halo row, so the trainer takes exactly the
    unsampled path (the whole block, the plan it always used); p < 1 gives a smaller plan."""
    g = rank_graphs(cora_partitions[2], self_loop=False)[0]
    sampler = BoundarySampler(g.plan, 1.0, 0, 0)
    for epoch in range(3):
        s = sampler.sample(epoch)
        assert s.plan is g.plan and s.every_halo_row and s.halo_kept.tolist() == list(range(g.plan.num_halo))
    s = BoundarySampler(g.plan, 0.5, 0, 0).sample(0)
    assert not s.every_halo_row and s.plan is not g.plan and s.plan.num_halo < g.plan.num_halo


@pytest.mark.unit
def test_the_subblock_drops_the_unkept_halo_rows_and_their_edges(cora_partitions):
    g = rank_graphs(cora_partitions[2], self_loop=True)[1]
    n, h = g.shard.num_inner, g.shard.num_halo
    kept = torch.tensor(sorted(np.random.default_rng(0).choice(h, h // 3, replace=False)))
    sub = halo_subblock(g.block, kept)
    assert sub.idtype == g.block.idtype
    assert sub.num_dst == n and sub.num_src == n + len(kept)
    old_id = torch.cat([torch.arange(n), n + kept])  # sub-block source row -> full block row
    s_src, s_dst = sub.indices, sub.dst_of_edges()
    f_src, f_dst = g.block.indices, g.block.dst_of_edges()
    keep = (f_src < n) | torch.isin(f_src.long() - n, kept)
    assert sorted(zip(old_id[s_src.long()].tolist(), s_dst.tolist())) == \
        sorted(zip(f_src[keep].tolist(), f_dst[keep].tolist()))
    dropped = torch.bincount(f_dst[~keep].long(), minlength=n)
    assert torch.equal(sub.in_degree, g.block.in_degree - dropped)
    assert torch.equal(sub.out_degree, g.block.out_degree[old_id])


# ---- training on the sample against the whole graph without the dropped edges -------------------------------------

class Reference(nn.Module):
    """Plain DGL on a whole graph: GraphConv without its own normalisation (weights given per edge), SAGEConv
    ('mean'), or GATConv (HEADS heads in the hidden layer, concatenated; one in the output layer)."""

    def __init__(self, arch, d_in, hidden, classes):
        super().__init__()
        self.arch = arch
        if arch == "gat":
            self.convs = nn.ModuleList([GATConv(d_in, hidden, HEADS), GATConv(hidden * HEADS, classes, 1)])
            return
        conv = (lambda i, o: GraphConv(i, o, norm="none")) if arch == "gcn" else (lambda i, o: SAGEConv(i, o, "mean"))
        self.convs = nn.ModuleList([conv(d_in, hidden), conv(hidden, classes)])

    def forward(self, g, x, w=None):
        if self.arch == "gat":
            return self.convs[1](g, F.elu(self.convs[0](g, x).flatten(1))).mean(1)
        if self.arch == "gcn":
            return self.convs[1](g, F.relu(self.convs[0](g, x, edge_weight=w)), edge_weight=w)
        return self.convs[1](g, F.relu(self.convs[0](g, x)))


def reference_step(graph, arch, init, dropped: set, self_loop: bool):
    """Loss and weight gradients of one step on the whole graph less the ``dropped`` (src, dst) edges, float64.
    GCN: w(u -> v) = out(u)^-1/2 in(v)^-1/2 with u's out-degree in the whole graph and v's in-degree in the sampled
    one (self-loops counted)."""
    src, dst, n = np.asarray(graph.src), np.asarray(graph.dst), graph.num_nodes
    code = src * n + dst
    gone = np.array(sorted(s * n + d for s, d in dropped), dtype=np.int64)
    keep = ~np.isin(code, gone)
    assert (~keep).sum() >= len(dropped)
    g = dgl.graph((torch.tensor(src[keep]), torch.tensor(dst[keep])), num_nodes=n)
    if self_loop:
        g = dgl.add_self_loop(g)
    w = None
    if arch == "gcn":
        out_deg = torch.tensor(np.bincount(src, minlength=n) + int(self_loop), dtype=torch.float64)
        u, v = g.edges()
        w = out_deg.clamp(min=1)[u.long()].pow(-0.5) * g.in_degrees().double().clamp(min=1)[v.long()].pow(-0.5)
    x, y = torch.tensor(graph.features).double(), torch.tensor(graph.labels)
    train_mask = torch.tensor(graph.train_mask)
    model = Reference(arch, x.shape[1], 16, graph.num_classes).double()
    model.load_state_dict({k: v.double() for k, v in one_relation_keys(init).items()})
    loss = F.cross_entropy(model(g, x, w)[train_mask], y[train_mask])
    loss.backward()
    return float(loss.detach()), {k: p.grad for k, p in model.named_parameters()}


def _model(arch):
    return section("model", {"arch": arch, "dropout": 0.0, "self_loop": arch != "sage"})


def _assert_matches(ours_loss, ours_grads, ref_loss, ref_grads):
    assert ours_loss == pytest.approx(ref_loss, rel=1e-4)
    ours_grads = one_relation_keys(ours_grads)  # a layer's one convolution, named as the reference's stack
    assert ours_grads.keys() == ref_grads.keys()
    for name, ref in ref_grads.items():
        torch.testing.assert_close(ours_grads[name].double(), ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()),
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.slow
@pytest.mark.parametrize(("arch", "parts", "share"), [("sage", 2, 0.5), ("gcn", 2, 0.5), ("gat", 2, 0.3),
                                                      ("sage", 4, 0.2), ("gcn", 4, 0.7)])
def test_a_sampled_step_equals_the_whole_graph_without_the_dropped_halo_edges(cora_dir, cora_partitions, arch, parts,
                                                                             share):
    """Every epoch's step (loss, summed weight gradients) from the weights it started from, against the reference
    on the whole graph less the edges from the halo rows that epoch's samples drop."""
    model, seed, graph = _model(arch), 5, load_graph(cora_dir)
    graphs = rank_graphs(cora_partitions[parts], model.self_loop)
    ours = train(graphs, model, share, epochs=2, seed=seed)
    for epoch in range(2):
        dropped = dropped_edges(graphs, share, seed, epoch)
        assert len(dropped) > 50  # the sample drops edges, so the reference is not the whole graph's
        ref_loss, ref_grads = reference_step(graph, arch, ours["weights"][epoch], dropped, model.self_loop)
        _assert_matches(ours["losses"][epoch], ours["grads"][epoch], ref_loss, ref_grads)
        _, whole_grads = reference_step(graph, arch, ours["weights"][epoch], set(), model.self_loop)
        # and sampling changed the step: gradients differ from the whole graph's by far more than the tolerance
        assert max(float((whole_grads[k] - g).abs().max() / g.abs().max()) for k, g in ref_grads.items()) > 1e-2
    assert dropped_edges(graphs, share, seed, 0) != dropped_edges(graphs, share, seed, 1)


@pytest.mark.slow
def test_at_p_1_the_sampled_path_computes_what_the_full_path_does(cora_partitions):
    """The machinery of a sample (sub-plan, sub-block, sampled rows) with every row kept gives the losses and
    gradients of the unsampled step exactly."""
    for arch in ("gcn", "sage"):
        model = _model(arch)
        graphs = rank_graphs(cora_partitions[2], model.self_loop)
        whole = train(graphs, model, 1.0, epochs=2)
        forced = train(graphs, model, 1.0, epochs=2, force_sampled_path=True)
        assert forced["losses"] == whole["losses"]
        for a, b in zip(forced["grads"], whole["grads"]):
            for name in a:
                torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)


# ---- bytes, pipelining, 1 bit ---------------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize(("bits", "pipeline"), [(32, False), (1, True)])
def test_halo_bytes_shrink_to_share_p(cora_partitions, bits, pipeline):
    model = _model("sage")
    graphs = rank_graphs(cora_partitions[2], model.self_loop)
    full = train(graphs, model, 1.0, epochs=4, bits=bits, pipeline=pipeline)
    sampled = train(graphs, model, 0.3, epochs=4, bits=bits, pipeline=pipeline)
    # epochs 1-3 (epoch 0 of a pipelined run also sends the next epoch's sample ahead)
    ratio = sum(sum(r[1:]) for r in sampled["sent"]) / sum(sum(r[1:]) for r in full["sent"])
    assert 0.25 < ratio < 0.35, ratio


@pytest.mark.slow
def test_pipelined_1_bit_training_on_samples_learns(cora_partitions):
    model = section("model", {"arch": "sage", "dropout": 0.5, "self_loop": False})
    graphs = rank_graphs(cora_partitions[2], model.self_loop)
    run = train(graphs, model, 0.5, epochs=20, bits=1, pipeline=True, lr=0.02)
    assert run["modes"] == [0] + [1] * 19  # every epoch after the first computed with stale halo data
    assert all(np.isfinite(run["losses"]))
    assert np.mean(run["losses"][-3:]) < 0.6 * run["losses"][0], run["losses"]


WORLD, INNER, HALO_PER_PEER, DIM = 3, 40, 30, 4


def _toy_plans(seed=0):
    """Each rank needs HALO_PER_PEER rows of every peer: (owner, index in the owner's inner rows), by owner, and the
    full plans that follow."""
    g = torch.Generator().manual_seed(seed)
    needs = [[(j, int(i)) for j in range(WORLD) if j != r
              for i in torch.randperm(INNER, generator=g)[:HALO_PER_PEER]] for r in range(WORLD)]
    plans = []
    for r in range(WORLD):
        send_index = [i for peer in range(WORLD) for (owner, i) in needs[peer] if owner == r]
        send_counts = [sum(owner == r for owner, _ in needs[peer]) for peer in range(WORLD)]
        recv_counts = [sum(owner == j for owner, _ in needs[r]) for j in range(WORLD)]
        plans.append(HaloPlan(torch.tensor(send_index), send_counts, recv_counts, INNER, len(needs[r])))
    return needs, plans


@pytest.mark.unit
def test_a_stale_sampled_round_uses_rows_sent_for_its_sample_and_adds_gradients_with_the_last_plan():
    """Pipelined, fp32, p = 0.5: round 0 fresh (keeps), rounds 1 and 2 stale. A stale round computes with the rows of
    *its* sample as the owners' inner rows were one round earlier (round 0 sends round 1's ahead), and adds into the
    inner rows the gradients peers sent for the *previous* round's sample, with that round's send list."""
    needs, plans = _toy_plans()
    inner = [[torch.randn(INNER, DIM, generator=torch.Generator().manual_seed(10 * t + r)) for r in range(WORLD)]
             for t in range(3)]
    samplers = [BoundarySampler(plans[r], 0.5, 3, r) for r in range(WORLD)]
    grads = [[torch.randn(samplers[r].sample(t).plan.num_halo, DIM,
                          generator=torch.Generator().manual_seed(100 + 10 * t + r)) for r in range(WORLD)]
             for t in range(3)]

    def rank_fn(rank, a2a):
        exch = HaloExchange(plans[rank], seed=1, rank=rank, pipelined=True, all_to_all=a2a)
        out = []
        for t, fresh in enumerate((True, False, False)):
            exch.begin_round(t, fresh=fresh, keep=t < 2, plan=samplers[rank].sample(t).plan,
                             next_plan=samplers[rank].sample(t + 1).plan if t < 2 else None)
            x = inner[t][rank].clone().requires_grad_()
            halo = exch(x, layer=1)
            halo.backward(grads[t][rank])
            out.append((halo.detach(), x.grad))
        return out

    results = SimulatedRanks(WORLD).run(rank_fn)

    def halo_rows(t, rows_of, r):  # rank r's kept halo rows at round t, as the owners' rows were in rows_of
        kept = samplers[r].sample(t).halo_kept.tolist()
        return torch.stack([inner[rows_of][o][i] for k, (o, i) in enumerate(needs[r]) if k in kept])

    def inner_grad(t, r):  # what r's inner rows receive from the gradients of round t's halo rows
        out = torch.zeros(INNER, DIM)
        for peer in range(WORLD):
            kept = samplers[peer].sample(t).halo_kept.tolist()
            for k, (owner, i) in enumerate(needs[peer]):
                if owner == r and k in kept:
                    out[i] += grads[t][peer][kept.index(k)]
        return out

    for r, rounds in enumerate(results):
        assert samplers[r].sample(1).plan.num_halo not in (0, len(needs[r]))
        torch.testing.assert_close(rounds[0][0], halo_rows(0, 0, r), rtol=0, atol=0)
        torch.testing.assert_close(rounds[1][0], halo_rows(1, 0, r), rtol=0, atol=0)  # sent ahead at round 0
        torch.testing.assert_close(rounds[2][0], halo_rows(2, 1, r), rtol=0, atol=0)
        torch.testing.assert_close(rounds[0][1], inner_grad(0, r), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(rounds[1][1], inner_grad(0, r), rtol=1e-6, atol=1e-6)  # round 0's, its plan
        torch.testing.assert_close(rounds[2][1], inner_grad(1, r), rtol=1e-6, atol=1e-6)


# ---- smoothing and drift across samples ------------------------------------------------------------------------

class _Arrived(InFlight):
    """A background exchange that has arrived: ``rows``."""

    def __init__(self, rows):
        self.rows = rows

    def wait(self):
        return self.rows


@pytest.mark.unit
def test_smoothing_never_blends_rows_of_another_plan():
    a = HaloPlan(torch.tensor([0, 1]), [2], [2], 2, 2)
    b = HaloPlan(torch.tensor([1, 0]), [2], [2], 2, 2)
    stale = StaleHalo(smoothing=0.5)
    stale.put(1, 0, torch.ones(2, 3), a)  # a synchronous round's rows: what it used
    stale.put(1, 0, _Arrived(torch.zeros(2, 3)), a)
    assert torch.equal(stale.take(1, 0), torch.full((2, 3), 0.5)) and stale.used_plan(1, 0) is a  # same plan: smoothed
    stale.put(1, 0, _Arrived(torch.zeros(2, 3)), b)
    assert torch.equal(stale.take(1, 0), torch.zeros(2, 3)) and stale.used_plan(1, 0) is b  # other rows: as received


@pytest.mark.unit
def test_drift_compares_only_rows_present_in_both_samples():
    drift = BoundaryDrift(sample_rows=4)
    rows = torch.arange(10.0)[:, None].repeat(1, 2)  # a list of 10 rows; sample positions 0, 3, 6, 9
    drift.observe(1, 1, rows[[0, 3, 5]], torch.tensor([0, 3, 5]), 10)
    drift.observe(1, 1, rows[[3, 6, 9]] + 1, torch.tensor([3, 6, 9]), 10)  # only position 3 is in both
    assert drift.change2[1] == 2.0 and drift.size2[1] == 2 * 3.0 ** 2
    drift.reset_epoch()
    drift.observe(1, 1, rows[[1, 2]], torch.tensor([1, 2]), 10)  # no sample position at all: nothing compared
    drift.observe(1, 1, rows[[0]], torch.tensor([0]), 10)
    assert drift.change2[1] == 0.0 and drift.size2[1] == 0.0
    whole, gathered = BoundaryDrift(sample_rows=4), BoundaryDrift(sample_rows=4)
    index = torch.tensor([9, 2, 4, 4, 7, 1, 0])
    for t in range(2):
        whole.observe(1, 0, (rows * (t + 1))[index])
        gathered.observe_gathered(1, 0, rows * (t + 1), index)
    assert whole.sums() == gathered.sums() and whole.size2[0] > 0


# ---- settings ------------------------------------------------------------------------------------------------

def _config_error(text: str, tmp_path) -> str:
    from sylvie.config_file import load_config

    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SylvieError) as e:
        resolve_runs(load_config(path))
    return str(e.value)


@pytest.mark.unit
def test_boundary_sampling_in_sampled_training_is_refused_naming_the_field(tmp_path, capsys):
    err = _config_error("runs:\n  a: {train: {mode: sampled, boundary_sampling: 0.5}}\n", tmp_path)
    assert err.startswith("config: runs.a: train.boundary_sampling is 0.5") and "train.mode sampled" in err
    capsys.readouterr()
    code = main(["train", "--partition", str(tmp_path / "none"), "--out", str(tmp_path / "run"), "--mode", "sampled",
                 "--boundary-sampling", "0.5"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "train.boundary_sampling is 0.5" in err, err
    assert not (tmp_path / "run").exists()
    resolve_runs({"runs": {"a": {"train": {"mode": "sampled", "boundary_sampling": 1}}}})  # 1 = off: fine there


@pytest.mark.unit
def test_boundary_sampling_with_smoothing_or_out_of_range_is_refused(tmp_path):
    err = _config_error("runs:\n  a: {train: {boundary_sampling: 0.1}, comm: {pipeline: true, smoothing: 0.5}}\n",
                        tmp_path)
    assert "train.boundary_sampling 0.1 cannot be combined with comm.smoothing 0.5" in err
    for bad in (0, 1.5, -0.1):
        err = _config_error(f"runs:\n  a: {{train: {{boundary_sampling: {bad}}}}}\n", tmp_path)
        assert "invalid value for 'runs.a.train.boundary_sampling'" in err
    runs = resolve_runs({"runs": {"a": {"train": {"boundary_sampling": 0.1}, "comm": {"bits": 1, "pipeline": True}}}})
    assert runs["a"].train.boundary_sampling == 0.1


@pytest.mark.unit
def test_a_checkpoint_of_another_share_is_not_resumed():
    from sylvie.config import as_dict
    from sylvie.train.checkpoint import _difference, run_identity

    manifest = {"dataset_fingerprint": "f", "num_parts": 2, "parts": [{"sha256": "a"}, {"sha256": "b"}]}

    def identity(p):
        return run_identity({}, as_dict(section("train", {"boundary_sampling": p})), {}, manifest)

    assert _difference(identity(0.5), identity(1.0)).startswith("train.boundary_sampling changed (0.5 -> ")
    assert _difference(identity(1.0), identity(0.5)).startswith("train.boundary_sampling changed (")
    assert _difference(identity(0.5), identity(0.5)) is None
    # a checkpoint from before the knob existed (no train.boundary_sampling in it) resumes at p = 1
    before = {k: v for k, v in identity(1.0).items() if k != "train.boundary_sampling"}
    assert _difference(before, identity(1.0)) is None


@pytest.mark.slow
def test_runs_of_different_shares_are_different_rows_of_the_report(tmp_path, capsys):
    """p is a run attribute (one row per p); a run written before the knob existed is a run at p = 1."""
    import json

    from test_report import report, write_run

    from sylvie.formats.checksum import with_checksum

    def run(d, seed, p, acc):
        d = write_run(d, seed=seed, acc=acc)
        ev = json.loads((d / "eval.json").read_text())
        if p is None:
            del ev["train"]["boundary_sampling"]
        else:
            ev["train"]["boundary_sampling"] = p
        (d / "eval.json").write_text(json.dumps(with_checksum(ev)))  # as sylvie evaluate would write it
        return d

    r = tmp_path / "results" / "bns"
    dirs = [run(r / "seed0", 0, 1.0, 0.8), run(r / "seed1", 1, None, 0.6), run(r / "seed2", 2, 1, 0.7),
            run(r / "p01-seed0", 0, 0.1, 0.5)]
    code, err, rows = report(tmp_path, dirs, capsys)
    assert code == 0, err
    assert [(row["run"], row["seeds"], row["test acc"]) for row in rows] == [
        ("bns (boundary_sampling=0.1)", "1", "50.00%"), ("bns (boundary_sampling=1.0)", "3", "70.00%")]
