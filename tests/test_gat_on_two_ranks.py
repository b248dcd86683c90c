"""GAT on 2 ranks in float32 on PyTorch's path (``ops.torch_ops()``, the one the GPU takes) against the whole graph in
float64, on the CPU: the measurement behind the GPU test's failure (issue 58: ``attn_l``'s gradient off by 2.6e-6 at
step 1 on an H200, where ``tests/test_gpu_training.py`` allows 3.8e-7). Here the same graph, model and steps are
within 1.5e-9 of float64 (the bound is 1e-4 of the largest element: 3.8e-7), and the whole graph's sums in other
orders of its edges differ from each other by under 1.2e-9: the order of fp32 additions (CUDA's atomics in
``index_add``) is some 2,000x too small to be the GPU's error, so that error is not rounding, and the bound stays."""
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.partitioned_ranks import rank_graphs, train

from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.models import build_model
from sylvie.models.blocks import whole_graph_block
from sylvie.models.ops import _attend_torch as attend_torch
from sylvie.models.ops import torch_ops

pytestmark = pytest.mark.slow

SETTINGS = {"arch": "gat", "dropout": 0.0, "hidden": 16, "heads": 2, "self_loop": True}


@pytest.fixture(scope="module")
def graph_dir(tmp_path_factory):
    """tests/test_gpu_training.py's graph (2,000 nodes) and its METIS partition into 2 parts."""
    from sylvie.data.registry import download
    from sylvie.partition.stage import partition_dataset

    base = tmp_path_factory.mktemp("gat-two-ranks")
    download("synthetic", base / "graph", section("dataset", {"source": "synthetic", "nodes": 2000, "avg_degree": 10,
                                                              "features": 32, "classes": 6, "seed": 5}))
    partition_dataset(base / "graph", base / "p2", 2, "metis", 0, progress=False)
    return base


def whole_graph_grads(graph, state: dict, dtype, order=None) -> dict:
    """The loss's gradients on the whole graph from ``state`` (its edges in ``order``, a permutation, if given)."""
    model = build_model(section("model", SETTINGS), graph.features.shape[1], graph.num_classes).to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    order = np.arange(len(graph.src)) if order is None else order
    block = whole_graph_block(graph.src[order], graph.dst[order], graph.num_nodes, True)
    x, y = torch.tensor(graph.features, dtype=dtype), torch.tensor(graph.labels)
    train_idx = torch.from_numpy(np.flatnonzero(graph.train_mask))
    F.cross_entropy(model(block, x)[train_idx], y[train_idx]).backward()
    return {n: p.grad.double() for n, p in model.named_parameters()}


def test_gat_on_two_ranks_in_fp32_on_torchs_path_is_float64_to_rounding(graph_dir, monkeypatch):
    from sylvie.models import ops
    taken = []
    monkeypatch.setattr(ops, "_attend_torch", lambda *a: taken.append(1) or attend_torch(*a))
    graph = load_graph(graph_dir / "graph")
    entered = []  # every rank's thread takes PyTorch's path (torch_ops is per thread: entered in the rank's thread,
    # and kept: a context manager collected unexited would leave it)

    def on_torchs_path(rank, epoch, halo):
        entered.append(torch_ops())
        entered[-1].__enter__()

    ours = train(rank_graphs(graph_dir / "p2", True), section("model", SETTINGS), share=1.0, epochs=3,
                 observe=on_torchs_path)
    assert len(taken) == 2 * 3 * 2  # ranks x steps x layers, all on PyTorch's path
    rng = np.random.default_rng(0)
    for step, (state, grads) in enumerate(zip(ours["weights"], ours["grads"])):
        ref = whole_graph_grads(graph, state, torch.float64)
        with torch_ops():
            reordered = [whole_graph_grads(graph, state, torch.float32, rng.permutation(len(graph.src)))
                         for _ in range(3)]
        for name in ("convs.0.convs.0.attn_l", "convs.0.convs.0.attn_r", "convs.1.convs.0.attn_l"):
            bound = 1e-4 * float(ref[name].abs().max())  # tests/test_gpu_training.py's atol
            error = float((grads[name].double() - ref[name]).abs().max())
            spread = max(float((g[name] - reordered[0][name]).abs().max()) for g in reordered[1:])
            print(f"step {step} {name}: 2 ranks fp32 off float64 by {error:.2e}, edge orders apart by "
                  f"{spread:.2e}; the GPU test's bound {bound:.2e}", file=sys.stderr)
            assert error < bound / 30, (step, name, error, bound)
            assert spread < bound / 30, (step, name, spread, bound)
