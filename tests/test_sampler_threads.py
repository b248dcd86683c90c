"""The sampler's minibatches are the same bits whatever numba's thread count, in processes of their own (numba
fixes its pool's size at start-up)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parent

_EPOCH_DIGEST = """
import hashlib, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_neighbor_picks import _digest, _random_csc, _sampler
import numba
indptr, src = _random_csc(30_000, 12, seed=11)
sampler = _sampler(indptr, src, np.arange(0, 30_000, 2))
h = hashlib.sha256()
for i, seeds in enumerate(sampler.epoch_seeds(0)):
    h.update(_digest(sampler.sample(seeds, 0, i)).encode())
print(numba.get_num_threads(), h.hexdigest())
"""


def test_an_epochs_minibatches_are_bit_identical_at_1_2_and_4_threads():
    """Processes of their own with NUMBA_NUM_THREADS 1, 2 and 4 (more threads than this machine's cores is fine):
    a digest of every block of an epoch whose frontiers are large enough for the parallel kernel."""
    out = {}
    for threads in (1, 2, 4):
        env = {**os.environ, "NUMBA_NUM_THREADS": str(threads)}
        p = subprocess.run([sys.executable, "-c", _EPOCH_DIGEST, str(TESTS)], env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        got_threads, digest = p.stdout.split()
        assert int(got_threads) == threads
        out[threads] = digest
    assert out[1] == out[2] == out[4]
