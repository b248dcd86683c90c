"""What `pip install .` installs is what training needs: partition, train (full-graph and sampled, with TensorBoard
asked for) and evaluate run on Cora with every extra's packages unimportable (Snakemake and its Slurm plugin,
matplotlib, ogb, pandas, numba-cuda, TensorBoard, DGL), as in an environment where only the core was installed; and
pyproject.toml's core dependencies name none of them (each is in its extra, which `make install` installs)."""
import re
import sys

import pytest
from support.commands import BIN, REPO
from support.no_dgl import NoDGL

from sylvie.atomic import read_jsonl

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SYLVIE = str(BIN / "sylvie")
EXTRAS = {"workflow": ("snakemake",), "report": ("matplotlib",), "ogb": ("ogb", "pandas"), "cuda": ("numba_cuda",),
          "tensorboard": ("tensorboard",), "dgl": ("dgl",)}
REFUSED = tuple(m for modules in EXTRAS.values() for m in modules)


@pytest.mark.unit
def test_extras_are_not_core_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for extra in EXTRAS:
        assert extra in project["optional-dependencies"], extra
    for package in ("snakemake", "matplotlib", "ogb", "pandas", "numba-cuda", "tensorboard", "dgl"):
        assert package not in core, package
    assert (REPO / "sylvie" / "py.typed").is_file()
    installed = re.search(r"pip install -q -e '\.\[([^\]]*)\]'", (REPO / "Makefile").read_text()).group(1).split(",")
    everything = re.fullmatch(r"sylvie\[(.*)\]", project["optional-dependencies"]["all"][0]).group(1).split(",")
    assert {"all", "test", "dgl"} <= set(installed) and set(EXTRAS) - {"dgl"} <= set(everything)


@pytest.mark.slow
def test_training_needs_no_extra(cora_dir, tmp_path):
    core = NoDGL(tmp_path / "hook", refused=REFUSED)

    def ok(stage: str, cmd: list, ranks: int = 1):
        """``cmd`` succeeds with the extras refused in every one of its ``ranks`` processes (a library's optional
        import, pyarrow's of pandas, may be refused on the way: it does without)."""
        p = core.run(cmd)
        assert p.returncode == 0, f"sylvie {stage}, the core alone: exit {p.returncode}\n{p.stderr[-3000:]}"
        missing = core.not_in_every_rank(stage, ranks)
        assert missing is None, missing
        return p

    part, out = tmp_path / "p2", tmp_path / "run"
    ok("partition", [SYLVIE, "partition", cora_dir, "--out", part, "--parts", 2])
    p = ok("train", [SYLVIE, "launch", "--ranks", 2, "--", "sylvie", "train", "--partition", part, "--out", out,
                     "--epochs", 3, "--tensorboard", "--no-progress"], 2)
    assert p.stderr.count("TensorBoard is not installed") == 1, p.stderr[-2000:]  # said once, by rank 0
    assert len(read_jsonl(out / "metrics.jsonl")) == 3 and not (out / "tensorboard").exists()
    ok("train", [SYLVIE, "launch", "--ranks", 2, "--", "sylvie", "train", "--partition", part, "--out",
                 tmp_path / "sampled", "--mode", "sampled", "--fanouts", 5, 5, "--batch-size", 64, "--alpha", 0,
                 "--epochs", 2, "--no-progress"], 2)
    ok("evaluate", [SYLVIE, "evaluate", "--dataset", cora_dir, "--model", out / "model.pt", "--out",
                    tmp_path / "eval.json"])
