"""Every architecture on a real GPU (`make gpu`) computes what it computes on the CPU, in float64: the logits, the
loss and every weight gradient of one step, on the whole graph (one rank), on two ranks of a 2-part partition sharing
the GPU (each rank's block with its halo rows; halo rows are the peer's hidden rows, in one autograd graph), and on a
sampled minibatch (our sampler's blocks). Skipped where torch sees no CUDA device."""
import copy
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.partitioned_ranks import rank_graphs

from sylvie.data.graph import load_graph
from sylvie.models import GNN
from sylvie.models.block import Block
from sylvie.models.blocks import whole_graph_block
from sylvie.sampling.neighbor_sampler import NeighborSampler

pytestmark = [pytest.mark.unit, pytest.mark.gpu]
CUDA = torch.device("cuda")
ARCHS = ("gcn", "sage", "gat")
HIDDEN, LAYERS, HEADS = 16, 3, 2


def self_loop(arch: str) -> bool:
    return arch in ("gcn", "gat")


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory):
    """A synthetic graph (1,500 nodes, no DGL needed) and its 2-part METIS partition."""
    from sylvie.config import section
    from sylvie.data.registry import download
    from sylvie.partition.stage import partition_dataset

    base = tmp_path_factory.mktemp("gpu-models")
    download("synthetic", base / "graph", section("dataset", {"source": "synthetic", "nodes": 1500, "avg_degree": 8,
                                                              "features": 24, "classes": 5, "seed": 3}))
    partition_dataset(base / "graph", base / "p2", 2, "metis", 0, progress=False)
    return base


def model_for(arch: str, in_feats: int, classes: int) -> GNN:
    torch.manual_seed(0)
    return GNN(arch, in_feats, HIDDEN, classes, LAYERS, dropout=0.0, heads=HEADS).double()


def step(model, inputs, x, labels, train_idx):
    """Logits (host), loss and gradients (host) of one forward and backward pass."""
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(inputs, x)
    loss = F.cross_entropy(logits[train_idx], labels[train_idx])
    loss.backward()
    return logits.detach().cpu(), float(loss.detach()), grads_of([model])


def grads_of(models) -> dict:
    """Each parameter's gradient summed over ``models`` (copies of one model), on the host."""
    out = {}
    for name, p in models[0].named_parameters():
        parts = [dict(m.named_parameters())[name].grad for m in models]
        out[name] = sum(torch.zeros_like(p) if g is None else g for g in parts).cpu()
    return out


def assert_close_all(ours: tuple, ref: tuple, rtol: float = 1e-9):
    logits, loss, grads = ours
    ref_logits, ref_loss, ref_grads = ref
    torch.testing.assert_close(logits, ref_logits, rtol=rtol, atol=rtol * float(ref_logits.abs().max()))
    assert loss == pytest.approx(ref_loss, rel=rtol)
    assert grads.keys() == ref_grads.keys()
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=rtol, atol=rtol * max(float(g.abs().max()), 1e-300),
                                   msg=lambda m, name=name: f"{name}: {m}")


def whole_graph_step(graph, arch: str, device) -> tuple:
    model = model_for(arch, graph.features.shape[1], graph.num_classes).to(device)
    block = whole_graph_block(graph.src, graph.dst, graph.num_nodes, self_loop(arch), device)
    x = torch.tensor(graph.features, dtype=torch.float64, device=device)
    labels = torch.tensor(graph.labels, device=device)
    train_idx = torch.from_numpy(np.flatnonzero(graph.train_mask)).to(device)
    return step(model, block, x, labels, train_idx)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_whole_graph_on_the_gpu_is_the_cpus_in_float64(arch, small_graph):
    graph = load_graph(small_graph / "graph")
    assert_close_all(whole_graph_step(graph, arch, CUDA), whole_graph_step(graph, arch, "cpu"))


def run_threads(fns) -> list:
    """``fns[r]()`` in a thread each; their results, or the first error."""
    results, errors = [None] * len(fns), []

    def body(r):
        try:
            results[r] = fns[r]()
        except BaseException as e:  # noqa: BLE001 - raised below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("arch", ARCHS)
def test_two_ranks_sharing_the_gpu_compute_the_whole_graph_in_float64(arch, small_graph):
    """Rank r runs the model on its part's block (inner rows as destinations, inner + halo rows as sources, global
    degrees) on the GPU, in a thread of its own; before every layer after the first its halo rows are the peer's
    inner rows of that layer (the tensor itself: one autograd graph, so the backward carries the halo gradients to
    their owners as the exchange does). The logits of each rank's rows, the loss over both ranks' training rows and
    the weight gradients summed over the ranks are the whole graph's on the CPU."""
    graph = load_graph(small_graph / "graph")
    ref = whole_graph_step(graph, arch, "cpu")
    base = model_for(arch, graph.features.shape[1], graph.num_classes)
    ranks = rank_graphs(small_graph / "p2", self_loop(arch))
    models = [copy.deepcopy(base).to(CUDA) for _ in ranks]
    hidden: dict = {}
    barrier = threading.Barrier(len(ranks), timeout=120)

    def forward(r):
        g = ranks[r]
        assert bool(np.all(np.asarray(g.shard.halo_owner) == 1 - r))
        at_peer = torch.from_numpy(np.array(g.shard.halo_owner_index, dtype=np.int64)).to(CUDA)

        def halo(inner, layer):  # one node type: a list of one
            hidden[r, layer] = inner[0]
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                raise RuntimeError(f"rank {1 - r} failed before layer {layer}") from None
            return [hidden[1 - r, layer][at_peer]]

        try:
            return models[r](Block.homogeneous(g.block).to(CUDA), g.x.to(device=CUDA, dtype=torch.float64), halo)
        except BaseException:
            barrier.abort()
            raise

    logits = run_threads([lambda r=r: forward(r) for r in range(len(ranks))])
    num_train = sum(int(g.train_idx.numel()) for g in ranks)
    loss = sum(F.cross_entropy(out[g.train_idx.to(CUDA)], g.labels[g.train_idx].to(CUDA), reduction="sum")
               for out, g in zip(logits, ranks)) / num_train
    loss.backward()
    ref_logits, ref_loss, ref_grads = ref
    for out, g in zip(logits, ranks):
        ids = torch.from_numpy(np.asarray(g.shard.global_id, dtype=np.int64))
        torch.testing.assert_close(out.detach().cpu(), ref_logits[ids], rtol=1e-9,
                                   atol=1e-9 * float(ref_logits.abs().max()))
    assert float(loss.detach()) == pytest.approx(ref_loss, rel=1e-9)
    grads = grads_of(models)
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-9, atol=1e-9 * max(float(g.abs().max()), 1e-300),
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("arch", ARCHS)
def test_a_sampled_minibatch_on_the_gpu_is_the_cpus_in_float64(arch, small_graph):
    """Our sampler's blocks of one minibatch (fanouts 3, 5, 8), moved to the GPU: the same logits, loss and
    gradients as on the CPU."""
    graph = load_graph(small_graph / "graph")
    order = np.argsort(graph.dst, kind="stable")
    in_src = np.asarray(graph.src, np.int64)[order]
    in_indptr = np.concatenate([[0], np.cumsum(np.bincount(graph.dst, minlength=graph.num_nodes))]).astype(np.int64)
    train_ids = np.flatnonzero(graph.train_mask)
    sampler = NeighborSampler(in_indptr, in_src, [3, 5, 8], train_ids, 3, seed=0, rank=0, self_loop=self_loop(arch))
    mb = sampler.sample(sampler.epoch_seeds(0)[0], 0, 0)
    x = torch.tensor(graph.features, dtype=torch.float64)[mb.input_nodes]
    labels = torch.tensor(graph.labels)[mb.seeds]
    every = torch.arange(mb.seeds.numel())
    base = model_for(arch, graph.features.shape[1], graph.num_classes)
    ours = step(copy.deepcopy(base).to(CUDA), [b.to(CUDA) for b in mb.blocks], x.to(CUDA), labels.to(CUDA),
                every.to(CUDA))
    assert_close_all(ours, step(base, mb.blocks, x, labels, every))
