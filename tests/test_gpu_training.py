"""Training and evaluation on a real GPU (`make gpu`), under torchrun: the process group a rank joins (nccl with a
GPU of its own, gloo when two ranks share the one GPU, as NCCL refuses two ranks on one device), partition-parallel
training steps on the GPU against the whole graph on the CPU in float64, every architecture trained full-graph and
sampled on 1 rank (nccl) and on 2 ranks sharing the GPU (gloo), and `sylvie train --device cuda` with `sylvie
evaluate` on the GPU predicting what whole-graph evaluation on the CPU predicts. On a synthetic graph (the GPU machine
has no DGL to read Cora with). The gpu tests are skipped where torch sees no CUDA device."""
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.commands import BIN, REPO, run, torchrun

from sylvie.atomic import read_jsonl
from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.models import build_model
from sylvie.models.blocks import whole_graph_block
from sylvie.models.registry import self_loop_edges
from sylvie.runtime.process_group import device_and_backend

ARCHS = ("gcn", "sage", "gat")
EPOCHS = 3
LAUNCH_TIMEOUT = 240  # seconds for one torchrun of the tier (make gpu bounds each test, and the whole tier, too)


@pytest.mark.unit
def test_ranks_sharing_a_gpu_join_through_gloo():
    """(use_cuda, local rank, local ranks, GPUs) -> (device, backend)."""
    assert device_and_backend(False, 0, 1, 0) == ("cpu", "gloo")
    assert device_and_backend(False, 3, 4, 2) == ("cpu", "gloo")
    assert device_and_backend(True, 0, 1, 1) == ("cuda:0", "nccl")
    assert device_and_backend(True, 1, 2, 2) == ("cuda:1", "nccl")  # a GPU each
    assert device_and_backend(True, 1, 2, 1) == ("cuda:0", "gloo")  # two ranks, one GPU
    assert device_and_backend(True, 0, 2, 1) == ("cuda:0", "gloo")
    assert device_and_backend(True, 3, 4, 2) == ("cuda:1", "gloo")  # four ranks, two GPUs
    assert device_and_backend(True, 1, 1, 1) == ("cuda:0", "gloo")  # no LOCAL_WORLD_SIZE: the rank tells


@pytest.fixture(scope="module")
def gpu_graph(tmp_path_factory):
    """A synthetic graph (2,000 nodes) and its METIS partitions into 1 and 2 parts."""
    from sylvie.data.registry import download
    from sylvie.partition.stage import partition_dataset

    base = tmp_path_factory.mktemp("gpu-training")
    download("synthetic", base / "graph", section("dataset", {"source": "synthetic", "nodes": 2000, "avg_degree": 10,
                                                              "features": 32, "classes": 6, "seed": 5}))
    for parts in (1, 2):
        partition_dataset(base / "graph", base / f"p{parts}", parts, "metis", 0, progress=False)
    return base


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("world, backend", [(1, "nccl"), (2, "gloo")])
def test_the_process_group_on_the_gpu(world, backend, tmp_path):
    p = torchrun(world, REPO / "tests" / "workers" / "gpu_process_group_worker.py", timeout=LAUNCH_TIMEOUT)
    ranks = sorted((json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")),
                   key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == list(range(world)), p.stdout + p.stderr
    for r in ranks:
        assert r["world"] == world and r["device"] == "cuda:0" and r["tensors_on"] == "cuda:0", r
        assert r["backend"] == backend and r["group_backend"] == backend, r
        assert r["all_to_all"] and r["background_all_to_all"] and r["sum"] == r["sum_expected"], r


def reference_steps(graph, settings: dict, states: list) -> tuple[list, list]:
    """Loss and gradients of our model on the whole graph, on the CPU in float64, from each of ``states``."""
    model_cfg = section("model", settings)
    model = build_model(model_cfg, graph.features.shape[1], graph.num_classes).double()
    block = whole_graph_block(graph.src, graph.dst, graph.num_nodes, self_loop_edges(model_cfg))
    x, y = torch.tensor(graph.features, dtype=torch.float64), torch.tensor(graph.labels)
    train = torch.from_numpy(np.flatnonzero(graph.train_mask))
    losses, grads = [], []
    for state in states:
        model.load_state_dict({k: v.double() for k, v in state.items()})
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(block, x)[train], y[train])
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    return losses, grads


@pytest.mark.slow
@pytest.mark.gpu
def test_two_ranks_on_one_gpu_train_as_the_whole_graph_on_the_cpu(gpu_graph, tmp_path):
    """Three steps of the full-graph trainer on 2 ranks sharing the GPU (gloo; halo rows through the real exchange,
    fp32), every architecture: the losses and gradients of whole-graph training in float64 on the CPU, from the same
    weights (rtol 1e-4, as tests/test_exactness.py holds the CPU ranks to DGL)."""
    models = {a: {"arch": a, "dropout": 0.0, "hidden": 16, "heads": 2, "self_loop": a != "sage"} for a in ARCHS}
    torchrun(2, REPO / "tests" / "workers" / "gpu_exactness_worker.py", gpu_graph / "p2", json.dumps(models),
             tmp_path, timeout=LAUNCH_TIMEOUT)
    graph = load_graph(gpu_graph / "graph")
    for arch, settings in models.items():
        ours = torch.load(tmp_path / f"{arch}.pt")
        assert (ours["device"], ours["backend"], ours["world"], ours["parameters_on"]) == ("cuda:0", "gloo", 2,
                                                                                          ["cuda"])
        ref_losses, ref_grads = reference_steps(graph, settings, ours["states"])
        torch.testing.assert_close(torch.tensor(ours["losses"], dtype=torch.float64),
                                   torch.tensor(ref_losses, dtype=torch.float64), rtol=1e-4, atol=0)
        for step, (g_ours, g_ref) in enumerate(zip(ours["grads"], ref_grads)):
            assert g_ours.keys() == g_ref.keys()
            for name in g_ref:
                scale = float(g_ref[name].abs().max())
                torch.testing.assert_close(g_ours[name].double(), g_ref[name], rtol=1e-4, atol=1e-4 * scale,
                                           msg=lambda m, step=step, name=name, arch=arch: f"{arch}, step {step}, "
                                                                                          f"{name}: {m}")


def jobs_for(world: int, base, root) -> dict:
    """Every architecture full-graph and sampled on ``world`` ranks on the GPU (2 ranks: 1-bit pipelined, 8-bit and
    fp32 halo rows; remote rows in 1 bit and fp32, cached or not; the feature store's device, zero-copy and staged
    host tiers), plus one setting without dropout trained on the GPU and on the CPU."""
    part = str(base / f"p{world}")
    common = {"partition": part, "seed": 0, "dataset": str(base / "graph")}
    train = {"epochs": EPOCHS, "device": "cuda", "progress": False, "checkpoint_every": 0, "log_every": 1}
    sampled = {**train, "mode": "sampled"}
    full_comm = {"gcn": {"bits": 1, "pipeline": True, "staleness": 2}, "sage": {"bits": 8}, "gat": {}}
    sampled_sections = {
        "gcn": {"sampling": {"fanouts": [5, 5], "batch_size": 128, "remote_bits": 1},
                "cache": {"policy": "none", "alpha": 0}, "features": {"gpu_fraction": 0.5, "zero_copy": "on"}},
        "sage": {"sampling": {"fanouts": [5, 5], "batch_size": 128},
                 "cache": {"policy": "degree", "alpha": 0.5}, "features": {"gpu_fraction": 0.5, "zero_copy": "auto"}},
        "gat": {"sampling": {"fanouts": [5, 5], "batch_size": 128, "prefetch": 0},
                "cache": {"policy": "none", "alpha": 0}, "features": {"gpu_fraction": 0.5, "zero_copy": "off"}},
    }
    if world == 1:  # no other rank's rows to cache
        sampled_sections["sage"]["cache"] = {"policy": "none", "alpha": 0}
    jobs = {}
    for arch in ARCHS:
        model = {"arch": arch, "hidden": 16, "heads": 2, "self_loop": arch != "sage"}
        jobs[f"{arch}-full"] = {**common, "model": model, "train": train,
                                "comm": full_comm[arch] if world > 1 else {}}
        jobs[f"{arch}-sampled"] = {**common, "model": model, "train": sampled, **sampled_sections[arch]}
    for device in ("cuda", "cpu"):
        jobs[f"sage-nodropout-{device}"] = {**common, "model": {"arch": "sage", "hidden": 16, "dropout": 0.0,
                                                                "self_loop": False},
                                            "train": {**train, "device": device}}
    return {name: {**job, "out": str(root / name)} for name, job in jobs.items()}


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("world", [1, 2])
def test_every_architecture_trains_full_graph_and_sampled_on_the_gpu(world, gpu_graph, tmp_path):
    """The runs of ``jobs_for`` one after another in one launch of the ranks (tests/workers/runs_worker.py, as
    `sylvie train` runs each, its own process group each time; rank 0 evaluates each model on the whole graph)."""
    jobs = jobs_for(world, gpu_graph, tmp_path)
    (tmp_path / "jobs.json").write_text(json.dumps(list(jobs.values())))
    torchrun(world, REPO / "tests" / "workers" / "runs_worker.py", tmp_path / "jobs.json", timeout=LAUNCH_TIMEOUT)
    for name, job in jobs.items():
        records = read_jsonl(tmp_path / name / "metrics.jsonl")
        assert [r["epoch"] for r in records] == list(range(EPOCHS)), name
        assert all(np.isfinite(r["loss"]) for r in records), name
        result = json.loads((tmp_path / name / "eval.json").read_text())
        assert all(0.0 <= result[k] <= 1.0 for k in ("train_acc", "val_acc", "test_acc")), name
        if job["train"].get("mode") == "sampled":  # half the rows on the device tier, half on the host
            assert all(r["store_device_bytes"] > 0 and r["store_host_bytes"] > 0 for r in records), name
    gpu, cpu = (read_jsonl(tmp_path / f"sage-nodropout-{d}" / "metrics.jsonl") for d in ("cuda", "cpu"))
    np.testing.assert_allclose([r["loss"] for r in gpu], [r["loss"] for r in cpu], rtol=1e-3)


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("world, flags", [
    (1, ["--mode", "sampled", "--arch", "sage", "--no-self-loop", "--fanouts", "5", "5", "--batch-size", "128",
         "--alpha", "0", "--gpu-fraction", "0.5", "--zero-copy", "on"]),
    (2, ["--arch", "gat", "--hidden", "8", "--heads", "2", "--bits", "1", "--pipeline", "--staleness", "2"]),
], ids=["1-rank-sampled-sage", "2-ranks-full-gat-1bit-pipelined"])
def test_sylvie_train_and_evaluate_on_the_gpu(world, flags, gpu_graph, tmp_path):
    """`sylvie train --device cuda` under torchrun, then `sylvie evaluate --partition` on the ranks (on the GPU: the
    device is auto), which predicts the class whole-graph evaluation on the CPU predicts for (almost) every node."""
    part, out = gpu_graph / f"p{world}", tmp_path / "run"
    torchrun(world, "--no-python", "sylvie", "train", "--partition", part, "--out", out, "--device", "cuda",
             "--epochs", EPOCHS, "--checkpoint-every", 0, "--no-progress", *flags, timeout=LAUNCH_TIMEOUT)
    assert len(read_jsonl(out / "metrics.jsonl")) == EPOCHS
    torchrun(world, "--no-python", "sylvie", "evaluate", "--partition", part, "--model", out / "model.pt", "--out",
             tmp_path / "parts.json", "--predictions", tmp_path / "parts.npy", timeout=LAUNCH_TIMEOUT)
    run([str(BIN / "sylvie"), "evaluate", "--dataset", str(gpu_graph / "graph"), "--model", str(out / "model.pt"),
         "--out", str(tmp_path / "whole.json"), "--predictions", str(tmp_path / "whole.npy")], timeout=LAUNCH_TIMEOUT)
    parts, whole = np.load(tmp_path / "parts.npy"), np.load(tmp_path / "whole.npy")
    assert parts.shape == whole.shape
    # fp32 sums in another order on the GPU may tip a near-tie between two classes: a few nodes, no more
    assert float((parts == whole).mean()) >= 0.99
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("parts", "whole"))
    for key in ("train_acc", "val_acc", "test_acc"):
        assert abs(a[key] - b[key]) <= 0.01, (key, a[key], b[key])
