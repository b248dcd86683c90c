"""The vip stage (``sylvie vip``): for every part of a partition, the VIP of every vertex (``vip-<k>.npy``,
float64, in the partition's id space, for the minibatches the sampled trainer draws from that part) plus
``manifest.json`` (the sampling setting, the partition it belongs to, a sha256 per file). Computed once per
partition and sampling setting, reused across seeds and cache sizes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tqdm import tqdm

from sylvie.atomic import atomic_path, file_sha256
from sylvie.output_dir import VIP, check_replaceable
from sylvie.partition.shard_reader import read_manifest, read_shard, read_topology
from sylvie.sampling.vip import iterations_per_epoch, vertex_inclusion_probability


def write_vip(partition_dir: str | Path, out_dir: str | Path, sampling, progress: bool = True) -> dict:
    """VIP per part for ``sampling`` (the config's typed section: ``fanouts`` in DGL's order, ``batch_size``)."""
    check_replaceable(out_dir, VIP, inputs=(partition_dir,))
    manifest = read_manifest(partition_dir)
    topo = read_topology(partition_dir, manifest)
    parts = manifest["num_parts"]
    trains = [topo.part_offsets[k] + np.flatnonzero(read_shard(partition_dir, k, manifest).train)
              for k in range(parts)]
    # the batches the trainer draws: each part's training vertices cut evenly into as many as the largest part needs
    iterations = iterations_per_epoch([len(t) for t in trains], sampling.batch_size)
    files = []
    with atomic_path(out_dir, directory=True, kind=VIP, inputs=(partition_dir,)) as tmp:
        for k in tqdm(range(parts), desc="vip", unit="part", disable=not progress):
            batch = len(trains[k]) / iterations
            vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, trains[k], batch,
                                               list(reversed(sampling.fanouts)))
            name = f"vip-{k}.npy"
            np.save(tmp / name, vip)
            files.append({"part": k, "file": name, "sha256": file_sha256(tmp / name), "batch_size": batch,
                          "expected_sampled": float(vip.sum())})
        out = {"kind": "vip", "fanouts": list(sampling.fanouts), "batch_size": sampling.batch_size,
               "partition_checksum": manifest["checksum"], "parts": files}
        (tmp / "manifest.json").write_text(json.dumps(out, indent=2) + "\n")
    return out
