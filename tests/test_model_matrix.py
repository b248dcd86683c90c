"""Every architecture the schema offers trains in every training mode and is evaluated both ways.

gcn, sage and gat x (full-graph synchronous on 1 and 2 parts, 1-bit pipelined, sampled without a cache and with a
VIP cache, remote rows in 1 bit), rgcn and rgat x the full-graph modes: two epochs on Cora, then whole-graph
evaluation in this process and partition-parallel evaluation on the ranks that trained, which must predict the same
class for every node. The
cells also spread the schema's other choices (bit widths, staleness policies, cache policies, remote row widths)
over the matrix, and a last test holds the schema to it: an enum value or switch of a training section that no cell
trains is a failure, unless it is listed below with the test that runs it instead.
"""
import json

import numpy as np
import pytest
from support.commands import REPO, ranks
from support.no_dgl import NoDGL

from sylvie.config import schema, section
from sylvie.evaluate import evaluate
from sylvie.evaluate.partitioned import evaluate_partitioned
from sylvie.sampling.vip_stage import write_vip
from sylvie.train.job import TrainingJob
from sylvie.train.run import run_training

ARCHS = ("gcn", "sage", "gat")
TYPED = ("rgcn", "rgat")  # full-graph modes only (sampled training of typed models is issue 56's); Cora is their
# one node type and one relation (tests/test_typed_exactness.py trains them on a typed graph)
EPOCHS = 2
# the mode of each cell and what else it trains; every cell runs on 2 parts except full-p1
MODES = {
    "full-p1": {},
    "full-p2": {},
    "full-p2-1bit-pipelined": {"comm": {"bits": 1, "pipeline": True, "staleness": 2}},
    "sampled-nocache": {"train": {"mode": "sampled"}, "cache": {"policy": "none", "alpha": 0}},
    "sampled-vip": {"train": {"mode": "sampled"}, "cache": {"policy": "vip", "alpha": 0.5}},
    "sampled-remote-1bit": {"train": {"mode": "sampled"}, "sampling": {"remote_bits": 1},
                            "cache": {"policy": "none", "alpha": 0}},
}
# the schema's other values, spread over the cells: (arch, mode) -> more overrides
MORE = {
    ("gcn", "full-p2"): {"comm": {"bits": 2}, "model": {"self_loop": False}},
    ("sage", "full-p2"): {"comm": {"bits": 4, "pipeline": True, "staleness_policy": "adaptive", "smoothing": 0.5}},
    ("gat", "full-p2"): {"comm": {"bits": 8}, "train": {"device": "cpu", "progress": False}},
    ("gcn", "sampled-vip"): {"cache": {"policy": "degree"}, "sampling": {"remote_bits": 16, "prefetch": 0}},
    ("sage", "sampled-vip"): {"cache": {"policy": "simulation"}, "sampling": {"remote_bits": 2},
                              "features": {"zero_copy": "off"}},
    ("gcn", "sampled-remote-1bit"): {"cache": {"policy": "halo", "alpha": 0.3}, "sampling": {"remote_bits": 4}},
    ("sage", "sampled-remote-1bit"): {"cache": {"policy": "random", "alpha": 0.3}, "sampling": {"remote_bits": 8}},
    ("rgcn", "full-p2"): {"model": {"num_bases": 1}},
    # the feature gradients' own width (comm.gradient_bits; 0, comm.bits', everywhere else)
    ("gcn", "full-p2-1bit-pipelined"): {"comm": {"gradient_bits": 4}},
    ("sage", "full-p2-1bit-pipelined"): {"comm": {"gradient_bits": 2}},
    ("gat", "full-p2-1bit-pipelined"): {"comm": {"gradient_bits": 8}},
    ("rgcn", "full-p2-1bit-pipelined"): {"comm": {"gradient_bits": 32}},
    ("rgat", "full-p2-1bit-pipelined"): {"comm": {"gradient_bits": 1}},
}
# values no cell can train here, and where they are run instead
ELSEWHERE = {
    ("train", "device", "cuda"): "needs a GPU (make gpu); device cpu and auto train here",
    ("features", "zero_copy", "on"): "needs a GPU; refused without one in test_sampled_training.py",
    ("train", "tensorboard", True): "tests/test_tensorboard.py reads the scalars it writes; "
                                    "tests/test_core_install.py trains with it where TensorBoard is not installed",
    ("train", "task", "link"): "link prediction trains on a graph with an edge split: tests/test_link_training.py",
    **{("link", knob, value): "tests/test_link_training.py trains every link setting"
       for knob, values in (("decoder", ("dot", "mlp", "distmult")), ("loss", ("bce", "contrastive")),
                            ("negative_sampler", ("uniform", "local", "joint")), ("pair_bits", (1, 2, 4, 8, 32)))
       for value in values},
}


def cell_config(arch: str, mode: str) -> dict:
    cfg = {"model": {"arch": arch, "hidden": 8, "heads": 2},
           "train": {"epochs": EPOCHS, "checkpoint_every": 0},
           "sampling": {"fanouts": [5, 5], "batch_size": 64}}
    for extra in (MODES[mode], MORE.get((arch, mode), {})):
        for sec, values in extra.items():
            cfg[sec] = {**cfg.get(sec, {}), **values}
    return cfg


CELLS = {f"{arch}-{mode}": cell_config(arch, mode) for arch in ARCHS for mode in MODES}
CELLS.update({f"{arch}-{mode}": cell_config(arch, mode) for arch in TYPED for mode in MODES if mode.startswith("full")})


@pytest.fixture(scope="module")
def matrix(cora_dir, cora_partitions, tmp_path_factory):
    """Every cell trained and evaluated partition-parallel (one torchrun of 2 ranks for all 2-part cells; the
    1-part cells in this process), then evaluated on the whole graph here."""
    root = tmp_path_factory.mktemp("matrix")
    vip = root / "vip"
    write_vip(cora_partitions[2], vip, section("sampling", CELLS["gcn-sampled-vip"]["sampling"]), progress=False)
    two = {n: c for n, c in CELLS.items() if not n.endswith("full-p1")}
    no_dgl = NoDGL(root / "no-dgl")  # the ranks train every 2-part cell, full-graph and sampled, without DGL
    ranks(2, REPO / "tests" / "workers" / "matrix_worker.py", cora_partitions[2], vip, root, json.dumps(two),
             env=no_dgl.env)
    no_dgl.assert_sylvie_never_asked(2)
    for name in set(CELLS) - set(two):
        c = CELLS[name]
        run_training(TrainingJob(cora_partitions[1], root / name, section("model", c["model"]),
                                 section("train", c["train"]), section("comm"), 0))
        evaluate_partitioned(cora_partitions[1], root / name / "model.pt", root / name / "parts.json",
                             root / name / "parts.npy")
    for name in CELLS:
        evaluate(cora_dir, root / name / "model.pt", root / name / "whole.json", root / name / "whole.npy")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CELLS))
def test_every_model_trains_in_every_mode(name, matrix):
    run = matrix / name
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == EPOCHS
    assert all(np.isfinite(m["loss"]) for m in metrics)
    whole, parts = json.loads((run / "whole.json").read_text()), json.loads((run / "parts.json").read_text())
    assert whole["model"]["arch"] == CELLS[name]["model"]["arch"]
    assert whole["train"]["mode"] == CELLS[name]["train"].get("mode", "full")
    # partition-parallel inference predicts what whole-graph inference does, node for node
    assert np.array_equal(np.load(run / "whole.npy"), np.load(run / "parts.npy"))
    for key in ("train_acc", "val_acc", "test_acc"):
        assert whole[key] == parts[key] and 0.0 <= whole[key] <= 1.0


def _offered(sec: str) -> list[tuple]:
    """(section, knob, value) for every enum value and both values of every switch of a run section."""
    props = schema()["$defs"][sec]["properties"]
    out = []
    for knob, spec in props.items():
        values = spec.get("enum") or ([False, True] if spec.get("type") == "boolean" else [])
        out += [(sec, knob, v) for v in values]
    return out


@pytest.mark.unit
def test_the_matrix_trains_every_value_the_schema_offers():
    trained = set()
    sections = ("model", "train", "comm", "sampling", "cache", "features", "link")
    for cfg in CELLS.values():
        for sec in sections:
            full = section(sec, cfg.get(sec))
            trained |= {(sec, k, v) for k, v in vars(full).items() if not isinstance(v, (list, dict))}
    missing = [o for sec in sections for o in _offered(sec) if o not in trained and o not in ELSEWHERE]
    assert not missing, f"schema values no test trains: {missing}"
