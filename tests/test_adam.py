"""sylvie.train.adam.Adam computes what torch.optim.Adam computes, bit for bit, and their states load in each
other; building and stepping it does not import torch._dynamo (why it exists)."""
import copy
import subprocess
import sys

import pytest
import torch

from sylvie.train.adam import Adam

LR, WD = 0.01, 5e-4


def _model(dtype=torch.float32):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).to(dtype)


def _grads(model, step):
    """Gradients of a loss that changes with ``step``; the last layer's bias gets none on every third step."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(11, 7, generator=g, dtype=next(model.parameters()).dtype)
    loss = (model(x) ** 2).sum() * (1 + step % 5)
    loss.backward()
    if step % 3 == 2:
        model[2].bias.grad = None


def _train(model, opt, steps, start=0):
    for step in range(start, start + steps):
        opt.zero_grad()
        _grads(model, step)
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.unit
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weight_decay", [0.0, WD])
def test_the_same_bits_as_torch_adam(dtype, weight_decay):
    ours, theirs = _model(dtype), _model(dtype)
    a = _train(ours, Adam(ours.parameters(), lr=LR, weight_decay=weight_decay), 40)
    b = _train(theirs, torch.optim.Adam(theirs.parameters(), lr=LR, weight_decay=weight_decay), 40)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], _model(dtype)[0].weight)  # it moved


@pytest.mark.unit
@pytest.mark.parametrize("saved_by", ["ours", "torch"])
def test_a_state_saved_by_either_continues_in_the_other(saved_by):
    """10 steps, save, 10 more in the other optimiser: the weights of 20 steps straight."""
    straight = _model()
    expected = _train(straight, Adam(straight.parameters(), lr=LR, weight_decay=WD), 20)
    first, second = (Adam, torch.optim.Adam) if saved_by == "ours" else (torch.optim.Adam, Adam)
    model = _model()
    opt = first(model.parameters(), lr=LR, weight_decay=WD)
    _train(model, opt, 10)
    saved, weights = copy.deepcopy(opt.state_dict()), copy.deepcopy(model.state_dict())
    resumed = _model()
    resumed.load_state_dict(weights)
    opt = second(resumed.parameters(), lr=LR, weight_decay=WD)
    opt.load_state_dict(saved)
    got = _train(resumed, opt, 10, start=10)
    assert all(torch.equal(x, y) for x, y in zip(got, expected))


@pytest.mark.unit
def test_a_state_for_other_parameters_is_refused():
    model = _model()
    opt = Adam(model.parameters(), lr=LR)
    other = Adam(list(model.parameters())[:2], lr=LR)
    with pytest.raises(ValueError, match="for 2 parameters"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([], lr=LR)
    with pytest.raises(ValueError, match="invalid lr"):
        Adam(model.parameters(), lr=-1.0)


@pytest.mark.slow
def test_building_and_stepping_it_does_not_import_torch_dynamo():
    code = ("import sys, torch\n"
            "from sylvie.train.adam import Adam\n"
            "m = torch.nn.Linear(3, 2)\n"
            "opt = Adam(m.parameters(), lr=0.01, weight_decay=5e-4)\n"
            "m(torch.ones(4, 3)).sum().backward(); opt.step(); opt.zero_grad()\n"
            "opt.load_state_dict(opt.state_dict())\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
