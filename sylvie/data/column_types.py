"""The Arrow types a table's columns come in and the type each is read as: text (string, large_string, and
Polars' string_view), bytes read as UTF-8 text, dictionaries (pandas' category columns), list views (a feature list
column); the view types came in pyarrow 16, and are never met before it."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _type_test(name: str):
    """``pyarrow.types``' test ``name``, or one always false where this pyarrow predates the type (the view types
    came in pyarrow 16)."""
    return getattr(pa.types, name, lambda t: False)


is_string_view, is_binary_view = _type_test("is_string_view"), _type_test("is_binary_view")
is_list_view, is_large_list_view = _type_test("is_list_view"), _type_test("is_large_list_view")


def is_text(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is text (Polars >= 1.0 writes text as string_view)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or is_string_view(t)


def is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or is_binary_view(t)


def read_as(t: pa.DataType) -> pa.DataType:
    """The type a column of type ``t`` is read as: text of a view (string_view) and bytes (binary, binary_view:
    read as UTF-8 text) as large_string, which every reader of a column takes; a dictionary's values likewise;
    any other type as it is (a list view too: its values are read as a list's)."""
    if is_string_view(t) or is_bytes(t):
        return pa.large_string()
    if pa.types.is_dictionary(t):
        values = read_as(t.value_type)
        return t if values == t.value_type else pa.dictionary(t.index_type, values)
    return t


def is_utf8(value: bytes | None) -> bool:
    """Whether ``value`` (bytes, or None) is UTF-8 text."""
    if value is None:
        return True
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decoded(values):
    """A column (array or chunked) with a dictionary type (a pandas category column) as its values' type."""
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def filled(index) -> np.ndarray:
    """An Arrow integer array (or chunked array) with nulls as an int64 array with -1 for them."""
    return pc.fill_null(index, -1).to_numpy(zero_copy_only=False).astype(np.int64)
