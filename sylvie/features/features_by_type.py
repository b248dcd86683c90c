"""A rank's feature rows by node type: one ``RankFeatures`` per type, each in that type's own id space.

Types differ in width, so each has its own table, cache and fetches; part k owns a contiguous range of every type's
space, so ``RankFeatures`` serves it unchanged. ``gather`` is collective, type by type in order. A homogeneous graph
is the case of one type.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from sylvie.comm.collective import all_reduce_sum_together
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.features.batch_rows import BatchRows, PendingRows
from sylvie.features.rank_features import FetchEpoch, GatherCounts, RankFeatures
from sylvie.sampling.batch_transfer import Layout


class TypeSpaces:
    """Each node type's id space, from the partition's part offsets and each part's nodes of each type
    (``part_type_counts``, parts x types)."""

    def __init__(self, part_offsets, part_type_counts):
        self.part_offsets = np.asarray(part_offsets, np.int64)
        counts = np.asarray(part_type_counts, np.int64).reshape(len(self.part_offsets) - 1, -1)
        parts, self.num_types = counts.shape
        self.within = np.zeros((parts, self.num_types + 1), np.int64)  # a type's first row inside each part
        np.cumsum(counts, axis=1, out=self.within[:, 1:])
        self.offsets = np.zeros((self.num_types, parts + 1), np.int64)  # each type's part offsets in its space
        np.cumsum(counts.T, axis=1, out=self.offsets[:, 1:])

    def type_ids(self, ids: np.ndarray, t: int) -> np.ndarray:
        """Partition ids ``ids`` (all of type t) as ids of type t's space."""
        ids = np.asarray(ids, np.int64)
        owner = np.searchsorted(self.part_offsets, ids, side="right") - 1
        return self.offsets[t][owner] + ids - self.part_offsets[owner] - self.within[owner, t]

    def own_ids(self, rank: int, t: int) -> np.ndarray:
        """The partition ids of part ``rank``'s nodes of type t."""
        first = self.part_offsets[rank]
        return np.arange(first + self.within[rank, t], first + self.within[rank, t + 1])


class FeaturesByType:
    def __init__(self, rank: int, spaces: TypeSpaces, own_rows: Sequence[np.ndarray], local_order: Sequence,
                 cached_ids: Sequence, all_to_all, remote_bits: int = FULL_PRECISION, seed: int = 0,
                 gpu_fraction: float = 0.0, zero_copy: str = "auto", device: torch.device | str = "cpu"):
        """Per node type t: ``own_rows[t]`` the rows of the rank's nodes of type t (in id order; None: a type without
        features, which has no store), ``local_order[t]`` their partition ids in table order (hottest first),
        ``cached_ids[t]`` the remote ones to cache (partition ids); the rest as ``RankFeatures``'."""
        self.spaces = spaces
        self.stores = [None if own_rows[t] is None else
                       RankFeatures(rank, spaces.offsets[t], own_rows[t], spaces.type_ids(local_order[t], t),
                                    spaces.type_ids(cached_ids[t], t), all_to_all, remote_bits, seed, gpu_fraction,
                                    zero_copy, device) for t in range(spaces.num_types)]
        self._present = [s for s in self.stores if s is not None]

    @property
    def num_cached(self) -> int:
        return sum(s.num_cached for s in self._present)

    @property
    def fill_bytes(self) -> int:
        """Bytes this rank sent to fill its caches."""
        return sum(s.fill_stats.bytes_sent for s in self._present)

    def begin_epoch(self) -> None:
        for s in self._present:
            s.begin_epoch()

    def end_epoch(self, device: torch.device | str = "cpu", extra: Sequence[torch.Tensor] = ()) -> FetchEpoch:
        """As ``RankFeatures.end_epoch``, over every type."""
        own = torch.zeros(8, dtype=torch.float64, device=device)
        for s in self._present:
            own += s.account(device)
        all_reduce_sum_together([own, *extra])
        return FetchEpoch.of(own, sum(s.seconds for s in self._present))

    def fetch(self, ids: Sequence[torch.Tensor], key: tuple[int, ...] | None = None) -> list[PendingRows | None]:
        """Per node type t ``RankFeatures.fetch`` of ``ids[t]`` (partition ids; None for a type without features),
        collective: every type, in type order."""
        return [None if store is None else store.fetch(*self._in_space(ids, key, t))
                for t, store in enumerate(self.stores)]

    def _in_space(self, ids: Sequence[torch.Tensor], key: tuple[int, ...] | None, t: int) -> tuple:
        """Type t's ids in its own space and its stream's key (type 0's is ``key``, type t's ``(*key, t)``)."""
        return torch.from_numpy(self.spaces.type_ids(ids[t].numpy(), t)), key if t == 0 or key is None else (*key, t)

    def batch_rows(self, pending: Sequence[PendingRows | None], layout: Layout) -> list[BatchRows | None]:
        """Each type's ``pending`` rows laid out in a minibatch's ``layout``."""
        return [None if p is None else BatchRows(store, p, layout) for store, p in zip(self.stores, pending,
                                                                                        strict=True)]

    def gather(self, ids: Sequence[torch.Tensor], key: tuple[int, ...] | None = None) \
            -> tuple[list[torch.Tensor | None], GatherCounts]:
        """Per node type t the rows of ``ids[t]`` (partition ids), in that order, on the training device (None for
        a type without features)."""
        rows, counts = [], GatherCounts()
        for t, store in enumerate(self.stores):
            if store is None:
                rows.append(None)
                continue
            got, where = store.gather(*self._in_space(ids, key, t))
            rows.append(got)
            counts.add(where)
        return rows, counts
