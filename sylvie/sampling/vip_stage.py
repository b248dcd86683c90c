"""The vip stage (``sylvie vip``): for every part of a partition, the VIP of every vertex, for the minibatches the
sampled trainer draws from that part, written as a VIP analysis (``sylvie.formats.vip_file``: an array per part and
a manifest). Computed once per partition and sampling setting, reused across seeds and cache sizes. Node
classification's minibatches are a part's training vertices; link prediction's (``link``) batches of its training
pairs with their negatives (``sylvie.sampling.edge_seeds``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from sylvie.atomic import atomic_path
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TRAIN, has_link_pairs, read_link_pairs
from sylvie.formats.partition_manifest import read_manifest
from sylvie.formats.vip_file import minibatch_seeds, write_vip_analysis
from sylvie.log import show_progress
from sylvie.output_dir import VIP, check_replaceable
from sylvie.partition.shard_format import Topology
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.sampling.edge_seeds import edge_seeds
from sylvie.sampling.fanouts import resolve_fanouts
from sylvie.sampling.vip import iterations_per_epoch, reverse_edges, vertex_inclusion_probability


def write_vip(partition_dir: str | Path, out_dir: str | Path, sampling, progress: bool = True, link=None) -> dict:
    """VIP per part for ``sampling`` (the config's section: ``fanouts`` in DGL's order, ``batch_size``; a typed
    graph's per relation) and, for link prediction, ``link`` (the section: its negatives); returns the analysis's
    manifest."""
    check_replaceable(out_dir, VIP, inputs=(partition_dir,))
    manifest = read_manifest(partition_dir)
    topo = read_topology(partition_dir, manifest)
    fanouts = resolve_fanouts(sampling.fanouts, topo.types)[::-1]  # from the seeds outwards
    reverse = reverse_edges(topo.in_indptr, topo.in_src, topo.in_relation, topo.types.reverse_index())
    parts = manifest["num_parts"]
    if link is None:
        trains = [topo.part_offsets[k] + np.flatnonzero(read_shard(partition_dir, k, manifest).train)
                  for k in range(parts)]
    else:
        pairs = _training_pairs(partition_dir, manifest, topo)
        trains = [np.flatnonzero(pairs[0] >= topo.part_offsets[k]) for k in range(parts)]
        trains = [t[pairs[0][t] < topo.part_offsets[k + 1]] for k, t in enumerate(trains)]
    # the batches the trainer draws: each part's training vertices (or pairs) cut evenly into as many as the largest
    # part needs
    iterations = iterations_per_epoch([len(t) for t in trains], sampling.batch_size)

    def vip_of_each_part():
        for k in tqdm(range(parts), desc="vip", unit="part", disable=not show_progress(progress)):
            batch = len(trains[k]) / iterations
            if link is None:
                vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, trains[k], batch, fanouts,
                                                   topo.in_relation, reverse=reverse)
            else:
                vip = vertex_inclusion_probability(topo.in_indptr, topo.in_src, None, None, fanouts, topo.in_relation,
                                                   reverse=reverse, edge_seeds=_edge_seeds_of_part(
                                                       topo, pairs, trains[k], k, batch, link))
            yield vip, batch

    with atomic_path(out_dir, directory=True, kind=VIP, inputs=(partition_dir,)) as tmp:
        return write_vip_analysis(tmp, sampling.fanouts, sampling.batch_size, manifest["checksum"],
                                  vip_of_each_part(), minibatch_seeds("link" if link else "node", link))


def _training_pairs(partition_dir: Path, manifest: dict, topo: Topology) -> tuple:
    """The partition's training pairs: sources and destinations (partition ids), relations (None: one) and each
    destination's node type."""
    if not has_link_pairs(partition_dir) or "link_pairs" not in manifest:
        raise SylvieError(f"{partition_dir}: --task link, but this partition's dataset has no edge split (no "
                          f"link_pairs.arrow); set the dataset's edge_split, rerun `sylvie download` and `sylvie "
                          f"partition`, or run `sylvie vip` without --task link")
    n = topo.num_nodes
    pairs = read_link_pairs(partition_dir, n, manifest["link_pairs"], len(topo.types.relations),
                            fix="rerun `sylvie partition`")
    new_of = np.empty(n, np.int64)
    new_of[topo.original_id] = np.arange(n)
    train = pairs.split == TRAIN
    relation = None if pairs.relation is None else pairs.relation[train].astype(np.int64)
    dst = new_of[pairs.dst[train]]
    return new_of[pairs.src[train]], dst, relation, topo.node_type(dst)


def _edge_seeds_of_part(topo: Topology, pairs: tuple, mine: np.ndarray, part: int, batch: float, link):
    """Part ``part``'s edge minibatches (its training pairs ``mine``, ``batch`` a batch) as the VIP takes them."""
    src, dst, relation, dst_type = pairs
    num_types = len(topo.types.node_types)
    node_type = topo.node_type(np.arange(topo.num_nodes))
    if link.negative_sampler == "local":  # the part's own nodes of each type
        ids = np.arange(topo.part_offsets[part], topo.part_offsets[part + 1])
        candidates = [ids[node_type[ids] == t] for t in range(num_types)]
    else:
        candidates = [np.flatnonzero(node_type == t) for t in range(num_types)]
    return edge_seeds(topo.in_indptr, topo.in_src, src[mine], dst[mine], None if relation is None else relation[mine],
                      dst_type[mine], batch, link.negatives, link.negative_sampler, candidates, topo.in_relation,
                      topo.types.reverse_index())
