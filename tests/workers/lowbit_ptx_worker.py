"""Compile the Low-bit Module's CUDA kernels to PTX for sm_80 without a GPU (exit 3: no NVVM/NVRTC here): the encode
kernel of each bit width and the decode kernel. Each encode must reduce the row's range by warp shuffles
(``shfl.sync.bfly``) with no ``bar.sync`` (no syncthreads) and no shared memory, and the 1-bit one pack by
``vote.sync.ballot``; exit 1 where one does not.

numba-cuda asks the current device for its compute capability when it compiles a device function called
by a kernel; without a GPU there is none, so that query is answered with the target's (8, 0).
"""
import re
import sys
from types import SimpleNamespace

from numba import types

from sylvie.numba_cuda import cuda  # before numba.cuda's own modules: it makes them importable with numpy >= 2.5

cuda_dispatcher = sys.modules["numba.cuda.dispatcher"]
cuda_dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=(8, 0))

from sylvie.comm.lowbit import cuda as lowbit_cuda  # noqa: E402

f32, i32 = types.Array(types.float32, 2, "C"), types.Array(types.int32, 2, "C")
i64, u8 = types.Array(types.int64, 1, "C"), types.Array(types.uint8, 1, "C")
encodes = {}
try:
    for bits in (1, 2, 4, 8):
        encodes[bits], _ = cuda.compile_ptx(lowbit_cuda.encode_kernel(bits).py_func,
                                            (f32, i32, i64, i64, i64, types.int32, f32, u8, u8), cc=(8, 0))
    dec, _ = cuda.compile_ptx(lowbit_cuda._decode.py_func, (u8, types.int64, i64, i64, i64, f32), cc=(8, 0))
except Exception as e:  # noqa: BLE001
    text = f"{type(e).__name__}: {e}"
    if any(s in text for s in ("libnvvm", "libnvrtc", "NVVM", "nvrtc", "DynamicLibNotFound", "CudaSupportError")):
        print(f"no CUDA compiler libraries here ({text.splitlines()[0][:200]})")
        sys.exit(3)
    raise
wrong = []
for bits, ptx in encodes.items():
    if re.search(r"^\s*(bar|barrier)\.sync\b", ptx, flags=re.MULTILINE) or ".shared" in ptx:
        wrong.append(f"{bits}-bit encode: syncthreads or shared memory")
    if len(re.findall(r"\bshfl\.sync\.bfly\.b32", ptx)) < 10:  # 5 rounds, minimum and maximum
        wrong.append(f"{bits}-bit encode: its range is not a butterfly of shuffles")
    if (bits == 1) != ("vote.sync.ballot.b32" in ptx):
        wrong.append(f"{bits}-bit encode: {'no' if bits == 1 else 'a'} ballot")
print(f"encode ptx: {', '.join(f'{b} bits {len(p)} chars' for b, p in encodes.items())}; decode ptx: {len(dec)} chars")
for line in wrong:
    print(line)
sys.exit(1 if wrong else 0)
