"""A rank's part of the graph, for full-neighbourhood passes: the full-graph trainer trains on it and both trainers
evaluate on it (fp32, synchronous halo rows, so that accuracies measure the model, not the wire). Its block has per node
type the rank's inner rows as destinations and inner + 1-hop halo rows as sources, with global degrees; layer-0 halo
rows are exchanged once, at set-up.
"""
# The block holds a relation block per relation; each featured type's layer-0 halo rows are exchanged in fp32. Under
# boundary-node sampling an epoch trains on ``subgraph``: the block less the halo rows the epoch's sample drops.
from __future__ import annotations

import numpy as np
import torch

from sylvie.comm.halo_exchange import HaloExchange
from sylvie.comm.halo_plan import HaloPlan
from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.stats import CommStats
from sylvie.formats.splits import SPLITS
from sylvie.models.block import Block
from sylvie.models.blocks import edges_by_relation, halo_subblock, relation_block
from sylvie.partition.shard_format import Shard
from sylvie.runtime.process_group import Context, all_reduce_sum
from sylvie.runtime.rank_halo import RankHalo
from sylvie.runtime.type_rows import TypeRows


class RankGraph:
    """``self_loop``: one self-loop edge per node in every relation within one node type; ``out_degrees``: each
    relation's global out-degrees (what GCN normalises by; a graph of one relation has them in its shard)."""

    def __init__(self, ctx: Context, shard: Shard, self_loop: bool, out_degrees: bool = False):
        self.ctx = ctx
        dev = ctx.device
        self.types = shard.types
        self.plan = HaloPlan.build(shard.halo_owner_index, shard.halo_counts().tolist(), shard.num_inner, dev)
        self.rows = TypeRows(shard, self.plan, dev)
        self.eval_stats = CommStats()
        self.eval_halo = HaloExchange(self.plan, self.eval_stats, FULL_PRECISION)
        self.block = self._block(shard, self_loop, out_degrees)
        self._eval_model_halo: RankHalo | None = None
        type_feat = shard.type_feat if shard.typed else (shard.feat,)
        self.feature_widths = tuple(None if f is None else int(f.shape[1]) for f in type_feat)
        self.embedded = [t for t, f in enumerate(type_feat) if f is None]
        self.x: list[torch.Tensor | None] = []
        for t, f in enumerate(type_feat):  # layer-0 halo features: exchanged once, in full precision, per type
            if f is None:
                self.x.append(None)
                continue
            inner = torch.tensor(f, device=dev)  # a copy: shard arrays are read-only Arrow memory
            with torch.no_grad():
                halo = self.eval_halo(inner, 0) if self.rows.num_types == 1 else \
                    self.eval_halo(inner, 0, rows=self.rows.plan_of([t])[0])
                self.x.append(torch.cat([inner, halo]))
        setup = torch.tensor([float(self.eval_stats.bytes_sent)], dtype=torch.float64, device=dev)
        self.setup_bytes = int(all_reduce_sum(setup).item())  # all ranks together
        target = self.rows.inner_slice(self.types.target_index)
        self.labels = torch.tensor(shard.label[target], device=dev)
        self.masks = {s: torch.tensor(getattr(shard, s)[target], device=dev) for s in SPLITS}

    def _block(self, shard: Shard, self_loop: bool, out_degrees: bool) -> Block:
        """Per relation, its edges into this rank's inner rows in the rows of their types."""
        types, rows, dev = self.types, self.rows, self.ctx.device
        if len(types.relations) == 1 and rows.num_types == 1:  # the shard's local ids and global degrees, as they are
            rel = relation_block(shard.edge_src, shard.edge_dst, rows.num_src[0], rows.num_dst[0], True, self_loop,
                                 shard.in_degree, np.concatenate([shard.out_degree, shard.halo_out_degree]), dev)
            return Block(types, rows.num_dst, rows.num_src, (rel,))
        relation = shard.edge_relation if shard.edge_relation is not None else np.zeros(len(shard.edge_src), np.int16)
        edges = []
        for r, mine in enumerate(edges_by_relation(relation, len(types.relations))):
            s, d = types.ends(r)
            edges.append((rows.source_rows(shard.edge_src[mine].astype(np.int64), s),
                          shard.edge_dst[mine].astype(np.int64) - rows.inner_offsets[d]))
        outs = self._global_out_degrees(edges) if out_degrees else [None] * len(edges)
        blocks = []
        for r, ((src, dst), out) in enumerate(zip(edges, outs, strict=True)):
            s, d = types.ends(r)
            blocks.append(relation_block(src, dst, rows.num_src[s], rows.num_dst[d], s == d, self_loop and s == d,
                                         out_degree=out, device=dev))
        return Block(types, rows.num_dst, rows.num_src, tuple(blocks))

    def _global_out_degrees(self, edges: list) -> list[np.ndarray]:
        """Each relation's out-degree of its source rows over the whole graph: this rank's counts of its halo rows
        summed into their owners' (the exchange's backward), the owners' totals sent back to the halo rows."""
        rows, num_inner = self.rows, len(self.rows.inner_type)
        local_row = [np.concatenate([np.flatnonzero(rows.inner_type == t), num_inner + rows.halo_of[t].cpu().numpy()])
                     for t in range(rows.num_types)]  # type t's source row -> the rank's local row
        size = num_inner + len(rows.halo_type)
        counts = np.stack([np.bincount(local_row[self.types.ends(r)[0]][src], minlength=size)
                           for r, (src, _) in enumerate(edges)], axis=1).astype(np.float32)  # exact below 2^24
        total = counts
        if len(self.plan.send_counts) > 1:  # other ranks hold edges out of this rank's rows
            counts = torch.from_numpy(counts).to(self.ctx.device)
            inner = torch.zeros(num_inner, len(edges), device=self.ctx.device, requires_grad=True)
            (self.eval_halo(inner, 0) * counts[num_inner:]).sum().backward()
            with torch.no_grad():
                total = counts[:num_inner] + inner.grad
                total = torch.cat([total, self.eval_halo(total, 0)]).cpu().numpy()
        total = np.rint(total).astype(np.int64)
        return [total[local_row[self.types.ends(r)[0]], r] for r in range(len(edges))]

    def halo(self, exchange: HaloExchange, layers: int) -> RankHalo:
        """The model's halo rows from ``exchange``; embeddings travel as exchange layer ``layers`` (after the
        model's own, 1 .. layers - 1)."""
        return RankHalo(exchange, self.rows, self.embedded, layers)

    def subgraph(self, kept: list[torch.Tensor]) -> tuple[Block, list]:
        """(block, layer-0 rows) of the partition keeping only some halo rows (``kept``: per type, their positions
        among the type's halo rows, ascending; ``TypeRows.kept``): per type its inner rows, then its kept halo rows."""
        rels = []
        for r, rel in enumerate(self.block.relations):
            s = self.types.ends(r)[0]
            rels.append(halo_subblock(rel, kept[s], self.rows.num_dst[s]))
        num_src = tuple(n + int(k.shape[0]) for n, k in zip(self.rows.num_dst, kept, strict=True))
        xs = []
        for t, x in enumerate(self.x):
            if x is None:
                xs.append(None)
                continue
            n = self.rows.num_dst[t]
            keep = torch.cat([torch.arange(n, device=x.device), n + kept[t].to(x.device)])
            xs.append(torch.index_select(x, 0, keep))
        return Block(self.types, self.rows.num_dst, num_src, tuple(rels)), xs

    def pair_ends(self, model, block: Block | None = None, x: list | None = None, halo: RankHalo | None = None
                  ) -> torch.Tensor:
        """Link prediction's embeddings of every inner row of this rank (a row per partition id it owns, every node
        type: rows of a type no pair ends in are zeros), from ``model`` on ``block`` with ``x`` and ``halo`` (the
        epoch's, in training); without ``block``: in eval mode, without gradients, on the whole partition with fp32
        halo rows (evaluation). Collective."""
        if block is None:
            model.eval()
            with torch.no_grad():
                return self.pair_ends(model, self.block, self.x, self._eval_halo(model))
        types = sorted({t for r in range(len(self.types.relations)) for t in self.types.ends(r)})
        h = model(block, x, halo, out_types=types)
        if self.rows.num_types == 1:
            return h[0]
        width = next(y.shape[1] for y in h if y is not None)
        return torch.cat([y if y is not None else h[types[0]].new_zeros(n, width)
                          for y, n in zip(h, self.rows.num_dst, strict=True)])

    def _eval_halo(self, model) -> RankHalo:
        """The fp32, synchronous halo rows of evaluation, for a model of its number of layers."""
        layers = len(model.convs)
        if self._eval_model_halo is None or self._eval_model_halo.embedding_layer != layers:
            self._eval_model_halo = self.halo(self.eval_halo, layers)
        return self._eval_model_halo

    @torch.no_grad()
    def predict(self, model) -> torch.Tensor:
        """The predicted class of every inner row of the target type (eval mode), full neighbourhoods, fp32 halo
        rows; collective: every rank calls it."""
        model.eval()
        return model(self.block, self.x, self._eval_halo(model)).argmax(1)

    def accuracy_counts(self, model) -> torch.Tensor:
        """This rank's right predictions and nodes per split (float64, ``[len(SPLITS), 2]``), to be summed over the
        ranks (``accuracies`` of the sum); collective (``predict``)."""
        right = self.predict(model) == self.labels
        return torch.stack([torch.stack([(right & self.masks[s]).sum(), self.masks[s].sum()]) for s in SPLITS]).to(
            torch.float64)


def accuracies(counts: torch.Tensor) -> dict[str, float | None]:
    """``{split}_acc`` from the right predictions and nodes per split summed over the ranks (``accuracy_counts``);
    None for a split without nodes (an epoch record's "no value", as when not evaluated)."""
    return {f"{s}_acc": float(c / t) if t > 0 else None for s, (c, t) in zip(SPLITS, counts.tolist())}
