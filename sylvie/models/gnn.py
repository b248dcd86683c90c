"""The one layer stack of every architecture, on ``Block``s of any graph (a homogeneous graph: one type, one relation).
``forward(block, xs, halo)``: ``xs`` holds per node type the layer-0 rows of its sources (destinations first), or None
for a type without features, whose rows are an embedding table the model trains; the model asks ``halo(rows, layer)``
for a type's halo rows. ``forward(blocks, xs)`` takes a sampled minibatch, one block per layer.
"""
# An embedding table is partitioned with its type's nodes. The halo rows asked for are, at layer 0, the embedding
# tables' rows, later the hidden state; ``halo`` takes lists per type.
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from sylvie.errors import SylvieError
from sylvie.graph_types import HOMOGENEOUS, GraphTypes
from sylvie.models.block import Block
from sylvie.models.dropout import Dropout
from sylvie.models.gat import GATConv
from sylvie.models.gcn import GraphConv
from sylvie.models.initialisation import initialise_gat, initialise_link_encoder
from sylvie.models.link_decoder import build_decoder
from sylvie.models.registry import ARCHS, ATTENTION, RELATIONAL, loop_weight
from sylvie.models.relational_conv import RelationalConv
from sylvie.models.rgcn import RelGraphConv
from sylvie.models.sage import MeanSAGEConv

HaloFn = Callable[[list, int], list]  # (each type's rows, layer) -> each type's halo rows


def _conv(arch: str, w_src: int, w_dst: int, out: int, heads: int, first: bool, dropout: float) -> nn.Module:
    """One relation's convolution."""
    if arch == "gcn":
        return GraphConv(w_src, out)
    if arch == "sage":
        return MeanSAGEConv(w_src if w_src == w_dst else (w_src, w_dst), out)
    # the input layer drops out its features itself (GAT drops every layer's input); later layers' inputs are
    # dropped out by the model (between layers, as for GCN and GraphSAGE), not twice
    return initialise_gat(GATConv(w_src if w_src == w_dst else (w_src, w_dst), out, heads,
                                  feat_drop=dropout if first else 0.0, attn_drop=dropout))


class GNN(nn.Module):
    def __init__(self, arch: str, in_feats, hidden: int, num_classes: int, layers: int = 2, dropout: float = 0.5,
                 heads: int = 4, *, types: GraphTypes = HOMOGENEOUS, num_bases: int | None = None,
                 embedding_rows=None, embedding_width: int | None = None, embedding_seed: int = 0,
                 loop_weight: bool | None = None, decoder: nn.Module | None = None):
        """``in_feats``: the input width, or one per node type (None: a type without features, which gets an
        embedding table of ``embedding_width`` columns, default the widest feature width, whose rows are
        ``embedding_rows[t]``: their number, or the type's ids of a rank's nodes); ``loop_weight``: a self-loop
        weight per node type in every layer (None: R-GCN's and R-GAT's yes, the others' no). ``decoder``: link
        prediction's scorer of pairs of the model's outputs (``num_classes`` then the embeddings' width), which the
        model holds (its weights train, are saved and loaded with the rest) but does not call."""
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"unknown model arch '{arch}'; choose one of {', '.join(ARCHS)}")
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        in_widths = tuple(in_feats) if isinstance(in_feats, (tuple, list)) else (in_feats,)
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
        loops = arch in RELATIONAL if loop_weight is None else loop_weight
        attention = arch in ATTENTION
        self.convs = nn.ModuleList()
        for i in range(layers):
            last = i == layers - 1
            d_out, h = (num_classes if last else hidden), (1 if last else heads)
            if arch == "rgcn":
                conv = RelGraphConv(widths, d_out, ends, num_bases, self_loop=loops)
            else:
                kind = "gat" if attention else arch
                conv = RelationalConv([_conv(kind, widths[s], widths[d], d_out, h, i == 0, dropout) for s, d in ends],
                                      ends, widths if loops else None, d_out, h if attention else None)
            self.convs.append(conv)
            widths = (hidden * heads if attention else hidden,) * len(widths)
        self.dropout = Dropout(dropout)
        self.decoder = decoder

    def keep_rows(self, ids: list) -> GNN:
        """Keep of each embedding table (whole) the rows ``ids[t]`` (a rank's nodes of the type; None: a type
        without a table), in place: the model of one rank of a partition-parallel pass."""
        for t, rows in enumerate(ids):
            if rows is not None:
                table = self.embeddings[str(t)]
                kept = table.weight.detach()[torch.as_tensor(rows, dtype=torch.int64, device=table.weight.device)]
                self.embeddings[str(t)] = nn.Embedding(kept.shape[0], kept.shape[1], _weight=kept.clone())
                self.embeddings[str(t)].weight.rank_local = True
        return self

    def forward(self, block: Block | list[Block], xs, halo: HaloFn | None = None, out_types=None):
        """The target type's destination rows' output. ``block``: one for every layer (a rank's part, the whole
        graph) or a sampled minibatch's list (no halo; a type with an embedding table then comes with its input rows
        in ``xs``); ``xs``: a list per node type, or one tensor for a graph of one type. ``out_types``: the node
        types whose rows to return instead (a list per type, None for the others: link prediction's pair ends)."""
        sampled = isinstance(block, (list, tuple))
        blocks = list(block) if sampled else [block] * len(self.convs)
        if len(blocks) != len(self.convs):
            raise ValueError(f"got {len(blocks)} blocks for a model of {len(self.convs)} layers")
        if sampled and halo is not None:
            raise ValueError("a list of blocks (a sampled minibatch) carries all its rows; it takes no halo")
        h = [xs] if isinstance(xs, torch.Tensor) else list(xs)
        if len(self.embeddings):
            h = self._embedded(blocks[0], h, halo, sampled)
        target = self.types.target_index
        for i, (conv, b) in enumerate(zip(self.convs, blocks, strict=True)):
            last = i == len(self.convs) - 1
            if i > 0:
                h = self._layer_input(h, i, halo)
            for t, x in enumerate(h):
                rows = None if x is None else (x[0] if isinstance(x, tuple) else x).shape[0]
                if rows != b.num_src[t]:
                    raise RuntimeError(f"layer {i}: node type {self.types.node_types[t]!r} got {rows} rows for "
                                       f"{b.num_src[t]} source nodes"
                                       + ("; a halo exchange is needed for this block" if i and halo is None else ""))
            h = conv(b, h, ({target} if out_types is None else set(out_types)) if last else None)
            if self.arch in ATTENTION:
                h = [None if y is None else (y.mean(1) if last else y.flatten(1)) for y in h]
            if not last:
                # in place on the layer's new output (ReLU's backward keeps its result, which is then that output)
                h = [None if y is None else (F.elu(y) if self.arch in ATTENTION else F.relu(y, inplace=True))
                     for y in h]
        return h[target] if out_types is None else h

    def _embedded(self, block: Block, h: list, halo: HaloFn | None, sampled: bool) -> list:
        """``h`` with each embedding table's layer-0 rows: a sampled batch brings them (pulled from their owners);
        otherwise the table's rows, then its halo rows from their owners."""
        if sampled:
            missing = [self.types.node_types[int(t)] for t in self.embeddings if h[int(t)] is None]
            if missing:
                raise ValueError(f"node types {missing} learn embeddings: give their input rows (EmbeddingRows.pull)")
            return h
        tables = [self.embeddings[str(t)].weight if str(t) in self.embeddings else None for t in range(len(h))]
        got = halo(tables, 0) if halo is not None else None
        for t, table in enumerate(tables):
            if table is not None:
                h[t] = table if got is None else torch.cat([table, got[t]])
        return h

    def _layer_input(self, h: list, layer: int, halo: HaloFn | None) -> list:
        """The input of a layer after the first, per type: its rows and its halo rows, dropped out. Every rank joins
        the exchange, halo rows or not; the halo rows live only until they are copied into the input."""
        # Halo rows travel before dropout: each rank drops out its own source rows, and what goes on the wire is
        # a function of the weights alone (what stale, pipelined halo data relies on), with no dropout noise.
        got = halo(h, layer) if halo is not None else None
        out = []
        for t, x in enumerate(h):
            rows = None if got is None else got[t]
            if x is None:
                out.append(None)
            elif rows is None or not (rows.shape[0] or rows.grad_fn is not None):
                out.append(self.dropout(x))  # no rows to join, and no backward of their own: no copy
            elif self.arch != "sage":  # the rows and the halo rows dropped out straight into the input, in one pass
                out.append(self.dropout.cat(x, rows))
            else:
                # GraphSAGE keeps only the destinations for the backward, not the input over every source row: a
                # tensor of their own, copied into the input with the halo rows dropped out
                x = self.dropout(x)
                out.append((self.dropout.after(x, rows), x))
        return out


EMBEDDING_CHUNK = 1 << 16


def embedding_init(ids: torch.Tensor, width: int, seed: int, node_type: int) -> torch.Tensor:
    """The first value of the embedding rows ``ids`` of node type ``node_type``: normal with std width^-1/2, drawn by
    chunks of ``EMBEDDING_CHUNK`` ids from a generator of (seed, type, chunk), so a row starts the same whatever rows
    the table holds besides it, and torch's global generator (the other weights') is left alone."""
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


def build_model(model, in_widths, num_classes: int, *, types: GraphTypes = HOMOGENEOUS, embedding_rows=None,
                seed: int = 0, link=None) -> GNN:
    """The model of the config's ``model`` section for a graph of ``types`` (``in_widths``: each type's feature
    width, None for a type without features; an int for a graph of one type); a SylvieError for settings the graph
    cannot take. ``link``: a link-prediction run's ``link`` section: the model's outputs are then embeddings of
    ``model.hidden`` columns (not ``num_classes``) and it holds ``link.decoder``."""
    decoder = None
    if link is not None:
        num_classes = model.hidden
        decoder = build_decoder(link.decoder, model.hidden, model.hidden, len(types.relations))
    try:
        gnn = GNN(model.arch, in_widths, model.hidden, num_classes, model.layers, model.dropout, model.heads,
                  types=types, num_bases=model.num_bases,
                  embedding_rows=None if embedding_rows is None else tuple(embedding_rows),
                  embedding_width=model.embedding_width, embedding_seed=seed, loop_weight=loop_weight(model),
                  decoder=decoder)
    except ValueError as e:
        raise SylvieError(f"model: {e}") from None
    return gnn if link is None else initialise_link_encoder(gnn)
