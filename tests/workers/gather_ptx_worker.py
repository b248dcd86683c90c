"""Compile the zero-copy gather kernels to PTX for sm_80 without a GPU, for fp32 and fp16 tables (exit 3: no
NVVM/NVRTC here)."""
import sys

from numba import types

from sylvie.features import gather_cuda
from sylvie.numba_cuda import cuda

sizes = []
try:
    for dtype in (types.float32, types.float16):
        sig = (types.Array(dtype, 1, "C"), types.Array(types.int64, 1, "C"), types.Array(dtype, 2, "C"),
               types.int64, types.int64)
        for kernel in (gather_cuda._gather_aligned, gather_cuda._gather_unaligned):
            ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(8, 0))
            sizes.append(len(ptx))
except Exception as e:  # noqa: BLE001
    text = f"{type(e).__name__}: {e}"
    if any(s in text for s in ("libnvvm", "libnvrtc", "NVVM", "nvrtc", "DynamicLibNotFound", "CudaSupportError")):
        print(f"no CUDA compiler libraries here ({text.splitlines()[0][:200]})")
        sys.exit(3)
    raise
print(f"gather ptx: {len(sizes)} kernels, {min(sizes)}-{max(sizes)} chars")
