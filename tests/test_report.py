"""The report's time-to-accuracy: validation accuracy against seconds of training, means over seeds, and the
common target every run reaches."""
import math

import numpy as np
import pytest

from sylvie.report.collect import RunOutput, accuracy_over_time, accuracy_target, time_to_accuracy

pytestmark = pytest.mark.unit


def _run(name, seed, times, accs):
    return RunOutput(name, seed, [{"epoch_time": t, "val_acc": a} for t, a in zip(times, accs)], {})


def test_time_to_accuracy_sums_epoch_times_and_averages_seeds():
    fast = [_run("fast", 0, [1, 1, 1, 1], [0.5, None, 0.7, 0.8]), _run("fast", 1, [1, 1, 1, 1], [0.5, None, 0.7, 0.6])]
    slow = [_run("slow", 0, [3, 3, 3], [0.6, 0.75, 0.9])]
    seconds, acc = accuracy_over_time(fast)
    assert seconds.tolist() == [1, 2, 3, 4] and np.isnan(acc[1]) and acc[3] == pytest.approx(0.7)
    target = accuracy_target({"fast": fast, "slow": slow})
    assert target == pytest.approx(0.98 * 0.7)  # fast's best mean is 0.7 (epochs 3 and 4), slow's 0.9
    assert time_to_accuracy(fast, target) == 3  # the unevaluated epoch 2 counts in time, not as reached
    assert time_to_accuracy(slow, target) == 6
    assert math.isnan(time_to_accuracy(slow, 0.95))
