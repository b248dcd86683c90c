"""``manifest.json`` of a partition (``sylvie partition``): what the partition directory holds and what it was cut
from. Its fields:

    format_version       the partition's format (of this manifest and of the shards and topology it lists)
    dataset, dataset_fingerprint, method, seed
    num_parts, num_nodes, num_edges, num_features, num_classes, num_train, edge_cut
    balance              regime (full or sampled: which constraints, ``sylvie.partition.balance``), tolerance (the
                         bound every constraint was given; null: none) and per constraint (full: inner_nodes,
                         train_nodes, edges; sampled: train_nodes, val_nodes, other_nodes, degree) its max_over_mean
                         over the parts and its vertex_slack (heaviest vertex / mean part); absent in partitions
                         written before it, without regime in those written before the sampled regime (full)
    parts                per part: part, file (part-<k>.arrow), sha256, inner_nodes, train_nodes, edges, halo_nodes,
                         halo_from (halo rows per owner)
    topology             file (topology.arrow), sha256, part_offsets
    checksum             sha256 of all the other fields (``manifest_checksum``): an edited manifest is refused

This module is the manifest's only writer and reader; the shards' and the topology's layout is
``sylvie.partition.shard_format``'s. ``format_version``, ``parts`` and ``num_parts`` are also what
``sylvie.output_dir.PARTITION`` identifies a partition directory by.

Version history (of the whole partition format; bump it when the shards' layout changes too): 1: the first;
2: the manifest carries a checksum of its own. A partition of another version is refused: rerun
``sylvie partition``.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sylvie.atomic import read_json
from sylvie.errors import SylvieError
from sylvie.output_dir import identify

FORMAT_VERSION = 2
MANIFEST = "manifest.json"
# what reading a partition needs of the manifest
_REQUIRED = ("num_parts", "num_features", "num_classes", "num_train", "dataset_fingerprint", "parts")


def manifest_checksum(manifest: dict) -> str:
    """sha256 of the manifest's content without its ``checksum`` field (keys sorted, compact JSON)."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_manifest(directory: str | Path, fields: dict) -> dict:
    """Write the manifest of the partition written into ``directory`` (the stage's temporary output directory, moved
    into place by the caller) with ``fields`` (all but ``format_version`` and ``checksum``, which are added here).
    Returns the manifest."""
    manifest = {"format_version": FORMAT_VERSION, **fields}
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
    if manifest.get("format_version") != FORMAT_VERSION:
        raise SylvieError(f"{path}: format_version {manifest.get('format_version')} is not {FORMAT_VERSION}; "
                          f"rerun `sylvie partition` with this version of sylvie")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise SylvieError(f"{path}: was changed after `sylvie partition` wrote it (its checksum does not match its "
                          f"content); rerun `sylvie partition` rather than editing the manifest")
    if len(manifest["parts"]) != manifest["num_parts"]:
        raise SylvieError(f"{path}: lists {len(manifest['parts'])} shards for num_parts={manifest['num_parts']}")
    return manifest
