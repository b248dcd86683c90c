"""Link prediction, full-graph on P parts, equals a single-process DGL reference in float64 on the same positive and
negative pairs: the loss and every gradient (encoder and decoder), at 1, 2 and 4 ranks, pairs whose ends live on other
ranks fetching their rows (and sending their gradients back). And one process of ours in float64 equals the reference
to float64 rounding."""
import dgl
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from support.commands import REPO, ranks
from support.dgl_models import Reference
from support.no_dgl import NoDGL

from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.formats.partition_manifest import read_manifest
from sylvie.models.state_dict_adapter import one_relation_keys
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed
from sylvie.runtime.rank_pairs import RankPairs
from sylvie.sampling.negatives import joint_negatives, negatives_key, uniform_negatives
from sylvie.train.fullgraph_trainer import FullGraphTrainer

pytestmark = pytest.mark.slow

HIDDEN = 16  # the schema's default model.hidden: the embeddings' width
# arch:decoder:loss:sampler:negatives; uniform negatives are a function of the pair alone, the same on any ranks.
# (No MLP decoder under the contrastive loss: at initialisation its scores are all but equal, so the gradients of its
# output layer are sums that cancel to zero, which float32 leaves as rounding noise.)
CASES = {1: ["sage:dot:bce:uniform:1"],
         2: ["sage:dot:bce:uniform:1", "gcn:dot:contrastive:uniform:3", "gat:distmult:bce:uniform:2"],
         4: ["sage:dot:bce:uniform:1", "sage:mlp:bce:uniform:2"]}


class Decoder(nn.Module):
    """The decoders by their definitions, named as ours are (so one state dict loads both)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        if kind == "mlp":
            self.hidden, self.out = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, 1)
        if kind == "distmult":
            self.relation_weight = nn.Parameter(torch.ones(1, HIDDEN))

    def forward(self, a, b):
        if self.kind == "dot":
            return (a * b).sum(-1)
        if self.kind == "distmult":
            return (a * self.relation_weight[0] * b).sum(-1)
        return self.out(F.relu(self.hidden(a * b))).squeeze(-1)


class LinkReference(nn.Module):
    def __init__(self, arch, decoder, d_in):
        super().__init__()
        self.encoder = Reference(arch, d_in, HIDDEN, HIDDEN)
        self.decoder = Decoder(decoder)


def reference_steps(graph, case, states):
    """Loss and gradients of the whole-graph float64 reference from each of ``states`` (our weights before each
    step), on the pairs and negatives of each step (uniform: drawn for each training pair's number, seed 0)."""
    arch, decoder, loss_kind, sampler, k = case.split(":")
    k = int(k)
    g = dgl.graph((torch.tensor(graph.src), torch.tensor(graph.dst)), num_nodes=graph.num_nodes)
    if arch in ("gcn", "gat"):
        g = dgl.add_self_loop(g)
    x = torch.tensor(graph.features).double()
    numbers = graph.link.indices("train")
    src, dst = torch.tensor(graph.link.src[numbers]), torch.tensor(graph.link.dst[numbers])
    model = LinkReference(arch, decoder, x.shape[1]).double()
    losses, grads = [], []
    for step, state in enumerate(states):
        ours = one_relation_keys(state)
        model.load_state_dict({(f"encoder.{n}" if n.startswith("convs") else n): v.double()
                               for n, v in ours.items()})
        model.zero_grad()
        assert sampler == "uniform"
        neg = torch.tensor(uniform_negatives(negatives_key(0, step), numbers, k, 0, graph.num_nodes))
        h = model.encoder(g, x)
        pos, negs = model.decoder(h[src], h[dst]), model.decoder(h[src].unsqueeze(1), h[neg])
        if loss_kind == "bce":
            scores = torch.cat([pos, negs.reshape(-1)])
            loss = F.binary_cross_entropy_with_logits(scores, torch.cat([torch.ones_like(pos),
                                                                         torch.zeros(negs.numel()).double()]))
        else:
            loss = F.cross_entropy(torch.cat([pos.unsqueeze(1), negs], 1), torch.zeros(len(pos), dtype=torch.long))
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n.removeprefix("encoder."): p.grad.clone() for n, p in model.named_parameters()})
    return losses, grads


@pytest.fixture(scope="module")
def our_steps(cora_link_partitions, tmp_path_factory):
    """parts -> case -> what the worker saved, every case of a part count in one launch, the ranks without DGL."""
    done = {}
    no_dgl = NoDGL(tmp_path_factory.mktemp("no-dgl"))

    def steps(parts):
        if parts not in done:
            out = tmp_path_factory.mktemp(f"link-steps-p{parts}")
            no_dgl.clear()
            ranks(parts, REPO / "tests" / "workers" / "link_exactness_worker.py", cora_link_partitions[parts],
                  ",".join(CASES[parts]), out, env=no_dgl.env)
            no_dgl.assert_sylvie_never_asked(parts)
            done[parts] = {c: torch.load(out / f"{c.replace(':', '-')}.pt") for c in CASES[parts]}
        return done[parts]

    return steps


def _assert_same(ours_grads, ref_grads, rtol):
    """Every gradient within ``rtol`` of the reference's, to an absolute floor of ``rtol`` x the step's largest
    gradient element (a weight whose gradient is all but zero, as a dead ReLU unit's, is then compared to the rounding
    of the others)."""
    for step, (g_ours, g_ref) in enumerate(zip(ours_grads, ref_grads, strict=True)):
        g_ours = one_relation_keys(g_ours)
        assert g_ours.keys() == g_ref.keys()
        largest = max(float(g.abs().max()) for g in g_ref.values())
        for name in g_ref:
            scale = max(float(g_ref[name].abs().max()), largest * 1e-3)
            torch.testing.assert_close(g_ours[name].double(), g_ref[name], rtol=rtol, atol=rtol * scale,
                                       msg=lambda m, step=step, name=name: f"step {step}, {name}: {m}")


@pytest.mark.parametrize(("parts", "case"), [(p, c) for p, cases in CASES.items() for c in cases])
def test_partitioned_link_training_matches_whole_graph_dgl(parts, case, cora_link_dir, our_steps):
    ours = our_steps(parts)[case]
    ref_losses, ref_grads = reference_steps(load_graph(cora_link_dir), case, ours["states"])
    torch.testing.assert_close(torch.tensor(ours["losses"], dtype=torch.float64),
                               torch.tensor(ref_losses, dtype=torch.float64), rtol=1e-4, atol=0)
    _assert_same(ours["grads"], ref_grads, 1e-4)


def test_one_process_in_float64_equals_the_reference(cora_link_dir, cora_link_partitions):
    """Our trainer on one part, its model and inputs in float64: the reference's gradients to 1e-10 (and its loss to
    float32's rounding: the loss reported travels as float32, in the gradients' all-reduce)."""
    part = cora_link_partitions[1]
    ctx = init_distributed("cpu")
    manifest = read_manifest(part)
    shard = read_shard(part, 0, manifest)
    case = "sage:mlp:bce:uniform:2"
    link = section("link", {"decoder": "mlp", "negatives": 2})
    model = section("model", {"arch": "sage", "dropout": 0.0, "self_loop": False})
    trainer = FullGraphTrainer(ctx, shard, model, section("train", {"task": "link"}), section("comm"), 0,
                               RankPairs(ctx, part, manifest, shard, link, 0), link)
    trainer.model.double()
    trainer.graph.x = [x.double() for x in trainer.graph.x]
    states, losses, grads = [], [], []
    for step in range(2):
        states.append({k: v.clone() for k, v in trainer.model.state_dict().items()})
        losses.append(trainer.train_step(step))
        grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    ref_losses, ref_grads = reference_steps(load_graph(cora_link_dir), case, states)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-7)  # the loss reported travels as float32
    _assert_same(grads, ref_grads, 1e-10)


def test_negative_samplers_are_reproducible_and_stay_in_range():
    """The same pair numbers give the same negatives in any order and any grouping; joint draws one set a batch."""
    key = negatives_key(7, 3)
    numbers = np.arange(1000)
    whole = uniform_negatives(key, numbers, 4, 100, 50)
    assert whole.min() >= 100 and whole.max() < 150
    shuffled = np.random.default_rng(0).permutation(numbers)
    np.testing.assert_array_equal(uniform_negatives(key, shuffled, 4, 100, 50), whole[shuffled])
    assert (uniform_negatives(negatives_key(7, 4), numbers, 4, 100, 50) != whole).mean() > 0.9  # another epoch
    shared = joint_negatives(key, 5, 0, 10)
    assert shared.shape == (5,) and np.array_equal(shared, joint_negatives(key, 5, 0, 10))
