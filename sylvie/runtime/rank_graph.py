"""A rank's part of the whole graph, for full-neighbourhood passes: the full-graph trainer trains on it, and both
trainers evaluate on it (sampled training validates with full neighbourhoods, as DGL's and PyG's users do).

Its block has the rank's inner rows as destinations and inner + 1-hop halo rows as sources, with global degrees;
the layer-0 features of the halo rows are exchanged once, in fp32, at set-up; later layers' halo rows come from a
``HaloExchange`` (fp32 and synchronous for evaluation, so accuracies measure the model, not the wire).

Under boundary-node sampling a training epoch runs on ``subgraph``: the block without the halo rows the epoch's
sample drops, and the layer-0 rows of the sources it keeps. Evaluation always uses the whole partition.
"""
from __future__ import annotations

import numpy as np
import torch

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.stats import CommStats
from sylvie.formats.splits import SPLITS
from sylvie.models.blocks import halo_subblock, local_block
from sylvie.partition.shard_format import Shard
from sylvie.runtime.process_group import Context, all_reduce_sum


class RankGraph:
    def __init__(self, ctx: Context, shard: Shard, self_loop: bool):
        self.ctx = ctx
        dev = ctx.device
        self.plan = HaloPlan.build(shard.halo_owner_index, shard.halo_counts().tolist(), shard.num_inner, dev)
        self.eval_stats = CommStats()
        self.eval_halo = HaloExchange(self.plan, self.eval_stats, FULL_PRECISION)
        self.block = local_block(shard.edge_src, shard.edge_dst, shard.num_inner, shard.num_halo, shard.in_degree,
                                 np.concatenate([shard.out_degree, shard.halo_out_degree]), self_loop, dev)
        x_inner = torch.tensor(shard.feat, device=dev)  # a copy: shard arrays are read-only Arrow memory
        with torch.no_grad():  # layer-0 halo features: exchanged once, in full precision
            self.x = torch.cat([x_inner, self.eval_halo(x_inner, 0)])
        setup = torch.tensor([float(self.eval_stats.bytes_sent)], dtype=torch.float64, device=dev)
        self.setup_bytes = int(all_reduce_sum(setup).item())  # all ranks together
        self.labels = torch.tensor(shard.label, device=dev)
        self.masks = {s: torch.tensor(getattr(shard, s), device=dev) for s in SPLITS}

    def subgraph(self, halo_kept: torch.Tensor):
        """(block, layer-0 rows) of the partition keeping only the halo rows ``halo_kept`` (indices among the halo
        rows, ascending): inner rows, then the kept halo rows."""
        n = self.block.num_dst
        rows = torch.cat([torch.arange(n, device=self.x.device), n + halo_kept.to(self.x.device)])
        return halo_subblock(self.block, halo_kept), torch.index_select(self.x, 0, rows)

    @torch.no_grad()
    def predict(self, model) -> torch.Tensor:
        """The predicted class of every inner row (eval mode: no dropout), full neighbourhoods, fp32 halo rows;
        collective: every rank calls it."""
        model.eval()
        return model(self.block, self.x, self.eval_halo).argmax(1)

    def accuracy_counts(self, model) -> torch.Tensor:
        """This rank's right predictions and nodes per split (float64, ``[len(SPLITS), 2]``, on the rank's device),
        to be summed over the ranks (``accuracies`` of the sum); collective: every rank calls it (``predict``)."""
        right = self.predict(model) == self.labels
        return torch.stack([torch.stack([(right & self.masks[s]).sum(), self.masks[s].sum()]) for s in SPLITS]).to(
            torch.float64)


def accuracies(counts: torch.Tensor) -> dict[str, float | None]:
    """``{split}_acc`` from the right predictions and nodes per split summed over the ranks (``accuracy_counts``);
    None for a split without nodes (an epoch record's "no value", as when not evaluated)."""
    return {f"{s}_acc": float(c / t) if t > 0 else None for s, (c, t) in zip(SPLITS, counts.tolist())}
