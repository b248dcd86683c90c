"""Layer stacks of R-GCN and R-GAT on a typed block (``sylvie.models.typed_block.TypedBlock``), on PyTorch alone.

``forward(tb, xs, halo)``: ``xs`` holds, per node type, the layer-0 rows of its sources (its destinations first,
then its halo rows), or None for a type without features: such a type's layer-0 rows are an embedding table that the
model holds and trains, its rows those of the type's destinations (the whole graph: every node of the type; a rank:
its inner nodes of the type, the table partitioned with its nodes). Where sources are more than destinations (a
rank's part), the model asks ``halo(rows, layer)`` for the halo rows of each type's current state, ``rows`` a list
per node type (None for a type it does not need), and gets a list per type back: at layer 0 the embedding tables'
rows (so an embedding row of a halo node trains exactly as in one process: its value travels forward, its gradient
back), at every later layer the hidden state. With one process (the whole graph) ``halo`` is None.

Between layers: ReLU (R-GCN) or ELU (R-GAT; heads flattened, the last layer's one head), then dropout of every type's
rows. R-GAT's first layer drops out its input, as GAT's does; the last layer computes the target type only, whose
rows the model returns.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from sylvie.errors import SylvieError
from sylvie.graph_types import GraphTypes
from sylvie.models.dropout import Dropout
from sylvie.models.registry import loop_weight
from sylvie.models.rgat import RelGATConv
from sylvie.models.rgcn import RelGraphConv
from sylvie.models.typed_block import TypedBlock

TYPED_ARCHS = ("rgcn", "rgat")
TypedHaloFn = Callable[[list, int], list]


class TypedGNN(nn.Module):
    def __init__(self, arch: str, types: GraphTypes, in_widths: tuple[int | None, ...], hidden: int,
                 num_classes: int, layers: int = 2, dropout: float = 0.5, heads: int = 4,
                 num_bases: int | None = None, embedding_rows: tuple | None = None,
                 embedding_width: int | None = None, embedding_seed: int = 0, self_loop: bool = True):
        """``in_widths``: each node type's feature width, None for a type without features, which gets an
        embedding table of ``embedding_width`` columns (default: the widest feature width, or ``hidden`` where no
        type has features) whose rows are its destinations: ``embedding_rows[t]``, their number (every node of the
        type), or the type's ids of this rank's nodes of the type (an array). A row starts as a function of
        ``embedding_seed``, its type and its id alone (``embedding_init``), so that a table partitioned over ranks
        starts as it does whole; its weight is marked ``rank_local`` (its gradient is not summed over ranks).
        ``self_loop``: every layer's self-loop weight per node type (``x_v W_loop[type]``; the config's
        ``model.self_loop``)."""
        super().__init__()
        if arch not in TYPED_ARCHS:
            raise ValueError(f"unknown typed model arch '{arch}'; choose one of {', '.join(TYPED_ARCHS)}")
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        if len(in_widths) != len(types.node_types):
            raise ValueError(f"{len(in_widths)} input widths for {len(types.node_types)} node types")
        self.arch, self.types, self.heads = arch, types, heads
        featured = [w for w in in_widths if w is not None]
        width = embedding_width or (max(featured) if featured else hidden)
        self.embeddings = nn.ModuleDict()
        for t, w in enumerate(in_widths):
            if w is None:
                if embedding_rows is None:
                    raise ValueError(f"node type {types.node_types[t]!r} has no features: give its embedding rows")
                rows = embedding_rows[t]
                ids = torch.arange(rows) if isinstance(rows, int) else torch.as_tensor(rows, dtype=torch.int64)
                # given its weight, nn.Embedding draws none from torch's generator (which would take a number of
                # draws that differs from rank to rank, and with it every weight drawn after)
                table = nn.Embedding(ids.shape[0], width, _weight=embedding_init(ids, width, embedding_seed, t))
                table.weight.rank_local = True
                self.embeddings[str(t)] = table
        widths = tuple(width if w is None else w for w in in_widths)
        ends = [types.ends(r) for r in range(len(types.relations))]
        self.convs = nn.ModuleList()
        for i in range(layers):
            last = i == layers - 1
            d_out = num_classes if last else hidden
            if arch == "rgcn":
                conv = RelGraphConv(widths, d_out, ends, num_bases, self_loop=self_loop)
            else:
                conv = RelGATConv(widths, d_out, 1 if last else heads, ends, feat_drop=dropout if i == 0 else 0.0,
                                  attn_drop=dropout, self_loop=self_loop)
            self.convs.append(conv)
            widths = (hidden * heads if arch == "rgat" else hidden,) * len(widths)
        self.dropout = Dropout(dropout)

    def keep_rows(self, ids: list) -> TypedGNN:
        """Keep of each embedding table (whole: every node of its type) the rows ``ids[t]`` (a rank's nodes of the
        type; None: a type without a table), in place: the model of one rank of a partition-parallel pass."""
        for t, rows in enumerate(ids):
            if rows is not None:
                table = self.embeddings[str(t)]
                kept = table.weight.detach()[torch.as_tensor(rows, dtype=torch.int64, device=table.weight.device)]
                self.embeddings[str(t)] = nn.Embedding(kept.shape[0], kept.shape[1], _weight=kept.clone())
                self.embeddings[str(t)].weight.rank_local = True
        return self

    def forward(self, tb: TypedBlock | list[TypedBlock], xs: list[torch.Tensor | None],
                halo: TypedHaloFn | None = None) -> torch.Tensor:
        """``tb``: one typed block for every layer (a rank's part, the whole graph), or a sampled minibatch's list,
        one per layer (input layer first; no halo: a layer's destinations are the next one's sources; a type with an
        embedding table then comes with its input rows in ``xs``, pulled from their owners by the trainer)."""
        blocks = tb if isinstance(tb, list) else [tb] * len(self.convs)
        if len(blocks) != len(self.convs):
            raise ValueError(f"{len(blocks)} blocks for a model of {len(self.convs)} layers")
        target = self.types.target_index
        h = list(xs)
        if len(self.embeddings) and isinstance(tb, list):  # sampled: the rows of its inputs, pulled from owners
            missing = [self.types.node_types[int(t)] for t in self.embeddings if h[int(t)] is None]
            if missing:
                raise ValueError(f"node types {missing} learn embeddings: give their input rows (EmbeddingRows.pull)")
        elif len(self.embeddings):
            tables = [self.embeddings[str(t)].weight if str(t) in self.embeddings else None for t in range(len(h))]
            for t, rows in enumerate(self._sources(tb, tables, 0, halo, drop=False)):
                if rows is not None:
                    h[t] = rows
        for i, (conv, block) in enumerate(zip(self.convs, blocks, strict=True)):
            last = i == len(self.convs) - 1
            if i > 0:
                h = self._sources(block, h, i, halo, drop=True)
            for t, x in enumerate(h):
                if x is None or x.shape[0] != block.num_src[t]:
                    raise RuntimeError(f"layer {i}: node type {self.types.node_types[t]!r} got "
                                       f"{None if x is None else x.shape[0]} rows for {block.num_src[t]} sources")
            h = conv(block, h, {target} if last else None)
            if self.arch == "rgat":
                h = [None if y is None else (y.mean(1) if last else y.flatten(1)) for y in h]
            if not last:
                h = [F.elu(y) if self.arch == "rgat" else F.relu(y) for y in h]
        return h[target]

    def _sources(self, tb: TypedBlock, rows: list, layer: int, halo: TypedHaloFn | None, drop: bool) -> list:
        """Each type's source rows from its destination rows ``rows`` (None stays None): with halo rows
        (``halo``) after them, dropped out where ``drop``."""
        got = halo(rows, layer) if halo is not None else None  # every rank joins the exchange, halo rows or not
        if got is None:
            for t, r in enumerate(rows):
                if r is not None and r.shape[0] != tb.num_src[t]:
                    raise RuntimeError(f"layer {layer}: node type {self.types.node_types[t]!r} has "
                                       f"{tb.num_src[t] - r.shape[0]} halo rows but no halo exchange was given")
            return [None if r is None else (self.dropout(r) if drop else r) for r in rows]
        out = []
        for r, g in zip(rows, got, strict=True):
            if r is None:
                out.append(None)
            elif drop:
                out.append(self.dropout.cat(r, g))
            else:
                out.append(torch.cat([r, g]))
        return out


EMBEDDING_CHUNK = 1 << 16


def embedding_init(ids: torch.Tensor, width: int, seed: int, node_type: int) -> torch.Tensor:
    """The first value of the embedding rows ``ids`` of node type ``node_type``: normal with std width^-1/2, drawn
    by chunks of ``EMBEDDING_CHUNK`` ids, each from a generator of (seed, type, chunk): the same row whatever rows
    the table holds besides it, and without drawing from torch's global generator (the ranks' other weights, drawn
    from it, stay the same on every rank)."""
    out = torch.empty(ids.shape[0], width)
    if not ids.shape[0]:
        return out
    chunk = ids // EMBEDDING_CHUNK
    gen = torch.Generator()
    for c in torch.unique(chunk).tolist():
        mine = (chunk == c).nonzero().squeeze(1)
        gen.manual_seed(((seed * 1_000_003 + node_type) * 1_000_003 + c) % (1 << 63))  # any seed: < 2^63
        block = torch.randn(EMBEDDING_CHUNK, width, generator=gen)
        out[mine] = block[ids[mine] - c * EMBEDDING_CHUNK]
    return out.mul_(width ** -0.5)


def build_typed_model(model, types: GraphTypes, in_widths, num_classes: int, embedding_rows, seed: int = 0) \
        -> TypedGNN:
    """A typed GNN from the config's ``model`` section (``arch`` rgcn or rgat); a SylvieError for settings the
    graph cannot take."""
    try:
        return TypedGNN(model.arch, types, tuple(in_widths), model.hidden, num_classes, model.layers, model.dropout,
                        model.heads, model.num_bases, tuple(embedding_rows), model.embedding_width, seed,
                        loop_weight(model))
    except ValueError as e:
        raise SylvieError(f"model: {e}") from None
