"""Every stage after download runs with DGL unimportable (issue 41): `sylvie partition`, `vip`, `train` (full-graph
at 1, 2 and 4 ranks, and sampled; GCN, GraphSAGE and GAT), `evaluate` (whole graph and partition-parallel) and
`report` on Cora, each as a subprocess in which `import dgl` fails as if DGL were not installed.

The refusal is an import hook in a sitecustomize.py, in a folder put first on PYTHONPATH: every Python started with
that environment loads it (`sylvie launch`, torchrun, every rank), puts a finder first on sys.meta_path that raises
ModuleNotFoundError for `dgl` and `dgl.*`, and runs the sitecustomize it shadows, if there is one. It logs each
process it is loaded in and each import it refuses, with the file and line that asked; so a stage fails here if
sylvie's own code tries to import DGL at all (even where it would catch the ImportError), and the log shows that the
hook reached every rank. DGL stays the tests' reference only: `sylvie download` of a Planetoid dataset reads its files
with our own reader, also with DGL refused (tests/test_planetoid_without_dgl.py).
"""
import importlib.util
import sys

import numpy as np
import pytest
from support.commands import BIN
from support.no_dgl import NoDGL

from sylvie.atomic import read_jsonl
from sylvie.formats.eval_result import read_eval_result
from sylvie.formats.partition_manifest import read_manifest
from sylvie.formats.predictions import read_predictions

pytestmark = pytest.mark.slow

SYLVIE = str(BIN / "sylvie")
@pytest.fixture(scope="module")
def no_dgl(tmp_path_factory):
    return NoDGL(tmp_path_factory.mktemp("no-dgl"))


def launch(ranks: int, stage: str, *args) -> list:
    return [SYLVIE, "launch", "--ranks", ranks, "--", "sylvie", stage, *args]


def train(no_dgl, partition, out, ranks, *flags) -> list[dict]:
    """`sylvie train` at ``ranks`` ranks under the hook; its epoch records."""
    no_dgl.stage(launch(ranks, "train", "--partition", partition, "--out", out, "--seed", 0, "--no-progress",
                        "--log-every", 1, *flags), "train", ranks)
    records = read_jsonl(out / "metrics.jsonl")
    assert (out / "model.pt").is_file() and records
    assert all(np.isfinite(r["loss"]) for r in records)
    return records


@pytest.fixture(scope="module")
def partition2(no_dgl, cora_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("no-dgl-partition") / "metis-p2"
    no_dgl.stage([SYLVIE, "partition", cora_dir, "--out", out, "--parts", 2, "--method", "metis"], "partition")
    return out


@pytest.fixture(scope="module")
def vip2(no_dgl, partition2, tmp_path_factory):
    out = tmp_path_factory.mktemp("no-dgl-vip") / "f10-10-b16"
    no_dgl.stage([SYLVIE, "vip", partition2, "--out", out, "--fanouts", 10, 10, "--batch-size", 16, "--no-progress"],
                 "vip")
    return out


@pytest.fixture(scope="module")
def sage2(no_dgl, partition2, tmp_path_factory):
    """GraphSAGE, full-graph, 2 ranks: the model the evaluation and report tests read."""
    out = tmp_path_factory.mktemp("no-dgl-runs") / "sage-p2"
    records = train(no_dgl, partition2, out, 2, "--arch", "sage", "--epochs", 20)
    assert len(records) == 20 and records[-1]["loss"] < records[0]["loss"]
    return out


def test_the_hook_refuses_dgl_and_nothing_else(no_dgl):
    """The negative control: DGL is installed here (the tests' reference), yet under the hook `import dgl` fails,
    naming the hook, and so does a submodule's import; `import sylvie.cli` (torch, numba, pyarrow, ...) still works."""
    assert importlib.util.find_spec("dgl") is not None, "DGL is not installed: the control would prove nothing"
    p = no_dgl.run([sys.executable, "-c", "import dgl"])
    assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr and "refused by the import hook" in p.stderr
    assert [(e["module"], e["by"]) for e in no_dgl.events() if e["event"] == "refused"] == [("dgl", "<string>:1")]
    p = no_dgl.run([sys.executable, "-c", "import sys, sylvie.cli\nassert 'dgl' not in sys.modules\n"
                    "try:\n    import dgl.nn\nexcept ModuleNotFoundError as e:\n    print(e.name)"])
    assert p.returncode == 0 and p.stdout.split() == ["dgl"], p.stderr


def test_partition_and_vip(partition2, vip2):
    assert read_manifest(partition2)["num_parts"] == 2
    assert sorted(f.name for f in vip2.glob("vip-*.npy")) == ["vip-0.npy", "vip-1.npy"]


@pytest.mark.parametrize("arch,ranks,epochs", [("gcn", 1, 5), ("gat", 4, 3)])
def test_full_graph_training(no_dgl, cora_partitions, tmp_path, arch, ranks, epochs):
    records = train(no_dgl, cora_partitions[ranks], tmp_path / "run", ranks, "--arch", arch, "--epochs", epochs)
    assert len(records) == epochs and records[-1]["loss"] < records[0]["loss"]


def test_sampled_training(no_dgl, partition2, vip2, tmp_path):
    """GAT at 2 ranks on sampled minibatches (our sampler), a VIP cache of 0.05 x N / P rows, the other remote rows
    fetched in 1 bit."""
    records = train(no_dgl, partition2, tmp_path / "run", 2, "--mode", "sampled", "--arch", "gat", "--fanouts", 10,
                    10, "--batch-size", 16, "--vip", vip2, "--alpha", 0.05, "--remote-bits", 1, "--epochs", 4)
    assert len(records) == 4 and sum(r["rows_remote"] for r in records) > 0
    assert sum(r["rows_cached"] for r in records) > 0


def test_evaluation_whole_and_partitioned_then_report(no_dgl, cora_dir, partition2, sage2, tmp_path):
    """The 2-rank GraphSAGE model evaluated on the whole graph (one process) and partition-parallel (2 ranks): the
    same predictions; then the report of that run."""
    model = sage2 / "model.pt"
    no_dgl.stage([SYLVIE, "evaluate", "--dataset", cora_dir, "--model", model, "--out", sage2 / "eval.json",
                  "--predictions", tmp_path / "whole.npy"], "evaluate")
    no_dgl.stage(launch(2, "evaluate", "--partition", partition2, "--model", model, "--out", tmp_path / "parts.json",
                        "--predictions", tmp_path / "parts.npy"), "evaluate", 2)
    whole, parts = read_predictions(tmp_path / "whole.npy"), read_predictions(tmp_path / "parts.npy")
    assert whole.shape == (2708,) and np.array_equal(whole, parts)
    accuracies = read_eval_result(sage2 / "eval.json").accuracies
    assert accuracies == read_eval_result(tmp_path / "parts.json").accuracies
    assert accuracies["test"] > 0.4  # the most common class is 31.9% of Cora's test nodes
    no_dgl.stage([SYLVIE, "report", sage2, "--out", tmp_path / "report", "--title", "without DGL"], "report")
    assert "without DGL" in (tmp_path / "report" / "report.html").read_text()
