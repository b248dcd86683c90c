"""A rank's part of a typed graph, for full-neighbourhood passes: what ``rank_graph.RankGraph`` is for a homogeneous
one, with the rows kept per node type (``sylvie.models.typed_block``).

Type t's source rows on this rank: its inner rows of type t (type-contiguous in the shard), then its halo rows of
type t in the halo table's order (which is by owner). The halo plan, the Low-bit Module and the exchange keep their
shape: a hidden layer's rows of every type travel as one matrix, the rank's inner rows in their order, in one
all-to-all (``TypedHalo``), and come back split by type. Rows of some types only travel on a plan of their own row
space (``HaloPlan.of_rows``): each featured type's layer-0 features once, at set-up, in fp32; the embedding tables
of the types without features every step, as a layer of their own (``embedding_layer``): their values forward,
their gradients back to the owners.

A homogeneous shard is the case of one type and one relation (R-GCN and R-GAT train on it too).
"""
from __future__ import annotations

import numpy as np
import torch

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.stats import CommStats
from sylvie.errors import SylvieError
from sylvie.formats.splits import SPLITS
from sylvie.models.blocks import edges_by_relation, relation_block
from sylvie.models.typed_block import TypedBlock
from sylvie.partition.shard_format import Shard
from sylvie.runtime.process_group import Context, all_reduce_sum


class TypedRows:
    """Where each node type's rows are among a rank's inner and halo rows, and the plans of row subsets."""

    def __init__(self, shard: Shard, plan: HaloPlan, device):
        self.num_types = len(shard.types.node_types)
        inner_counts = shard.inner_type_counts()
        self.inner_offsets = np.concatenate([[0], np.cumsum(inner_counts)]).astype(np.int64)
        self.inner_type = np.repeat(np.arange(self.num_types), inner_counts)
        self.halo_type = shard.halo_types()
        halo_of = [np.flatnonzero(self.halo_type == t) for t in range(self.num_types)]
        self.num_dst = tuple(int(c) for c in inner_counts)
        self.num_src = tuple(self.num_dst[t] + len(halo_of[t]) for t in range(self.num_types))
        # a halo row's position among the halo rows of its type
        self.halo_position = np.empty(len(self.halo_type), dtype=np.int64)
        for rows in halo_of:
            self.halo_position[rows] = np.arange(len(rows))
        self.halo_of = [torch.from_numpy(rows).to(device) for rows in halo_of]
        self.plan, self.device = plan, device

    def inner_slice(self, t: int) -> slice:
        return slice(int(self.inner_offsets[t]), int(self.inner_offsets[t + 1]))

    def plan_of(self, types: list[int]) -> tuple[HaloPlan, list[torch.Tensor]]:
        """The plan of the rows of ``types`` (their own row space: their inner rows in type order, their halo
        rows in halo order), and where each of those types' rows are among its halo rows."""
        keep = np.isin(self.inner_type, types)
        halo_keep = np.isin(self.halo_type, types)
        kept_types = self.halo_type[halo_keep]
        return (self.plan.of_rows(keep, halo_keep),
                [torch.from_numpy(np.flatnonzero(kept_types == t)).to(self.device) for t in range(self.num_types)])

    def source_rows(self, u: np.ndarray, t: int) -> np.ndarray:
        """Local rows ``u`` (inner or halo, all of node type ``t``) as rows of type t's sources."""
        num_inner = len(self.inner_type)
        out = u - self.inner_offsets[t]
        halo = u >= num_inner
        out[halo] = self.num_dst[t] + self.halo_position[u[halo] - num_inner]
        return out


def typed_rank_block(shard: Shard, rows: TypedRows, device) -> TypedBlock:
    """The rank's typed block: per relation, its edges into this rank's inner rows in the rows of their types."""
    types = shard.types
    relation = shard.edge_relation if shard.edge_relation is not None else np.zeros(len(shard.edge_src), np.int16)
    blocks = []
    for r, mine in enumerate(edges_by_relation(relation, len(types.relations))):
        s, d = types.ends(r)
        src = rows.source_rows(shard.edge_src[mine].astype(np.int64), s)
        dst = shard.edge_dst[mine].astype(np.int64) - rows.inner_offsets[d]
        blocks.append(relation_block(src, dst, rows.num_src[s], rows.num_dst[d], s == d))
    return TypedBlock(types, rows.num_dst, rows.num_src, tuple(blocks)).to(device)


class TypedHalo:
    """The typed model's halo rows (``TypedGNN``'s ``halo(rows, layer)``) from a ``HaloExchange``: at layer 0 the
    embedding tables' rows (of the types without features) on their own plan, as exchange layer
    ``embedding_layer``; at a later layer every type's rows as one matrix on the full plan."""

    def __init__(self, exchange: HaloExchange, rows: TypedRows, embedded: list[int], embedding_layer: int):
        self.exchange, self.rows, self.embedded, self.embedding_layer = exchange, rows, embedded, embedding_layer
        self.embedding_plan, self.embedding_split = rows.plan_of(embedded) if embedded else (None, None)

    def __call__(self, inner: list, layer: int) -> list:
        if layer == 0:
            got = self.exchange(torch.cat([inner[t] for t in self.embedded]), self.embedding_layer,
                                rows=self.embedding_plan)
            split = self.embedding_split
        else:
            got = self.exchange(torch.cat(inner), layer)
            split = self.rows.halo_of
        return [None if inner[t] is None else torch.index_select(got, 0, split[t]) for t in range(len(inner))]


class TypedRankGraph:
    """A rank's typed part: its typed block, each type's layer-0 source rows (None for a type without features),
    labels and splits of its target-type rows, and evaluation (fp32, synchronous)."""

    def __init__(self, ctx: Context, shard: Shard):
        self.ctx = ctx
        dev = ctx.device
        self.types = shard.types
        self.plan = HaloPlan.build(shard.halo_owner_index, shard.halo_counts().tolist(), shard.num_inner, dev)
        self.rows = TypedRows(shard, self.plan, dev)
        self.block = typed_rank_block(shard, self.rows, dev)
        self.eval_stats = CommStats()
        self.eval_halo = HaloExchange(self.plan, self.eval_stats, FULL_PRECISION)
        self._eval_model_halo: TypedHalo | None = None
        type_feat = shard.type_feat if shard.typed else (shard.feat,)
        self.feature_widths = tuple(None if f is None else int(f.shape[1]) for f in type_feat)
        self.embedded = [t for t, f in enumerate(type_feat) if f is None]
        self.x: list[torch.Tensor | None] = []
        for t, f in enumerate(type_feat):  # layer-0 halo features: exchanged once, in full precision, per type
            if f is None:
                self.x.append(None)
                continue
            plan, _ = self.rows.plan_of([t])
            inner = torch.tensor(f, device=dev)  # a copy: shard arrays are read-only Arrow memory
            with torch.no_grad():
                self.x.append(torch.cat([inner, self.eval_halo(inner, 0, rows=plan)]))
        setup = torch.tensor([float(self.eval_stats.bytes_sent)], dtype=torch.float64, device=dev)
        self.setup_bytes = int(all_reduce_sum(setup).item())
        target = self.rows.inner_slice(self.types.target_index)
        self.labels = torch.tensor(shard.label[target], device=dev)
        self.masks = {s: torch.tensor(getattr(shard, s)[target], device=dev) for s in SPLITS}

    def halo(self, exchange: HaloExchange, layers: int) -> TypedHalo:
        """The model's halo rows from ``exchange``; the embeddings travel as exchange layer ``layers`` (after the
        model's own, 1 .. layers - 1)."""
        return TypedHalo(exchange, self.rows, self.embedded, layers)

    @torch.no_grad()
    def predict(self, model) -> torch.Tensor:
        """The predicted class of every inner row of the target type (eval mode), full neighbourhoods, fp32 halo
        rows; collective: every rank calls it. The evaluation's halo (and its embedding rows' plan) is made at the
        first call and kept."""
        model.eval()
        layers = len(model.convs)
        if self._eval_model_halo is None or self._eval_model_halo.embedding_layer != layers:
            self._eval_model_halo = self.halo(self.eval_halo, layers)
        return model(self.block, self.x, self._eval_model_halo).argmax(1)

    def accuracy_counts(self, model) -> torch.Tensor:
        """As ``RankGraph.accuracy_counts``, over the target type's rows."""
        right = self.predict(model) == self.labels
        return torch.stack([torch.stack([(right & self.masks[s]).sum(), self.masks[s].sum()]) for s in SPLITS]).to(
            torch.float64)


def check_typed(shard: Shard, model, train) -> None:
    """A typed graph trains a typed model (R-GCN, R-GAT), without boundary-node sampling (not offered for them)."""
    from sylvie.models.typed_gnn import TYPED_ARCHS
    if shard.typed and model.arch not in TYPED_ARCHS:
        raise SylvieError(f"the partition is of a typed graph ({len(shard.types.node_types)} node types, "
                          f"{len(shard.types.relations)} relations): model.arch {model.arch} takes one node type and "
                          f"one relation; train it with model.arch rgcn or rgat")
    if model.arch in TYPED_ARCHS and train.boundary_sampling < 1:
        raise SylvieError(f"train.boundary_sampling {train.boundary_sampling:g} is not offered for model.arch "
                          f"{model.arch}; set it to 1")


def embedding_ids(shard: Shard, rows: TypedRows) -> list[np.ndarray | None]:
    """For each node type without features, its ids (within the type) of this rank's nodes of it; None for the
    others."""
    if not shard.typed:
        return [None]
    return [None if f is not None else shard.global_id[rows.inner_slice(t)].astype(np.int64) - shard.type_offsets[t]
            for t, f in enumerate(shard.type_feat)]


def partitioned_embeddings(shard: Shard, ids: list, device) -> dict[str, tuple[torch.Tensor, int]]:
    """The typed model's embedding tables partitioned with their nodes (``embedding_ids``' ``ids``): parameter name ->
    (this rank's rows' ids within the type, the type's node count), as ``PartitionedWeights`` takes them."""
    totals = shard.type_offsets if shard.typed else [0, shard.num_inner]
    return {f"embeddings.{t}.weight": (torch.as_tensor(ids[t], device=device), int(totals[t + 1] - totals[t]))
            for t in range(len(ids)) if ids[t] is not None}
