"""Compile the Low-bit Module's CUDA kernels to PTX for sm_80 without a GPU (exit 3: no NVVM/NVRTC here).

numba-cuda asks the current device for its compute capability when it compiles a device function called
by a kernel; without a GPU there is none, so that query is answered with the target's (8, 0).
"""
import sys
from types import SimpleNamespace

from numba import types

from sylvie.numba_cuda import cuda  # before numba.cuda's own modules: it makes them importable with numpy >= 2.5

cuda_dispatcher = sys.modules["numba.cuda.dispatcher"]
cuda_dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=(8, 0))

from sylvie.comm.lowbit import cuda as lowbit_cuda  # noqa: E402

f32, i32 = types.Array(types.float32, 2, "C"), types.Array(types.int32, 2, "C")
i64, u8 = types.Array(types.int64, 1, "C"), types.Array(types.uint8, 1, "C")
try:
    enc, _ = cuda.compile_ptx(lowbit_cuda._encode.py_func,
                              (f32, i32, types.int64, i64, i64, i64, types.int32, f32, u8, u8), cc=(8, 0))
    dec, _ = cuda.compile_ptx(lowbit_cuda._decode.py_func, (u8, types.int64, i64, i64, i64, f32), cc=(8, 0))
except Exception as e:  # noqa: BLE001
    text = f"{type(e).__name__}: {e}"
    if any(s in text for s in ("libnvvm", "libnvrtc", "NVVM", "nvrtc", "DynamicLibNotFound", "CudaSupportError")):
        print(f"no CUDA compiler libraries here ({text.splitlines()[0][:200]})")
        sys.exit(3)
    raise
print(f"encode ptx: {len(enc)} chars, decode ptx: {len(dec)} chars")
