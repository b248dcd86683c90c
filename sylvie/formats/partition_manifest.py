"""``manifest.json`` of a partition (``sylvie partition``): what the partition directory holds and how it was cut. This
module is its only writer and reader; the shards' layout is ``sylvie.partition.shard_format``'s.

The manifest carries a checksum of its other fields, so an edited one is refused. Partition format 2 (64-bit ids) and
later are read; any other version is refused: rerun ``sylvie partition``. Fields and version history: below.
"""
# manifest.json's fields:
#
#     format_version       the partition's format (of this manifest and of the shards and topology it lists)
#     dataset, dataset_fingerprint, method, seed
#     num_parts, num_nodes, num_edges, num_features, num_classes, num_train, edge_cut
#     types, type_counts, feature_widths   a typed graph's (version 4): its types (``GraphTypes.to_json``), nodes and
#                          feature width (null: none) of each type
#     id_bits              32 or 64: the width of the node ids in the shards and the topology (32 where every id
#                          fits: fewer than 2^31 nodes); version 2 partitions have 64-bit ids throughout
#     balance              regime (full or sampled: which constraints, ``sylvie.partition.balance``), tolerance (the
#                          bound every constraint was given; null: none) and per constraint (full: inner_nodes,
#                          train_nodes, edges; sampled: train_nodes, val_nodes, other_nodes, degree) its max_over_mean
#                          over the parts and its vertex_slack (heaviest vertex / mean part); absent in partitions
#                          written before it, without regime in those written before the sampled regime (full)
#     parts                per part: part, file (part-<k>.arrow), sha256, inner_nodes, train_nodes, edges, halo_nodes,
#                          halo_from (halo rows per owner); a typed graph's: type_counts (inner rows per type)
#     topology             file (topology.arrow), sha256, part_offsets
#     checksum             sha256 of all the other fields (``manifest_checksum``): an edited manifest is refused
#
# Version history (of the whole partition format; bump it when the shards' layout changes too): 1: the first;
# 2: the manifest carries a checksum of its own; 3: node ids 32-bit where they fit (``id_bits``), half the bytes of a
# shard's edge lists and of the topology's sources; 4: a typed graph's partition (``types``, ``type_counts`` and
# ``feature_widths`` of the graph, ``type_counts`` of each part's inner rows; the shards' features per node type and
# their edges' relations: ``sylvie.partition.shard_format``); 5: a typed graph's topology also holds each in-edge's
# relation (``in_relation``), ordered by destination, relation, source, which the typed neighbour sampler and VIP need
# (version 4 typed partitions still train full-graph). A homogeneous graph's partition is still written as version 3,
# which versions before typed graphs read. Version 2 partitions are still read (as 64-bit ids); any other
# version is refused: rerun ``sylvie partition``.
#
# the shards' and the topology's layout is
# ``sylvie.partition.shard_format``'s. ``format_version``, ``parts`` and ``num_parts`` are also what
# ``sylvie.output_dir.PARTITION`` identifies a partition directory by.
from __future__ import annotations

import json
from pathlib import Path

from sylvie.atomic import read_json
from sylvie.errors import SylvieError
from sylvie.formats.checksum import FIELD, content_sha256
from sylvie.graph_types import HOMOGENEOUS
from sylvie.output_dir import identify

FORMAT_VERSION = 3
TYPED_FORMAT_VERSION = 5  # a typed graph's partition (4: its topology without relations)
READS = (2, 3, 4, 5)  # the versions this sylvie reads (2: every id 64-bit)
MANIFEST = "manifest.json"
# what reading a partition needs of the manifest
_REQUIRED = ("num_parts", "num_features", "num_classes", "num_train", "dataset_fingerprint", "parts")


def manifest_checksum(manifest: dict) -> str:
    """sha256 of the manifest's content without its ``checksum`` field (``checksum.content_sha256``: keys sorted,
    compact JSON)."""
    return content_sha256({k: v for k, v in manifest.items() if k != FIELD})


def write_manifest(directory: str | Path, fields: dict) -> dict:
    """Write the manifest of the partition written into ``directory`` (the stage's temporary output directory, moved
    into place by the caller) with ``fields`` (all but ``format_version`` and ``checksum``, which are added here).
    Returns the manifest."""
    manifest = {"format_version": TYPED_FORMAT_VERSION if "types" in fields else FORMAT_VERSION, **fields}
    manifest["checksum"] = manifest_checksum(manifest)
    (Path(directory) / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _not_a_partition(part_dir: Path) -> None:
    """A clear error if ``part_dir`` is another of our outputs (a dataset, a VIP analysis, a run) or a file."""
    what = identify(part_dir) if part_dir.is_dir() else None
    if what and "partition directory" not in what:
        raise SylvieError(f"{part_dir}: is {what}, not a partition; give the directory written by "
                          f"`sylvie partition`")
    if part_dir.is_file():
        raise SylvieError(f"{part_dir}: is a file, not a partition directory; give the directory written by "
                          f"`sylvie partition`")


def read_manifest(part_dir: str | Path) -> dict:
    """The manifest of the partition in ``part_dir``, checked: its version, its fields, its own checksum."""
    part_dir = Path(part_dir)
    path = part_dir / MANIFEST
    if not path.is_file():
        _not_a_partition(part_dir)
    manifest = read_json(path, "partition manifest")
    if not isinstance(manifest, dict):
        raise SylvieError(f"{path}: not a partition manifest (a JSON {type(manifest).__name__}, not an object); "
                          f"rerun `sylvie partition`")
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        _not_a_partition(part_dir)
        raise SylvieError(f"{path}: missing field(s) {', '.join(missing)}; rerun `sylvie partition`")
    if manifest.get("format_version") not in READS:
        raise SylvieError(f"{path}: format_version {manifest.get('format_version')}, this sylvie reads "
                          f"{', '.join(map(str, READS[:-1]))} and {READS[-1]}; rerun `sylvie partition` with this "
                          f"version of sylvie")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise SylvieError(f"{path}: was changed after `sylvie partition` wrote it (its checksum does not match its "
                          f"content); rerun `sylvie partition` rather than editing the manifest")
    if len(manifest["parts"]) != manifest["num_parts"]:
        raise SylvieError(f"{path}: lists {len(manifest['parts'])} shards for num_parts={manifest['num_parts']}")
    if manifest["format_version"] == 2:
        manifest = {**manifest, "id_bits": 64}
    elif manifest.get("id_bits") not in (32, 64):
        raise SylvieError(f"{path}: id_bits {manifest.get('id_bits')!r}, expected 32 or 64; rerun `sylvie partition`")
    return manifest


def graph_layout(manifest: dict) -> dict:
    """The graph's types, nodes and feature width per type (a homogeneous graph's: one type, one relation)."""
    if "types" in manifest:
        return {k: manifest[k] for k in ("types", "type_counts", "feature_widths")}
    return {"types": HOMOGENEOUS.to_json(), "type_counts": [manifest["num_nodes"]],
            "feature_widths": [manifest["num_features"]]}
