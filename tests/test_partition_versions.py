"""Partition format version 3: node ids 32-bit where they fit (``id_bits`` in the manifest), and version 2 partitions
(every id 64-bit, no ``id_bits``) still read, to the same values: a partition written before need not be cut again."""
import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from sylvie.formats.partition_manifest import manifest_checksum, read_manifest
from sylvie.models.blocks import relation_block
from sylvie.partition.shard_format import ID_COLUMNS, INT_COLUMNS, TOPOLOGY_COLUMNS
from sylvie.partition.shard_reader import read_shard, read_topology

pytestmark = pytest.mark.unit


def as_version_2(src, dst):
    """A copy of partition ``src`` as the version 2 writer wrote it: every id column 64-bit, no id_bits."""
    dst.mkdir()
    manifest = json.loads((src / "manifest.json").read_text())
    for entry in manifest["parts"] + [manifest["topology"]]:
        table = ipc.open_file(pa.memory_map(str(src / entry["file"]))).read_all()
        fields = [pa.field(f.name, pa.large_list(pa.int64())) if f.name in ID_COLUMNS else f for f in table.schema]
        wide = table.cast(pa.schema(fields))
        with ipc.new_file(str(dst / entry["file"]), wide.schema) as w:
            w.write_table(wide)
        entry["sha256"] = hashlib.sha256((dst / entry["file"]).read_bytes()).hexdigest()
    manifest["format_version"] = 2
    del manifest["id_bits"]
    manifest["checksum"] = manifest_checksum(manifest)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_ids_are_32_bit_and_a_version_2_partition_reads_the_same(cora_partitions, tmp_path):
    new = cora_partitions[4]
    old = as_version_2(new, tmp_path / "v2")
    assert read_manifest(new)["id_bits"] == 32 and read_manifest(old)["id_bits"] == 64
    for k in range(4):
        a, b = read_shard(new, k), read_shard(old, k)
        for name in INT_COLUMNS:
            want = np.int32 if name in ID_COLUMNS else np.int64
            assert getattr(a, name).dtype == want and getattr(b, name).dtype == np.int64, name
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        blocks = [relation_block(s.edge_src, s.edge_dst, s.num_inner + s.num_halo, s.num_inner, True, True,
                                 s.in_degree, np.concatenate([s.out_degree, s.halo_out_degree])) for s in (a, b)]
        assert all(bool((getattr(blocks[0], f) == getattr(blocks[1], f)).all())
                   for f in ("indptr", "indices", "in_degree", "out_degree"))
    ta, tb = read_topology(new), read_topology(old)
    assert ta.in_src.dtype == np.int32 and ta.in_indptr.dtype == np.int64 and tb.in_src.dtype == np.int64
    assert all(np.array_equal(getattr(ta, c), getattr(tb, c)) for c in TOPOLOGY_COLUMNS)
