"""The trainers' optimiser and lr schedule come from torch.optim by the config's names: each optimiser and schedule
the docs name trains, the schedule follows its closed form, a state saved mid-schedule continues exactly, and a
wrong name or argument is refused naming its knob."""
import argparse
import io
import math

import pytest
import torch
import torch.nn.functional as F

from sylvie.config import add_section_arguments, cli_arguments, section, section_from_args
from sylvie.errors import SylvieError
from sylvie.train.checkpoint import run_identity
from sylvie.train.optimiser import Optimiser, check_optimiser

EPOCHS = 12
SETTINGS = {
    "Adam (default)": {},
    "AdamW, cosine, warm-up": {"optimizer": "AdamW", "lr": 0.05, "weight_decay": 0.01,
                               "lr_schedule": "CosineAnnealingLR", "warmup_epochs": 3},
    "SGD, momentum, StepLR": {"optimizer": "SGD", "lr": 0.5, "optimizer_args": {"momentum": 0.9, "nesterov": True},
                              "lr_schedule": "StepLR", "lr_schedule_args": {"step_size": 4, "gamma": 0.5}},
    "Adam, warm-up alone": {"warmup_epochs": 4, "warmup_start_factor": 0.25},
    "RMSprop, ExponentialLR": {"optimizer": "RMSprop", "lr": 0.005, "lr_schedule": "ExponentialLR",
                               "lr_schedule_args": {"gamma": 0.9}},
}


def _problem():
    """A linearly separable 3-class problem and a small MLP (seeded)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=g)
    y = (x[:, 0] > 0.3).long() + (x[:, 1] > 0).long()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    return model, x, y


def _epochs(model, opt, x, y, epochs, steps=8):
    """``epochs`` epochs of ``steps`` steps; each epoch's lr and last loss."""
    out = []
    for _ in range(epochs):
        lr = opt.lr
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        opt.end_epoch()
        out.append((lr, float(loss.detach())))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_each_setting_trains(name):
    train = section("train", {"epochs": EPOCHS, **SETTINGS[name]})
    model, x, y = _problem()
    opt = Optimiser(model.parameters(), train)
    assert type(opt.optimizer).__name__ == train.optimizer
    history = _epochs(model, opt, x, y, EPOCHS)
    assert history[-1][1] < 0.6 * history[0][1], history


@pytest.mark.unit
def test_default_is_torch_adam_with_torchs_defaults_but_lr():
    """Adam at lr 0.01, and torch.optim's own defaults otherwise: no weight decay, from a config and from the command
    line alike (one default: the schema's)."""
    opt = Optimiser(_problem()[0].parameters(), section("train"))
    assert isinstance(opt.optimizer, torch.optim.Adam) and opt.schedule is None
    group = opt.optimizer.param_groups[0]
    assert (group["lr"], group["weight_decay"], group["betas"], group["eps"]) == (0.01, 0.0, (0.9, 0.999), 1e-8)
    parser = argparse.ArgumentParser()
    add_section_arguments(parser, "train")
    assert section_from_args(parser.parse_args([]), "train").weight_decay == section("train").weight_decay == 0.0


@pytest.mark.unit
def test_cosine_with_warm_up_follows_its_closed_form():
    lr, warmup, factor = 0.02, 3, 0.1
    train = section("train", {"epochs": EPOCHS, "lr": lr, "optimizer": "AdamW", "lr_schedule": "CosineAnnealingLR",
                              "lr_schedule_args": {"eta_min": 0.001}, "warmup_epochs": warmup,
                              "warmup_start_factor": factor})
    model, x, y = _problem()
    got = [lr for lr, _ in _epochs(model, Optimiser(model.parameters(), train), x, y, EPOCHS, steps=1)]
    span = EPOCHS - warmup  # T_max defaults to the epochs after the warm-up
    want = [lr * (factor + (1 - factor) * e / warmup) for e in range(warmup)] + \
        [0.001 + (lr - 0.001) * (1 + math.cos(math.pi * k / span)) / 2 for k in range(span)]
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["AdamW, cosine, warm-up", "SGD, momentum, StepLR"])
def test_state_saved_mid_schedule_continues_exactly(name):
    train = section("train", {"epochs": EPOCHS, **SETTINGS[name]})
    model, x, y = _problem()
    straight = _epochs(model, Optimiser(model.parameters(), train), x, y, EPOCHS)

    first, x, y = _problem()
    opt = Optimiser(first.parameters(), train)
    before = _epochs(first, opt, x, y, 2)  # stopped inside the warm-up / before the first step of StepLR
    buffer = io.BytesIO()
    torch.save({"model": first.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)  # as checkpoints are read
    resumed, _, _ = _problem()
    resumed.load_state_dict(saved["model"])
    again = Optimiser(resumed.parameters(), train)
    again.load_state_dict(saved["optimizer"])
    after = _epochs(resumed, again, x, y, EPOCHS - 2)
    assert before + after == straight  # every lr and loss, bit for bit
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), resumed.parameters()))


@pytest.mark.unit
def test_a_checkpoint_of_before_schedules_loads():
    """Checkpoints written before this module hold torch.optim.Adam's state itself (our Adam wrote its layout)."""
    model, x, y = _problem()
    adam = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0005)
    for _ in range(3):
        adam.zero_grad()
        F.cross_entropy(model(x), y).backward()
        adam.step()
    opt = Optimiser(model.parameters(), section("train"))
    opt.load_state_dict(adam.state_dict())
    assert torch.equal(opt.optimizer.state_dict()["state"][0]["exp_avg"], adam.state_dict()["state"][0]["exp_avg"])


@pytest.mark.parametrize("values, knob", [
    ({"optimizer": "Adamm"}, "train.optimizer 'Adamm': not an optimiser of torch.optim"),
    ({"optimizer": "Optimizer"}, "train.optimizer 'Optimizer'"),
    ({"optimizer": "SGD", "optimizer_args": {"betas": [0.9, 0.99]}}, "train.optimizer_args"),
    ({"optimizer_args": {"betas": [0.9, 2.0]}}, "train.optimizer_args"),
    ({"optimizer": "Rprop", "weight_decay": 0.01}, "train.weight_decay 0.01: train.optimizer Rprop takes no weight"),
    ({"optimizer": "Rprop", "optimizer_args": {"weight_decay": 0.1}},
     "train.optimizer_args' weight_decay 0.1: train.optimizer Rprop takes no weight"),
    ({"lr_schedule": "Cosine"}, "train.lr_schedule 'Cosine': not a schedule"),
    ({"lr_schedule": "ReduceLROnPlateau"}, "train.lr_schedule 'ReduceLROnPlateau'"),
    ({"lr_schedule": "StepLR"}, "train.lr_schedule_args"),  # step_size is required
    ({"lr_schedule": "StepLR", "lr_schedule_args": {"step": 3}}, "train.lr_schedule_args"),
])
@pytest.mark.unit
def test_bad_settings_name_their_knob(values, knob):
    with pytest.raises(SylvieError, match=knob.replace("(", r"\(").replace(")", r"\)")):
        check_optimiser(section("train", values))


@pytest.mark.parametrize(("knob", "name", "why"), [
    ("lr_schedule", "_LRScheduler", "not a schedule"), ("lr_schedule", "LRScheduler", "not a schedule"),
    ("lr_schedule", "LambdaLR", "a Python function"), ("lr_schedule", "MultiplicativeLR", "a Python function"),
    ("lr_schedule", "SequentialLR", "schedule objects"), ("lr_schedule", "ChainedScheduler", "schedule objects"),
    ("lr_schedule", "ReduceLROnPlateau", "steps on a metric"),
    ("optimizer", "LBFGS", "closure"), ("optimizer", "SparseAdam", "sparse gradients"), ("optimizer", "Muon", "2-D"),
])
@pytest.mark.slow
def test_the_choices_offered_are_what_a_config_can_build(knob, name, why):
    """A class torch has but a config cannot build (or the trainers cannot step) is refused saying why, and no
    refusal offers it; every choice offered builds and steps from a config."""
    with pytest.raises(SylvieError) as e:
        check_optimiser(section("train", {knob: name}))
    line = str(e.value)
    assert line.startswith(f"train.{knob} {name!r}: ") and why in line, line
    offered = line.split("choose one of ")[1].split(", ")
    assert name not in offered and not any(o.startswith("_") for o in offered)
    for choice in offered:  # each builds and takes an epoch's step on a model with biases
        args = {"OneCycleLR": {"max_lr": 0.1, "total_steps": 10}, "CyclicLR": {"base_lr": 0.001, "max_lr": 0.1},
                "StepLR": {"step_size": 2}, "MultiStepLR": {"milestones": [2]}, "ExponentialLR": {"gamma": 0.9},
                "CosineAnnealingWarmRestarts": {"T_0": 2}}.get(choice, {})
        train = section("train", {knob: choice, **({"lr_schedule_args": args} if knob == "lr_schedule" else {})})
        check_optimiser(train)
        model, x, y = _problem()
        _epochs(model, Optimiser(model.parameters(), train), x, y, 2, steps=1)


@pytest.mark.unit
def test_object_knobs_round_trip_through_flags():
    from sylvie.cli import build_parser
    from sylvie.config import section_from_args

    values = {"optimizer": "SGD", "optimizer_args": {"momentum": 0.9, "nesterov": True}, "lr_schedule": "StepLR",
              "lr_schedule_args": {"step_size": 4}, "warmup_epochs": 2}
    flags = cli_arguments("train", values)
    assert "--optimizer-args '{\"momentum\": 0.9, \"nesterov\": true}'" in flags
    import shlex
    args = build_parser().parse_args(["train", "--partition", "p", "--out", "o", *shlex.split(flags)])
    got = section_from_args(args, "train", skip=("seeds",))
    assert {k: getattr(got, k) for k in values} == values


@pytest.mark.unit
def test_bad_json_flag_is_refused(capsys):
    from sylvie.cli import build_parser

    for text in ("{momentum: 0.9}", "[1, 2]"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["train", "--partition", "p", "--out", "o", "--optimizer-args", text])
        assert "--optimizer-args" in capsys.readouterr().err


@pytest.mark.unit
def test_identity_keeps_checkpoints_from_before_the_typed_model_knobs():
    manifest = {"dataset_fingerprint": "f", "num_parts": 2, "parts": [{"sha256": "a"}, {"sha256": "b"}]}
    model = vars(section("model"))
    ident = run_identity(model, {}, {}, manifest)
    assert "model.num_bases" not in ident and "model.embedding_width" not in ident and "model.arch" in ident
    assert run_identity({**model, "num_bases": 2}, {}, {}, manifest)["model.num_bases"] == 2


@pytest.mark.unit
def test_identity_keeps_old_checkpoints_and_follows_the_schedule_length():
    manifest = {"dataset_fingerprint": "f", "num_parts": 2, "parts": [{"sha256": "a"}, {"sha256": "b"}]}
    default = {k: v for k, v in vars(section("train")).items() if k != "seeds"}
    ident = run_identity({}, default, {}, manifest)
    assert not any(k.startswith(("train.optim", "train.lr_sched", "train.warmup")) for k in ident)  # as before
    cosine = run_identity({}, {**default, "lr_schedule": "CosineAnnealingLR"}, {}, manifest)
    assert cosine["train.epochs"] == default["epochs"]  # the schedule's length is the run's
    fixed = run_identity({}, {**default, "lr_schedule": "CosineAnnealingLR", "lr_schedule_args": {"T_max": 50}}, {},
                         manifest)
    assert "train.epochs" not in fixed
