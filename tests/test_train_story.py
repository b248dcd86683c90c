"""The training story is short: from `sylvie train` (``cli.main``) to the optimiser's step, four calls of ours, the
same for either trainer (``sylvie.train.protocol``): main, the train handler (the run, ``TrainingRun``, and its
epochs), ``Trainer.epoch``, ``Trainer.train_step``, which takes the step. Counted from a real stack: the optimiser's
step records the frames of ``sylvie/`` that led to it."""
import traceback
from pathlib import Path

import pytest

import sylvie
from sylvie.atomic import read_jsonl
from sylvie.cli import main
from sylvie.train.optimiser import Optimiser
from sylvie.train.protocol import Trainer

pytestmark = pytest.mark.unit

PACKAGE = Path(sylvie.__file__).parent
STORY = ["main", "_train", "epoch", "train_step"]
MODES = {"full": [], "sampled": ["--mode", "sampled", "--arch", "sage", "--no-self-loop", "--fanouts", "5", "5",
                                 "--batch-size", "512", "--policy", "none"]}


def _ours_from_main(stack: traceback.StackSummary) -> list[traceback.FrameSummary]:
    ours = [f for f in stack if Path(f.filename).resolve().is_relative_to(PACKAGE.resolve())]
    first = next(i for i, f in enumerate(ours) if f.name == "main" and f.filename.endswith("cli.py"))
    return ours[first:]


@pytest.mark.parametrize("mode", MODES)
def test_the_optimisers_step_is_four_calls_of_ours_from_sylvie_train(mode, cora_partitions, tmp_path, monkeypatch):
    stacks, step = [], Optimiser.step

    def recorded(self):
        stacks.append(_ours_from_main(traceback.extract_stack()[:-1]))
        step(self)

    monkeypatch.setattr(Optimiser, "step", recorded)
    out = tmp_path / "run"
    assert main(["train", "--partition", str(cora_partitions[1]), "--out", str(out), "--epochs", "2", "--hidden", "8",
                 "--no-progress", "--seed", "0", *MODES[mode]]) == 0
    assert len(read_jsonl(out / "metrics.jsonl")) == 2 and (out / "model.pt").exists()
    assert stacks and all([f.name for f in frames] == STORY for frames in stacks), \
        "".join(traceback.format_list(stacks[0]))
    trainer = {"full": "fullgraph_trainer.py", "sampled": "sampled_trainer.py"}[mode]
    assert all(Path(f.filename).name == trainer for frames in stacks for f in frames[2:])


def test_both_trainers_implement_the_protocol():
    """Every method of the protocol, with its parameters (the trainers may add defaults)."""
    import inspect

    from sylvie.train.fullgraph_trainer import FullGraphTrainer
    from sylvie.train.sampled_trainer import SampledTrainer

    wanted = {name: list(inspect.signature(f).parameters) for name, f in vars(Trainer).items()
              if inspect.isfunction(f) and not name.startswith("_")}
    assert "train_step" in wanted and "epoch" in wanted
    for cls in (FullGraphTrainer, SampledTrainer):
        for name, params in wanted.items():
            assert list(inspect.signature(getattr(cls, name)).parameters) == params, (cls.__name__, name)
