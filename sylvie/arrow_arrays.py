"""Arrow arrays as numpy arrays without pyarrow's conversion, which imports pandas (pyarrow 18-26 do so at the
first ``to_numpy``/``pa.array``, 0.35 s of CPU in every process that reads a shard: each rank, the evaluation).

``as_numpy`` reads a fixed-width array's data buffer in place (booleans, bit-packed in Arrow, are unpacked); any
other array, or one with nulls, goes through ``to_numpy``."""
from __future__ import annotations

import numpy as np
import pyarrow as pa


def as_numpy(arr: pa.Array) -> np.ndarray:
    """``arr.to_numpy(zero_copy_only=False)``; in place (read-only) for a numeric array without nulls."""
    typ = arr.type
    if arr.null_count == 0 and (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        width = typ.bit_width // 8
        data = arr.buffers()[1]
        dtype = np.dtype(f"{'f' if pa.types.is_floating(typ) else 'i' if pa.types.is_signed_integer(typ) else 'u'}"
                         f"{width}")
        if data is None or len(arr) == 0:
            return np.empty(0, dtype)
        return np.frombuffer(data, dtype, count=len(arr), offset=arr.offset * width)
    if arr.null_count == 0 and pa.types.is_boolean(typ):
        data = arr.buffers()[1]
        if data is None or len(arr) == 0:
            return np.empty(0, bool)
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[arr.offset:arr.offset + len(arr)].astype(bool)
    return arr.to_numpy(zero_copy_only=False)
