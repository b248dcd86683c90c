"""The layout of one partition shard and of the replicated topology, shared by the writer and the reader (the manifest
and the format version are ``sylvie.formats.partition_manifest``'s).

A shard is one Arrow IPC file of one row whose columns are lists, so every array is one contiguous, memory-mappable
buffer: inner nodes, local edges (local ids: inner rows first, then halo rows) and the halo table, sorted by owner so
each peer's rows are one block. Columns: below.
"""
# A shard's columns:
#
#     inner nodes  global_id, feat (list of fixed_size_list<float32>[D]), label, train, val, test,
#                  in_degree, out_degree (global degrees, for degree-normalised layers)
#     local edges  edge_src, edge_dst: local ids; dst is an inner row, src an inner row (< n_inner)
#                  or a halo row (n_inner + halo index)
#     halo table   halo_global_id, halo_owner (rank that owns the node), halo_owner_index (its row in the
#                  owner's inner nodes), halo_out_degree; sorted by (owner, global id), so the rows received
#                  from each peer are one contiguous block
#
# A typed graph's shard (partition format 4: the manifest's ``types``) holds, instead of ``feat``, a column
# ``feat.<t>`` for each node type t with features (the rows of its inner nodes of that type, in their order), and
# ``edge_relation`` (int16): each local edge's relation. Its inner rows are type-contiguous (global ids are), its halo
# rows are not (they are by owner): a node's type is found from its global id and the manifest's ``type_counts``.
#
# Local ids: inner rows first (in global-id order), then halo rows. Node ids (global and local, the halo table's
# owners and owner rows, the topology's sources and original ids) are 32-bit where every id fits (fewer than 2^31
# nodes: ``id_type``; the manifest's ``id_bits``), else 64-bit; offsets, degrees and labels are 64-bit.
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

# tests/test_failures.py and tests/test_sampled_training.py import it from here (they edit a manifest);
from sylvie.formats.splits import SPLITS
from sylvie.graph_types import HOMOGENEOUS, GraphTypes

TOPOLOGY_FILE = "topology.arrow"
TOPOLOGY_COLUMNS = ("in_indptr", "in_src", "original_id")


ID_COLUMNS = ("global_id", "edge_src", "edge_dst", "halo_global_id", "halo_owner", "halo_owner_index", "in_src",
              "original_id")


def id_type(num_nodes: int) -> pa.DataType:
    """The width of a partition's node ids: 32-bit where every id fits."""
    return pa.int32() if num_nodes < 2 ** 31 else pa.int64()


def id_bits_type(id_bits: int) -> pa.DataType:
    """The manifest's ``id_bits`` as an Arrow type."""
    return pa.int32() if id_bits == 32 else pa.int64()


INT64 = pa.int64()


def _int_field(name: str, ids: pa.DataType) -> pa.Field:
    return pa.field(name, pa.large_list(ids if name in ID_COLUMNS else INT64))


TOPOLOGY_RELATION = "in_relation"  # a typed graph's (partition format 5): each in-edge's relation


def topology_schema(ids: pa.DataType = INT64, typed: bool = False) -> pa.Schema:
    """The replicated topology: one row of large lists (one contiguous, memory-mappable buffer each); ``ids``: the
    width of its node ids; ``typed``: a typed graph's, with each in-edge's relation (int16)."""
    fields = [_int_field(name, ids) for name in TOPOLOGY_COLUMNS]
    if typed:
        fields.append(pa.field(TOPOLOGY_RELATION, pa.large_list(pa.int16())))
    return pa.schema(fields)


@dataclass
class Topology:
    """The whole graph's in-edges in the partition's id space: part k owns ids ``part_offsets[k]`` up to
    ``part_offsets[k + 1]``, in the order of its shard's inner rows, so owner and local row of any node are O(1).
    ``in_src[in_indptr[v]:in_indptr[v + 1]]`` are the sources of v's in-edges (ascending; a typed graph's by
    relation, then source, ``in_relation`` giving each one's relation); ``original_id[v]`` is v's id in the canonical
    graph. Arrays are read-only views of the memory-mapped file. A typed graph's ``types`` and ``type_offsets`` (the
    canonical graph's first id of each type, then its node count) give each node's type (``node_type``)."""
    in_indptr: np.ndarray
    in_src: np.ndarray
    original_id: np.ndarray
    part_offsets: np.ndarray
    in_relation: np.ndarray | None = None
    types: GraphTypes = HOMOGENEOUS
    type_offsets: np.ndarray | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.in_indptr.shape[0] - 1)

    def owner(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.part_offsets, ids, side="right") - 1

    def local_index(self, ids: np.ndarray) -> np.ndarray:
        return ids - self.part_offsets[self.owner(ids)]

    def node_type(self, ids: np.ndarray) -> np.ndarray:
        """The node type (index in ``types.node_types``) of nodes ``ids``."""
        if self.type_offsets is None:
            return np.zeros(np.shape(ids), np.int64)
        return np.searchsorted(self.type_offsets, self.original_id[ids], side="right") - 1


INT_COLUMNS = ("global_id", "label", "in_degree", "out_degree", "edge_src", "edge_dst",
               "halo_global_id", "halo_owner", "halo_owner_index", "halo_out_degree")
MASK_COLUMNS = SPLITS  # a node's splits, a bool column each


def feat_column(t: int | None) -> str:
    """The features' column: ``feat`` (a homogeneous graph), ``feat.<t>`` (node type t of a typed graph)."""
    return "feat" if t is None else f"feat.{t}"


def _feat_field(name: str, width: int) -> pa.Field:
    return pa.field(name, pa.large_list(pa.list_(pa.float32(), width)))


def shard_schema(num_features: int, ids: pa.DataType = INT64,
                 feature_widths: list[int | None] | None = None) -> pa.Schema:
    """A shard's columns; ``ids``: the width of its node ids; ``feature_widths``: a typed graph's, per node type
    (None: a homogeneous graph of ``num_features``)."""
    if feature_widths is None:
        fields = [_feat_field("feat", num_features)]
    else:
        fields = [_feat_field(feat_column(t), w) for t, w in enumerate(feature_widths) if w is not None]
    fields += [_int_field(c, ids) for c in INT_COLUMNS]
    fields += [pa.field(c, pa.large_list(pa.bool_())) for c in MASK_COLUMNS]
    if feature_widths is not None:
        fields.append(pa.field(RELATION_COLUMN, pa.large_list(pa.int16())))
    return pa.schema(fields)


RELATION_COLUMN = "edge_relation"


@dataclass
class Shard:
    """Partition ``part`` of ``num_parts``: its inner nodes, local edges and halo table."""

    part: int
    num_parts: int
    num_classes: int
    num_train_global: int
    global_id: np.ndarray
    feat: np.ndarray
    label: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    in_degree: np.ndarray
    out_degree: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    halo_global_id: np.ndarray
    halo_owner: np.ndarray
    halo_owner_index: np.ndarray
    halo_out_degree: np.ndarray
    # a typed graph's (partition format 4): its types, the global first id of each type (then the node count), each
    # type's features (None: a type without features; ``feat`` then has no columns) and each edge's relation
    types: GraphTypes = HOMOGENEOUS
    type_offsets: np.ndarray | None = None
    type_feat: tuple | None = None
    edge_relation: np.ndarray | None = None

    @property
    def typed(self) -> bool:
        return not self.types.homogeneous

    def inner_type_counts(self) -> tuple[int, ...]:
        """Inner rows of each node type (type-contiguous)."""
        if not self.typed:
            return (self.num_inner,)
        return tuple(np.diff(np.searchsorted(self.global_id, self.type_offsets)).tolist())

    def halo_types(self) -> np.ndarray:
        """The node type of every halo row (int64)."""
        if not self.typed:
            return np.zeros(self.num_halo, np.int64)
        return np.searchsorted(self.type_offsets, self.halo_global_id, side="right") - 1

    @property
    def num_inner(self) -> int:
        return int(self.global_id.shape[0])

    @property
    def num_halo(self) -> int:
        return int(self.halo_global_id.shape[0])

    def halo_counts(self) -> np.ndarray:
        """Number of halo rows owned by each rank (length num_parts)."""
        return np.bincount(self.halo_owner, minlength=self.num_parts).astype(np.int64)
