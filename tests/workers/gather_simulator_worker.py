"""Run the zero-copy gather kernels under NUMBA_ENABLE_CUDASIM=1 and compare them with numpy's table[idx], bitwise, on
tables of random bytes (NaNs with payloads among them): every unit the launch picks (16 bytes through ``_copy16``, 8,
4, 2 and 1), a warp per row (fp32 rows of 100, 128 and 602) and several rows per warp (fp32 rows of 3 and 16, fp16
rows of 7 and 8), tables whose base is 128-byte aligned and not (by 16, 8, 4 or 2 bytes), an output off a 16-byte
boundary, random (aligned and unaligned), repeated (aligned) and empty index lists. Prints one line per case and a
summary; exits 1 where any differs or a case runs on another unit than the one it is meant to cover."""
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
from sylvie.features.gather_cuda import SEGMENT_BYTES, WARP, launch_gather, unit_bytes  # noqa: E402


def at(nbytes: int, shift_bytes: int, rng) -> np.ndarray:
    """``nbytes`` random bytes whose first is ``shift_bytes`` past a 128-byte boundary."""
    raw = np.empty(nbytes + 2 * SEGMENT_BYTES, dtype=np.uint8)
    start = (-raw.ctypes.data) % SEGMENT_BYTES + shift_bytes
    buf = raw[start:start + nbytes]
    buf[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
    assert buf.ctypes.data % SEGMENT_BYTES == shift_bytes
    return buf


rng = np.random.default_rng(0)
ROWS = 40
# (dtype, width, table base past a 128-byte boundary, output base past one, the unit the launch must pick)
CASES = ((np.float32, 100, 0, 0, 16), (np.float32, 100, 16, 0, 16), (np.float32, 100, 8, 0, 8),
         (np.float32, 100, 0, 4, 4), (np.float32, 128, 0, 0, 16), (np.float32, 602, 4, 0, 4),
         (np.float32, 3, 0, 0, 4), (np.float32, 16, 0, 0, 16), (np.float16, 300, 0, 0, 8), (np.float16, 7, 2, 0, 2),
         (np.float16, 8, 0, 0, 16), (np.uint8, 5, 0, 0, 1))
cases = same = 0
for dtype, width, shift, out_shift, unit in CASES:
    itemsize = np.dtype(dtype).itemsize
    table = at(ROWS * width * itemsize, shift, rng).view(dtype).reshape(ROWS, width)
    for name, idx in (("random", rng.integers(0, ROWS, 13)), ("repeated", np.array([3, 3, 39, 0, 3]))):
        for aligned in ((True, False) if name == "random" else (True,)):  # the simulator is slow
            out = at(idx.shape[0] * width * itemsize, out_shift, rng).view(dtype).reshape(-1, width)
            picked = unit_bytes(width * itemsize, table.ctypes.data, out.ctypes.data)
            launch_gather(table.reshape(-1), idx.astype(np.int64), out, aligned=aligned, max_blocks=2)
            ok = picked == unit and np.array_equal(out.view(np.uint8), table[idx].view(np.uint8))
            cases, same = cases + 1, same + ok
            rows_per_warp = WARP // min(WARP, 1 << (width * itemsize // picked - 1).bit_length())
            print(f"{np.dtype(dtype).name} x {width}, table +{shift} B, out +{out_shift} B ({picked}-byte units, "
                  f"{rows_per_warp} row(s) a warp), {name} indices, {'aligned' if aligned else 'unaligned'}: "
                  f"{'identical' if ok else 'DIFFERENT'}")
empty = np.zeros((0, 100), np.float32)
launch_gather(np.zeros(400, np.float32), np.zeros(0, np.int64), empty)
cases, same = cases + 1, same + (empty.shape == (0, 100))
print(f"identical: {same} of {cases}")
sys.exit(0 if same == cases else 1)
