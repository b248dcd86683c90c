"""Compile the zero-copy gather kernels to PTX for sm_80 without a GPU, on the unit views the launch passes (exit 3:
no NVVM/NVRTC here): the 16-byte kernel must copy by 16-byte vector accesses (``ld.global.v2.u64`` and
``st.global.v2.u64``, which the simulator cannot check: there ``_copy16`` is plain Python); exit 1 where it does
not."""
import sys

from numba import types

from sylvie.features import gather_cuda
from sylvie.numba_cuda import cuda

sizes = []
wide = ""
try:
    for dtype, kernel in ((types.int64, gather_cuda._gather_wide), (types.int64, gather_cuda._gather_units),
                          (types.int32, gather_cuda._gather_units), (types.int16, gather_cuda._gather_units),
                          (types.uint8, gather_cuda._gather_units)):
        sig = (types.Array(dtype, 1, "C"), types.Array(types.int64, 1, "C"), types.Array(dtype, 1, "C"),
               types.int64, types.int64, types.int64, types.int64)
        ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(8, 0))
        sizes.append(len(ptx))
        wide = wide or ptx
except Exception as e:  # noqa: BLE001
    text = f"{type(e).__name__}: {e}"
    if any(s in text for s in ("libnvvm", "libnvrtc", "NVVM", "nvrtc", "DynamicLibNotFound", "CudaSupportError")):
        print(f"no CUDA compiler libraries here ({text.splitlines()[0][:200]})")
        sys.exit(3)
    raise
print(f"gather ptx: {len(sizes)} kernels, {min(sizes)}-{max(sizes)} chars")
if "ld.global.v2.u64" not in wide or "st.global.v2.u64" not in wide:
    print("the 16-byte gather does not copy by 16-byte accesses")
    sys.exit(1)
