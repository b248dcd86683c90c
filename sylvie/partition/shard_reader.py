"""Read a partition: shards and the topology, verified against their checksum and schema and against the manifest
(``sylvie.formats.partition_manifest``, which reads and checks the manifest itself)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from sylvie.arrow_arrays import as_numpy
from sylvie.errors import SylvieError, one_line
from sylvie.formats.partition_manifest import read_manifest
from sylvie.graph_types import GraphTypes
from sylvie.partition.shard_format import (
    INT_COLUMNS,
    MASK_COLUMNS,
    RELATION_COLUMN,
    TOPOLOGY_FILE,
    Shard,
    Topology,
    feat_column,
    id_bits_type,
    shard_schema,
    topology_schema,
)


def _verified_bytes(path: Path, expected_sha256: str, what: str = "shard") -> pa.Buffer:
    if not path.is_file():
        raise SylvieError(f"{path}: {what} missing; rerun `sylvie partition`")
    buf = pa.memory_map(str(path)).read_buffer()
    if hashlib.sha256(memoryview(buf)).hexdigest() != expected_sha256:
        raise SylvieError(f"{path}: sha256 does not match the manifest; the {what} is corrupt or was modified, "
                          f"rerun `sylvie partition`")
    return buf


def _verified_batch(path: Path, expected_sha256: str, what: str, schema: pa.Schema) -> pa.RecordBatch:
    """The one record batch of an Arrow file, after checking its checksum and its schema."""
    buf = _verified_bytes(path, expected_sha256, what)
    try:
        batch = ipc.open_file(buf).get_batch(0)
        batch.validate(full=True)  # every buffer's size against the lengths the metadata gives
    except (pa.ArrowException, OSError, IndexError, ValueError, UnicodeDecodeError) as e:
        raise SylvieError(f"{path}: not a valid {what} ({one_line(e)}); rerun `sylvie partition`") from e
    if not batch.schema.equals(schema):
        raise SylvieError(f"{path}: schema differs from the {what} format ({_first_difference(batch.schema, schema)}); "
                          f"rerun `sylvie partition`")
    return batch


def _first_difference(found: pa.Schema, expected: pa.Schema) -> str:
    """The first field in which two schemas differ, in words (one line)."""
    for i, want in enumerate(expected):
        if i >= len(found):
            return f"no field '{want.name}'"
        got = found.field(i)
        if not got.equals(want):
            return one_line(f"field {i} is {got.name!r}: {got.type}, expected {want.name!r}: {want.type}", 200)
    return f"{len(found)} fields, expected {len(expected)}"


def _typed_layout(part_dir: Path, manifest: dict) -> dict:
    """A typed partition's types and the global first id of each node type (then the node count)."""
    return {"types": GraphTypes.from_json(manifest["types"], str(part_dir / "manifest.json")),
            "type_offsets": np.concatenate([[0], np.cumsum(manifest["type_counts"])]).astype(np.int64)}


def read_shard(part_dir: str | Path, part: int, manifest: dict | None = None) -> Shard:
    """Load shard ``part``, verifying checksum and schema first."""
    part_dir = Path(part_dir)
    manifest = manifest or read_manifest(part_dir)
    if not 0 <= part < manifest["num_parts"]:
        raise SylvieError(f"{part_dir}: no part {part}; the partition has {manifest['num_parts']} parts")
    entry = manifest["parts"][part]
    path = part_dir / entry["file"]
    widths = manifest.get("feature_widths") if "types" in manifest else None
    batch = _verified_batch(path, entry["sha256"], "shard",
                            shard_schema(manifest["num_features"], id_bits_type(manifest["id_bits"]), widths))
    arrays = {name: as_numpy(batch.column(name).values) for name in INT_COLUMNS + MASK_COLUMNS}

    def feat(name: str, width: int) -> np.ndarray:
        return as_numpy(batch.column(name).values.flatten()).reshape(-1, width)

    typed = {}
    if widths is not None:
        typed = dict(**_typed_layout(part_dir, manifest),
                     type_feat=tuple(None if w is None else feat(feat_column(t), w) for t, w in enumerate(widths)),
                     edge_relation=as_numpy(batch.column(RELATION_COLUMN).values))
        inner_feat = np.empty((arrays["global_id"].shape[0], 0), np.float32)
    else:
        inner_feat = feat("feat", manifest["num_features"])
    shard = Shard(part=part, num_parts=manifest["num_parts"], num_classes=manifest["num_classes"],
                  num_train_global=manifest["num_train"], feat=inner_feat, **arrays, **typed)
    _check_counts(path, entry, shard)
    if shard.typed:
        _check_typed(path, entry, shard)
    n = shard.num_inner
    if (shard.edge_dst.size and shard.edge_dst.max() >= n) or (shard.edge_src.size and
                                                               shard.edge_src.max() >= n + shard.num_halo):
        raise SylvieError(f"{path}: local edge ids out of range; rerun `sylvie partition`")
    return shard


def read_topology(part_dir: str | Path, manifest: dict | None = None) -> Topology:
    """The replicated topology of a partition (memory-mapped, checksum verified)."""
    part_dir = Path(part_dir)
    manifest = manifest or read_manifest(part_dir)
    entry = manifest.get("topology")
    if entry is None:
        raise SylvieError(f"{part_dir}: has no replicated topology ({TOPOLOGY_FILE}), which sampled training and "
                          f"`sylvie vip` need; an older `sylvie partition` wrote it: rerun `sylvie partition`")
    path = part_dir / entry["file"]
    typed = "types" in manifest
    if typed and manifest["format_version"] < 5:
        raise SylvieError(f"{part_dir}: a typed graph's partition of format {manifest['format_version']}, whose "
                          f"topology has no relations, which sampled training and `sylvie vip` need; rerun "
                          f"`sylvie partition`")
    schema = topology_schema(id_bits_type(manifest["id_bits"]), typed=typed)
    batch = _verified_batch(path, entry["sha256"], "topology file", schema)
    cols = {name: as_numpy(batch.column(name).values) for name in schema.names}
    if typed:
        cols.update(_typed_layout(part_dir, manifest))
    topo = Topology(**cols, part_offsets=np.asarray(entry["part_offsets"], dtype=np.int64))
    if topo.num_nodes != manifest["num_nodes"] or topo.in_src.shape[0] != manifest["num_edges"]:
        raise SylvieError(f"{path}: {topo.num_nodes} nodes and {topo.in_src.shape[0]} edges, the manifest says "
                          f"{manifest['num_nodes']} and {manifest['num_edges']}; rerun `sylvie partition`")
    return topo


def _check_typed(path: Path, entry: dict, shard: Shard) -> None:
    """A typed shard's rows per type and relations against the manifest."""
    counts = list(shard.inner_type_counts())
    if entry.get("type_counts") != counts:
        raise SylvieError(f"{path}: the manifest says type_counts {entry.get('type_counts')} but the shard has "
                          f"{counts}; rerun `sylvie partition`")
    for t, f in enumerate(shard.type_feat):
        if f is not None and f.shape[0] != counts[t]:
            raise SylvieError(f"{path}: {f.shape[0]} feature rows of node type {shard.types.node_types[t]!r} for "
                              f"{counts[t]} inner nodes of it; rerun `sylvie partition`")
    rel = shard.edge_relation
    if rel.shape != shard.edge_src.shape or (rel.size and (rel.min() < 0 or rel.max() >= len(shard.types.relations))):
        raise SylvieError(f"{path}: edge relations do not match the edges or the manifest's relations; rerun "
                          f"`sylvie partition`")


def _check_counts(path: Path, entry: dict, shard: Shard) -> None:
    """The manifest's counts of this part against the shard itself."""
    owners = shard.halo_owner
    if owners.size and (owners.min() < 0 or owners.max() >= shard.num_parts):
        raise SylvieError(f"{path}: a halo row's owner is outside parts 0..{shard.num_parts - 1}; rerun "
                          f"`sylvie partition`")
    actual = {"inner_nodes": shard.num_inner, "train_nodes": int(shard.train.sum()), "edges": int(shard.edge_src.size),
              "halo_nodes": shard.num_halo,
              "halo_from": np.bincount(shard.halo_owner, minlength=shard.num_parts).astype(int).tolist()}
    for key, value in actual.items():
        if entry.get(key) != value:
            raise SylvieError(f"{path}: the manifest says {key} {entry.get(key)} but the shard has {value}; rerun "
                              f"`sylvie partition`")


def verify_partition(part_dir: str | Path, dataset_fingerprint: str | None = None) -> dict:
    """Check the manifest, every shard's checksum and (optionally) the dataset it was cut from."""
    manifest = read_manifest(part_dir)
    if dataset_fingerprint and manifest["dataset_fingerprint"] != dataset_fingerprint:
        raise SylvieError(f"{part_dir}: partition was cut from another version of the dataset "
                          f"(fingerprint differs); rerun `sylvie partition`")
    for entry in manifest["parts"]:
        _verified_bytes(Path(part_dir) / entry["file"], entry["sha256"])
    return manifest
