"""The zero-copy gather kernel (PyTorch-Direct): GPU threads read feature rows straight from page-locked host memory
mapped into the GPU's address space, ``out[i] = table[idx[i]]``.

Rows are copied as raw bytes in the widest unit their layout allows (16 bytes down to 1), by a team of lanes per row,
with reads aligned to PCIe's 128-byte requests (DGL's way: a row's reads start at the 128-byte boundary below it). A
leaf module; under ``NUMBA_ENABLE_CUDASIM=1`` the kernels run on numpy arrays (tests).
"""
# How: a 16-byte unit is one ``ld/st.global.v2.u64`` (``_copy16``, an intrinsic: numba-cuda emits no vector accesses).
# ``group`` = the row's unit count rounded up to a power of two, at most 32 lanes, so a warp serves 32 / group narrow
# rows at once. A team's loop ends on a warp vote, so the compiler does not unroll it (registers). ``aligned=True``:
# every write stays in place and the idle lanes cost at most one partial step per row; ``base_shift`` is the table's own
# misalignment. A team under 32 lanes reads from the row's start (its row fits one step). The simulator has no mapped
# memory and does ``_copy16`` as two 8-byte copies: the 16-byte accesses are checked in the PTX and on a GPU.
from __future__ import annotations

import numpy as np
from numba import config

from sylvie.numba_cuda import cuda

WARP = 32
SEGMENT_BYTES = 128
WARPS_PER_BLOCK = 4
FULL_MASK = 0xFFFFFFFF
UNITS = {16: np.int64, 8: np.int64, 4: np.int32, 2: np.int16, 1: np.uint8}  # unit bytes: the views' dtype

if config.ENABLE_CUDASIM:
    def _copy16(dst, d, src, s):
        """``dst[2d:2d + 2] = src[2s:2s + 2]`` (int64 arrays)."""
        dst[2 * d] = src[2 * s]
        dst[2 * d + 1] = src[2 * s + 1]
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic
    from numba.cuda.typing import signature

    @intrinsic
    def _copy16(typingctx, dst, d, src, s):
        """``dst[2d:2d + 2] = src[2s:2s + 2]`` (1-D int64 arrays, 16-byte aligned) as one 16-byte load and one
        16-byte store."""
        sig = signature(types.void, dst, types.int64, src, types.int64)

        def codegen(context, builder, sig, args):
            vector = ir.VectorType(ir.IntType(64), 2)

            def pointer(array_type, array, unit):
                data = context.make_array(array_type)(context, builder, array).data
                element = builder.gep(data, [builder.mul(unit, ir.Constant(ir.IntType(64), 2))])
                return builder.bitcast(element, vector.as_pointer())

            value = builder.load(pointer(sig.args[2], args[2], args[3]), align=16)
            builder.store(value, pointer(sig.args[0], args[0], args[1]), align=16)
            return context.get_dummy_value()

        return sig, codegen


def _compile(wide: bool):
    """The gather on unit views: 16-byte units by ``_copy16`` (``wide``), else one array element a unit."""

    def _gather(table, idx, out, width, base_shift, segment, group):
        """``table``, ``out``: 1-D unit views (row ``idx[i]`` of the table at units ``idx[i] * width`` on, row i of
        the output at ``i * width``); ``segment``: units per 128 bytes (1: no alignment); ``group``: lanes per row."""
        lane = cuda.threadIdx.x % WARP
        warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // WARP
        warps = cuda.gridDim.x * cuda.blockDim.x // WARP
        per_warp = WARP // group
        n = idx.shape[0]
        for first in range(warp * per_warp, n, warps * per_warp):  # the same rows for every lane of the warp
            i = first + lane // group
            src = 0
            stop = 0
            e = 0
            if i < n:
                src = idx[i] * width
                e = src - (src + base_shift) % segment + lane % group  # the segment boundary at or below the row
                stop = src + width
            while cuda.any_sync(FULL_MASK, e < stop):
                if src <= e < stop:
                    if wide:
                        _copy16(out, i * width + e - src, table, e)
                    else:
                        out[i * width + e - src] = table[e]
                e += group

    return cuda.jit(_gather)


_gather_wide = _compile(True)
_gather_units = _compile(False)


def _address(array) -> int:
    cai = getattr(array, "__cuda_array_interface__", None)
    return int(cai["data"][0]) if cai is not None else int(array.ctypes.data)


def unit_bytes(row_bytes: int, *addresses: int) -> int:
    """The widest unit (16, 8, 4, 2 or 1 bytes) dividing the row's size and every address."""
    for unit in (16, 8, 4, 2):
        if row_bytes % unit == 0 and all(a % unit == 0 for a in addresses):
            return unit
    return 1


def launch_gather(table_flat, idx, out, aligned: bool = True, stream=0, max_blocks: int = 65_535) -> None:
    """``out[i, :] = table_flat[idx[i] * width : (idx[i] + 1) * width]`` with ``width = out.shape[1]``.
    ``table_flat`` is the table's rows back to back (1-D, C-contiguous), ``out`` C-contiguous; both numpy arrays
    (the simulator) or numba device arrays; the caller has checked the indices."""
    n = idx.shape[0]
    if n == 0 or out.shape[1] == 0:
        return
    for array in (table_flat, out):
        contiguous = array.flags.c_contiguous if isinstance(array, np.ndarray) else array.is_c_contiguous()
        if not contiguous:
            raise ValueError("launch_gather needs a C-contiguous table and output (it copies through views of them)")
    itemsize = np.dtype(table_flat.dtype).itemsize
    row_bytes = out.shape[1] * itemsize
    unit = unit_bytes(row_bytes, _address(table_flat), _address(out))
    width = row_bytes // unit
    table_units = table_flat.view(UNITS[unit])
    out_units = out.reshape(out.shape[0] * out.shape[1]).view(UNITS[unit])
    group = min(WARP, 1 << (width - 1).bit_length())
    segment = SEGMENT_BYTES // unit if aligned and group == WARP else 1
    base_shift = (_address(table_flat) % SEGMENT_BYTES) // unit if segment > 1 else 0
    rows_per_block = WARPS_PER_BLOCK * (WARP // group)
    blocks = min(max_blocks, -(-n // rows_per_block))
    kernel = _gather_wide if unit == 16 else _gather_units
    kernel[blocks, WARP * WARPS_PER_BLOCK, stream](table_units, idx, out_units, width, base_shift, segment, group)
