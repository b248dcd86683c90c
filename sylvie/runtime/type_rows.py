"""Where each node type's rows are among a rank's inner and halo rows.

Type t's source rows on a rank: its inner rows of type t (type-contiguous in the shard), then its halo rows of type t
in the halo table's order (by owner). A graph of one type is the identity. Rows of some types travel on a plan of
their own row space (``HaloPlan.of_rows``).
"""
from __future__ import annotations

import numpy as np
import torch

from sylvie.comm.halo_plan import HaloPlan
from sylvie.partition.shard_format import Shard


class TypeRows:
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
        """The plan of the rows of ``types`` (their own row space: their inner rows in type order, their halo rows in
        halo order), and where each of those types' rows are among its halo rows."""
        if self.num_types == 1:
            return self.plan, self.halo_of
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

    def kept(self, halo_kept: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """For halo rows ``halo_kept`` (indices among all halo rows, ascending), per type: their positions among the
        type's halo rows, and where the type's ones are among the kept rows."""
        if self.num_types == 1:
            return [halo_kept], [torch.arange(halo_kept.shape[0], device=halo_kept.device)]
        kept = halo_kept.cpu().numpy()
        types = self.halo_type[kept]
        where = [np.flatnonzero(types == t) for t in range(self.num_types)]
        return ([torch.from_numpy(self.halo_position[kept[w]]).to(self.device) for w in where],
                [torch.from_numpy(w).to(self.device) for w in where])

    def embedding_ids(self, shard: Shard) -> list[np.ndarray | None]:
        """For each node type without features, its ids (within the type) of this rank's nodes of it; None for the
        others."""
        if not shard.typed:
            return [None]
        return [None if f is not None else
                shard.global_id[self.inner_slice(t)].astype(np.int64) - shard.type_offsets[t]
                for t, f in enumerate(shard.type_feat)]


def partitioned_embeddings(shard: Shard, ids: list, device) -> dict[str, tuple[torch.Tensor, int]]:
    """The model's embedding tables partitioned with their nodes (``TypeRows.embedding_ids``' ``ids``): parameter
    name -> (this rank's rows' ids within the type, the type's node count), as ``PartitionedWeights`` takes them."""
    totals = shard.type_offsets if shard.typed else [0, shard.num_inner]
    return {f"embeddings.{t}.weight": (torch.as_tensor(ids[t], device=device), int(totals[t + 1] - totals[t]))
            for t in range(len(ids)) if ids[t] is not None}
