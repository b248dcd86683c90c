"""The CPU dropout kernel draws an unbiased, repeatable mask without keeping it (what its speed is:
benchmarks/floor.py). The message-passing kernels: tests/test_message_passing.py."""
import numpy as np
import pytest
import torch

from sylvie.models import dropout_cpu
from sylvie.models.dropout import Dropout, drop_into

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_the_cpu_mask_drops_a_share_p_independently_per_element(p):
    n, d = 20_000, 64  # over PARALLEL_MIN_ELEMENTS: the parallel kernel where numba has more than one thread
    x = torch.ones(n, d)
    out = drop_into(x, torch.empty_like(x), p, seed=123)
    dropped = out == 0
    assert abs(dropped.double().mean().item() - p) < 0.005
    per_column = dropped.double().mean(0)
    assert (per_column - p).abs().max() < 0.02  # no column (feature) favoured
    both = (dropped[:, :-1] & dropped[:, 1:]).double().mean().item()  # neighbours in a row: independent
    assert abs(both - p * p) < 0.005
    below = (dropped[:-1] & dropped[1:]).double().mean().item()  # the same feature of consecutive rows
    assert abs(below - p * p) < 0.005
    torch.testing.assert_close(out[~dropped], torch.full_like(out[~dropped], 1 / (1 - p)))


def test_the_cpu_mask_is_a_function_of_the_seed_alone():
    x = torch.randn(300_001)  # odd, over a parallel chunk boundary
    a = drop_into(x, torch.empty_like(x), 0.5, seed=7)
    assert torch.equal(a, drop_into(x, torch.empty_like(x), 0.5, seed=7))
    assert not torch.equal(a == 0, drop_into(x, torch.empty_like(x), 0.5, seed=8) == 0)
    # in place, in float64, serial or parallel, in pieces of other sizes: the same mask
    y = x.clone()
    assert torch.equal(drop_into(y, y, 0.5, seed=7), a)
    assert torch.equal(drop_into(x.double(), torch.empty_like(x, dtype=torch.float64), 0.5, seed=7) == 0, a == 0)
    args = (dropout_cpu._key(7, 0), dropout_cpu.threshold(0.5), np.float32(2.0), np.float32(0.0))
    serial, parallel = np.empty_like(x.numpy()), np.empty_like(x.numpy())
    dropout_cpu._drop_serial(x.numpy(), serial, *args, 0)
    dropout_cpu._drop_parallel(x.numpy(), parallel, *args, 0)
    assert np.array_equal(serial, a.numpy()) and np.array_equal(parallel, a.numpy())
    for in_place in (dropout_cpu._drop_in_place_serial, dropout_cpu._drop_in_place_parallel):
        y = x.numpy().copy()
        in_place(y, *args, 0)
        assert np.array_equal(y, a.numpy())


def test_the_cpu_kernel_zeroes_dropped_non_finite_elements_as_masked_fill_does():
    x = torch.full((10_000,), float("nan"))
    out = drop_into(x, torch.empty_like(x), 0.5, seed=1)
    assert 0.4 < (out == 0).double().mean().item() < 0.6
    assert torch.isnan(out[out != 0]).all()


def test_dropout_on_the_cpu_repeats_its_mask_in_the_backward_at_any_size():
    torch.manual_seed(3)
    drop = Dropout(0.5)
    head = torch.randn(1000, 64, requires_grad=True)
    rows = torch.randn(5000, 64, requires_grad=True)  # 320K elements: the parallel kernel
    out = drop.after(head, rows)
    out.backward(torch.ones_like(out))
    kept = out[1000:] != 0
    torch.testing.assert_close(rows.grad, 2.0 * kept)
    torch.testing.assert_close(head.grad, torch.ones_like(head))


def test_dropout_of_a_concatenation_is_one_mask_over_it_and_its_gradient_the_same_mask():
    drop = Dropout(0.5)
    head = torch.randn(3000, 64, requires_grad=True)  # pieces not on a chunk boundary of the kernel
    rows = torch.randn(5001, 64, requires_grad=True)
    torch.manual_seed(1)
    out = drop.cat(head, rows)
    torch.manual_seed(1)  # the same seed: the mask of the concatenation dropped out whole
    assert torch.equal(out.detach(), drop(torch.cat([head, rows]).detach()))
    out.backward(torch.ones_like(out))
    kept = out.detach() != 0
    torch.testing.assert_close(head.grad, 2.0 * kept[:3000])
    torch.testing.assert_close(rows.grad, 2.0 * kept[3000:])
