"""``node_keys.arrow``, beside a canonical graph made from a user's own files: the user's id of every node, so that
per-node results (``sylvie evaluate --predictions``) join back to the user's data. This module is its only writer
and reader.

One column ``key`` (int64 or string), row i the id of node i; meta.json records its sha256. A graph without ids of
its own has no such file.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from sylvie.atomic import file_sha256
from sylvie.errors import SylvieError, one_line

FILE = "node_keys.arrow"
_TYPES = (pa.int64(), pa.large_string())


def write_node_keys(directory: str | Path, keys: pa.Array) -> str:
    """Write the ids into ``directory`` (a canonical graph being written: its temporary folder); returns the file's
    sha256 (for meta.json)."""
    if keys.type not in _TYPES:
        raise ValueError(f"node keys must be int64 or large_string, not {keys.type}")
    table = pa.table({"key": keys})
    with ipc.new_file(Path(directory) / FILE, table.schema) as w:
        w.write_table(table)
    return file_sha256(Path(directory) / FILE)


def read_node_keys(directory: str | Path, num_nodes: int, sha256: str | None = None) -> pa.Array | None:
    """The ids of the ``num_nodes`` nodes of the canonical graph in ``directory``, checked against ``sha256`` (its
    meta.json's ``node_keys_sha256``) where given; None where it has none."""
    path = Path(directory) / FILE
    if not path.is_file():
        if sha256:
            raise SylvieError(f"{path}: missing (meta.json records the nodes' ids); rerun `sylvie download`")
        return None
    if sha256 and file_sha256(path) != sha256:
        raise SylvieError(f"{path}: changed since `sylvie download` wrote it (its sha256 is not meta.json's "
                          f"node_keys_sha256); rerun `sylvie download`")
    try:
        table = ipc.open_file(pa.memory_map(str(path))).read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise SylvieError(f"{path}: not a readable Arrow file ({one_line(e)}); rerun `sylvie download`") from None
    if table.column_names != ["key"] or table.schema.field("key").type not in _TYPES or table.num_rows != num_nodes:
        raise SylvieError(f"{path}: not the ids of this graph's {num_nodes} nodes (a column 'key' of int64 or "
                          f"large_string, a row a node); rerun `sylvie download`")
    return table.column("key").combine_chunks()
