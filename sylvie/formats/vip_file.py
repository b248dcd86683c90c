"""A VIP analysis, what ``sylvie vip`` writes for one partition and sampling setting: ``vip-<k>.npy`` per part and a
checksummed ``manifest.json``. This module is the format's only writer and reader; a manifest of another version is
refused: rerun ``sylvie vip``. Fields: below.
"""
#     vip-<k>.npy    part k's VIP of every vertex of the graph (float64, in the partition's id space)
#     manifest.json  format_version; kind ("vip"); fanouts (DGL's order) and batch_size; seeds (what a minibatch is:
#                    {"task": "node"}, or {"task": "link", "negatives": k, "negative_sampler": ...}; absent: node);
#                    partition_checksum; parts: per part its part, file, sha256, batch_size and expected_sampled (the
#                    VIP's sum); checksum
# ``kind``, ``fanouts``, ``batch_size`` and ``parts`` are also what ``sylvie.output_dir.VIP`` identifies it by.
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from sylvie.atomic import file_sha256, read_json
from sylvie.errors import SylvieError
from sylvie.formats.checksum import checked, with_checksum
from sylvie.output_dir import VIP, identify

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
KIND = "vip"


NODE_SEEDS = {"task": "node"}


def minibatch_seeds(task: str, link=None) -> dict:
    """What an analysis's minibatches are, as its manifest records it: node classification's (seed vertices), or
    link prediction's (``train.task`` link: batches of pairs with the ``link`` section's negatives)."""
    if task != "link":
        return dict(NODE_SEEDS)
    return {"task": "link", "negatives": int(link.negatives), "negative_sampler": str(link.negative_sampler)}


def seeds_id(seeds: dict) -> str:
    """The suffix of an analysis's directory name for its minibatches: none for node classification's,
    ``-link-<sampler>-k<negatives>`` for link prediction's."""
    if seeds.get("task", "node") == "node":
        return ""
    return f"-link-{seeds['negative_sampler']}-k{seeds['negatives']}"


def _seeds_flags(seeds: dict) -> str:
    if seeds.get("task", "node") == "node":
        return ""
    return f" --task link --negatives {seeds['negatives']} --negative-sampler {seeds['negative_sampler']}"


def array_file(part: int) -> str:
    """The file name of part ``part``'s array."""
    return f"vip-{part}.npy"


def write_vip_analysis(directory: str | Path, fanouts: Sequence[int], batch_size: int, partition_checksum: str,
                       parts: Iterable[tuple[np.ndarray, float]], seeds: dict | None = None) -> dict:
    """Write the analysis into ``directory`` (the stage's temporary output directory, moved into place by the
    caller): one array per part as ``parts`` yields them, part 0 first (its VIP and the minibatch size it is for,
    each written before the next is asked for), then the manifest; ``seeds``: ``minibatch_seeds``' record (None: node
    classification's). Returns the manifest."""
    directory = Path(directory)
    entries = []
    for k, (vip, batch) in enumerate(parts):
        name = array_file(k)
        np.save(directory / name, vip)
        entries.append({"part": k, "file": name, "sha256": file_sha256(directory / name), "batch_size": batch,
                        "expected_sampled": float(vip.sum())})
    manifest = with_checksum({"format_version": FORMAT_VERSION, "kind": KIND, "fanouts": list(fanouts),
                              "batch_size": batch_size, "seeds": dict(seeds or NODE_SEEDS),
                              "partition_checksum": partition_checksum, "parts": entries})
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def read_vip(vip_dir, part: int, partition_checksum: str, fanouts: Sequence[int], batch_size: int,
             seeds: dict | None = None) -> np.ndarray:
    """Part ``part``'s VIP array (memory-mapped) as ``sylvie vip`` wrote it into ``vip_dir``, checked against the
    format's version, the partition and the sampling setting it must belong to, ``seeds`` (``minibatch_seeds``'
    record; None: node classification's) among it (and its sha256)."""
    vip_dir = Path(vip_dir)
    manifest_path = vip_dir / MANIFEST
    seeds = dict(seeds or NODE_SEEDS)
    setting = f"--fanouts {' '.join(map(str, fanouts))} --batch-size {batch_size}{_seeds_flags(seeds)}"
    what = identify(vip_dir)
    if what and not what.startswith(f"a {VIP.what} "):  # another of our outputs: say which
        raise SylvieError(f"--vip {vip_dir} is {what}, not a VIP analysis; pass the --out of `sylvie vip PARTITION "
                          f"--out DIR {setting}` (the pipeline's vip rule writes data/vip/...)")
    if not manifest_path.is_file():
        raise SylvieError(f"{manifest_path}: not found; write the VIP analysis with `sylvie vip PARTITION --out "
                          f"{vip_dir} {setting}` (the pipeline's vip rule)")
    manifest = read_json(manifest_path, "VIP manifest")
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise SylvieError(f"{manifest_path}: not the manifest of a VIP analysis (no \"kind\": \"vip\"); pass the "
                          f"--out of `sylvie vip PARTITION --out DIR {setting}` as --vip")
    rerun = f"rerun `sylvie vip` for this partition with {setting}"
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        written = "before the format had a version" if version is None else f"in format version {version!r}"
        raise SylvieError(f"{manifest_path}: a VIP analysis written {written}; this sylvie reads version "
                          f"{FORMAT_VERSION}: {rerun}")
    manifest = checked(manifest, manifest_path, "sylvie vip", rerun, "a VIP manifest")
    if manifest.get("partition_checksum") != partition_checksum:
        raise SylvieError(f"{manifest_path}: written for another partition; {rerun}")
    if list(manifest.get("fanouts", [])) != list(fanouts) or manifest.get("batch_size") != batch_size:
        raise SylvieError(f"{manifest_path}: for fanouts {manifest.get('fanouts')} and batch size "
                          f"{manifest.get('batch_size')}, not sampling.fanouts {list(fanouts)} and sampling.batch_size "
                          f"{batch_size}; {rerun}")
    written = manifest.get("seeds", NODE_SEEDS)
    if written != seeds:
        raise SylvieError(f"{manifest_path}: for the minibatches of {_seeds_words(written)}, not of "
                          f"{_seeds_words(seeds)}; {rerun}")
    entry = next((p for p in manifest.get("parts", []) if p.get("part") == part), None)
    if entry is None:
        raise SylvieError(f"{manifest_path}: has no part {part}; {rerun}")
    path = vip_dir / entry["file"]
    if not path.is_file() or file_sha256(path) != entry["sha256"]:
        raise SylvieError(f"{path}: missing or not the file the manifest describes (sha256 differs); {rerun}")
    return np.load(path, mmap_mode="r")


def _seeds_words(seeds: dict) -> str:
    if seeds.get("task", "node") == "node":
        return "node classification"
    return (f"link prediction (link.negatives {seeds.get('negatives')}, link.negative_sampler "
            f"{seeds.get('negative_sampler')})")
