"""sylvie.arrow_arrays.as_numpy reads what pyarrow's to_numpy reads, in place for numbers, without importing pandas
(its reason to exist: tests/test_adam.py's sibling for the start-up of a rank)."""
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from sylvie.arrow_arrays import as_numpy

TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint64(), pa.float32(), pa.float64(),
         pa.bool_()]


@pytest.mark.unit
@pytest.mark.parametrize("typ", TYPES, ids=str)
@pytest.mark.parametrize("start,stop", [(0, 37), (3, 37), (5, 6), (9, 9)])
def test_the_values_of_to_numpy(typ, start, stop):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, 37) if typ == pa.bool_() else rng.integers(0, 100, 37)
    arr = pa.array(values.astype(typ.to_pandas_dtype()), typ).slice(start, stop - start)
    got, expected = as_numpy(arr), arr.to_numpy(zero_copy_only=False)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


@pytest.mark.unit
def test_numbers_are_read_in_place_and_nulls_go_through_pyarrow():
    arr = pa.array(np.arange(10, dtype=np.int64))
    assert np.shares_memory(as_numpy(arr), arr.to_numpy())
    with_nulls = pa.array([1.0, None, 3.0])
    assert np.array_equal(as_numpy(with_nulls), [1.0, np.nan, 3.0], equal_nan=True)


@pytest.mark.slow
def test_reading_a_shard_does_not_import_pandas(cora_partitions):
    code = ("import sys\n"
            "from sylvie.partition.shard_reader import read_shard, read_topology\n"
            f"s = read_shard({str(cora_partitions[4])!r}, 1); t = read_topology({str(cora_partitions[4])!r})\n"
            "assert s.feat.shape[0] == s.num_inner and t.num_nodes == 2708\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
