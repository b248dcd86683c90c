"""The CUDA simulator's warp intrinsics, which ``sylvie.numba_cuda`` adds to it (numba-cuda's simulator has none): a
block of 2 warps, each lane's results against what CUDA documents for them, and a lane that exits before a full-mask
shuffle is an error rather than a hang, while a lane the simulator starts late is waited for."""
import os
import subprocess
import sys

import pytest

WARPS = """
import numpy as np
from sylvie.numba_cuda import cuda

@cuda.jit
def kernel(a, out):
    t = cuda.threadIdx.x
    v = a[t]
    out[t, 0] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 5)
    out[t, 1] = cuda.shfl_down_sync(0xFFFFFFFF, v, 3)
    out[t, 2] = cuda.shfl_up_sync(0xFFFFFFFF, v, 2)
    out[t, 3] = cuda.shfl_sync(0xFFFFFFFF, v, 7)
    out[t, 4] = cuda.ballot_sync(0xFFFFFFFF, v % 3 == 0)
    out[t, 5] = cuda.any_sync(0xFFFFFFFF, v == 40)
    out[t, 6] = cuda.all_sync(0xFFFFFFFF, v < 64)
    total = v
    for apart in (16, 8, 4, 2, 1):
        total += cuda.shfl_xor_sync(0xFFFFFFFF, total, apart)
    out[t, 7] = total

a = np.arange(64, dtype=np.int32)
out = np.zeros((64, 8), np.int32)
kernel[1, 64](a, out)
lane, warp = a % 32, a // 32
expect = np.stack([32 * warp + (lane ^ 5), np.where(lane + 3 < 32, a + 3, a), np.where(lane >= 2, a - 2, a),
                   32 * warp + 7,
                   [np.uint32(sum(1 << j for j in range(32) if (32 * w + j) % 3 == 0)).view(np.int32) for w in warp],
                   warp == 1, np.ones(64), [sum(range(32 * w, 32 * w + 32)) for w in warp]], axis=1)
assert np.array_equal(out, expect), (out, expect)

@cuda.jit
def early(a, out):
    if cuda.threadIdx.x == 5:
        return
    out[cuda.threadIdx.x, 0] = cuda.shfl_xor_sync(0xFFFFFFFF, a[cuda.threadIdx.x], 1)

try:
    early[1, 32](a, out)
except Exception as e:
    assert "lanes [5] of the mask exited before it" in str(e), e
else:
    raise AssertionError("a lane that exits before a full-mask shuffle went unnoticed")

# On a loaded machine the simulator starts a block's last threads seconds after its first ones: a lane not started yet
# is still coming, not exited (seen in CI: lane 31 called exited while its thread had not started).
import time
from numba.cuda.simulator.kernel import BlockThread
start = BlockThread.start
def late_start(self):
    if self.thread_id == 31:
        time.sleep(2.0)
    start(self)
BlockThread.start = late_start
early_out = np.zeros((64, 8), np.int32)
kernel[1, 64](a, early_out)
BlockThread.start = start
assert np.array_equal(early_out, expect), (early_out, expect)
print("warps ok")
"""


@pytest.mark.slow
def test_the_simulator_gets_warp_shuffles_and_votes_as_cuda_documents_them():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    r = subprocess.run([sys.executable, "-c", WARPS], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "warps ok" in r.stdout, r.stdout + r.stderr[-3000:]
