"""The vip stage (``sylvie vip``): for every part of a partition, the VIP of every vertex, for the minibatches the
sampled trainer draws from that part, written as a VIP analysis (``sylvie.formats.vip_file``: an array per part and
a manifest). Computed once per partition and sampling setting, reused across seeds and cache sizes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from sylvie.atomic import atomic_path
from sylvie.formats.partition_manifest import read_manifest
from sylvie.formats.vip_file import write_vip_analysis
from sylvie.output_dir import VIP, check_replaceable
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.sampling.fanouts import resolve_fanouts
from sylvie.sampling.vip import iterations_per_epoch, reverse_edges, vertex_inclusion_probability


def write_vip(partition_dir: str | Path, out_dir: str | Path, sampling, progress: bool = True) -> dict:
    """VIP per part for ``sampling`` (the config's section: ``fanouts`` in DGL's order, ``batch_size``; a typed
    graph's per relation); returns the analysis's manifest."""
    check_replaceable(out_dir, VIP, inputs=(partition_dir,))
    manifest = read_manifest(partition_dir)
    topo = read_topology(partition_dir, manifest)
    fanouts = resolve_fanouts(sampling.fanouts, topo.types)[::-1]  # from the seeds outwards
    reverse = reverse_edges(topo.in_indptr, topo.in_src, topo.in_relation, topo.types.reverse_index())
    parts = manifest["num_parts"]
    trains = [topo.part_offsets[k] + np.flatnonzero(read_shard(partition_dir, k, manifest).train)
              for k in range(parts)]
    # the batches the trainer draws: each part's training vertices cut evenly into as many as the largest part needs
    iterations = iterations_per_epoch([len(t) for t in trains], sampling.batch_size)

    def vip_of_each_part():
        for k in tqdm(range(parts), desc="vip", unit="part", disable=not progress):
            batch = len(trains[k]) / iterations
            yield vertex_inclusion_probability(topo.in_indptr, topo.in_src, trains[k], batch, fanouts,
                                               topo.in_relation, reverse=reverse), batch

    with atomic_path(out_dir, directory=True, kind=VIP, inputs=(partition_dir,)) as tmp:
        return write_vip_analysis(tmp, sampling.fanouts, sampling.batch_size, manifest["checksum"],
                                  vip_of_each_part())
