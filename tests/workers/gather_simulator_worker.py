"""Run the zero-copy gather kernels under NUMBA_ENABLE_CUDASIM=1 and compare them with numpy's table[idx], bitwise:
fp32 rows of 100, 128 and 602 values and fp16 rows of 300, tables whose base is 128-byte aligned and not, repeated
and empty index lists, the aligned and the unaligned kernel. Prints one line per case and a summary."""
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
from sylvie.features.gather_cuda import SEGMENT_BYTES, launch_gather  # noqa: E402


def table_at(rows: int, width: int, dtype, shift_bytes: int, rng) -> np.ndarray:
    """A C-contiguous table whose base address is ``shift_bytes`` past a 128-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(rows * width * itemsize + 2 * SEGMENT_BYTES, dtype=np.uint8)
    start = (-raw.ctypes.data) % SEGMENT_BYTES + shift_bytes
    table = raw[start:start + rows * width * itemsize].view(dtype).reshape(rows, width)
    table[:] = rng.standard_normal((rows, width)).astype(dtype)
    assert table.ctypes.data % SEGMENT_BYTES == shift_bytes
    return table


rng = np.random.default_rng(0)
cases = same = 0
for width, dtype in ((100, np.float32), (128, np.float32), (602, np.float32), (300, np.float16)):
    for shift in (0, 4 * np.dtype(dtype).itemsize):
        table = table_at(40, width, dtype, shift, rng)
        for name, idx in (("random", rng.integers(0, 40, 9)), ("repeated", np.array([3, 3, 39, 0, 3])),
                          ("empty", np.zeros(0, dtype=np.int64))):
            for aligned in (True, False):
                out = np.full((idx.shape[0], width), np.nan, dtype=dtype)
                launch_gather(table.reshape(-1), idx.astype(np.int64), out, aligned=aligned, max_blocks=2)
                ok = out.shape == table[idx].shape and np.array_equal(out.view(np.uint8), table[idx].view(np.uint8))
                cases, same = cases + 1, same + ok
                print(f"{np.dtype(dtype).name} x {width}, base +{shift} B, {name} indices, "
                      f"{'aligned' if aligned else 'unaligned'}: {'identical' if ok else 'DIFFERENT'}")
print(f"identical: {same} of {cases}")
sys.exit(0 if same == cases else 1)
