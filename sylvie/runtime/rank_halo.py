"""The model's halo rows (``GNN``'s ``halo(rows, layer)``) from a ``HaloExchange``, per node type.

A hidden layer's rows of every type travel as one matrix (the rank's inner rows in their order) in one all-to-all
and come back split by type. At layer 0 only the embedding tables of the types without features travel, on a plan
of their own rows, as exchange layer ``embedding_layer``: their values forward, their gradients back to the owners.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.runtime.type_rows import TypeRows


@dataclass
class RankHalo:
    exchange: HaloExchange
    rows: TypeRows
    embedded: list[int]
    embedding_layer: int
    split: list[torch.Tensor] | None = None  # where each type's rows are among the halo rows received
    kept: list[torch.Tensor] | None = None  # per type, the kept halo rows among its own (boundary-node sampling)

    def __post_init__(self):
        self.embedding_plan, self.embedding_split = self.rows.plan_of(self.embedded) if self.embedded else (None, None)
        if self.split is None:
            self.split = self.rows.halo_of

    def sampled(self, kept: list[torch.Tensor], split: list[torch.Tensor]) -> RankHalo:
        """The halo of an epoch that keeps only some halo rows (``TypeRows.kept``'s: per type, the kept rows among
        its own, and where they are among the kept rows)."""
        return replace(self, split=split, kept=kept)

    def __call__(self, inner: list, layer: int) -> list:
        if layer == 0:
            got = self.exchange(torch.cat([inner[t] for t in self.embedded]), self.embedding_layer,
                                rows=self.embedding_plan)
            out = [None if x is None else torch.index_select(got, 0, self.embedding_split[t])
                   for t, x in enumerate(inner)]
            if self.kept is not None:
                out = [None if x is None else torch.index_select(x, 0, self.kept[t]) for t, x in enumerate(out)]
            return out
        if len(inner) == 1:
            return [self.exchange(inner[0], layer)]
        got = self.exchange(torch.cat(inner), layer)
        return [None if x is None else torch.index_select(got, 0, self.split[t]) for t, x in enumerate(inner)]
