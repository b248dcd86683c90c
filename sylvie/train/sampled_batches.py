"""The sampled trainer's minibatches, made ready for the model in the sampling thread: each batch's blocks are
sampled (``NeighborSampler``), the rows of its input vertices found (``FeaturesByType.fetch``: own rows, cached
rows, rows fetched from their owners), and everything the device needs (blocks, the seeds' labels or a link batch's
pairs as rows of its seeds, the input rows or where the GPU reads them) laid out in one buffer and sent in one copy
(``sylvie.sampling.batch_transfer``). A ``PreparedBatch`` is what the model step takes. A node minibatch is a set of
seed vertices; a link prediction one an ``EdgeBatch`` (``sylvie.sampling.edge_batches``), sampled without its own
edges."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from sylvie.features.features_by_type import FeaturesByType
from sylvie.sampling.batch_transfer import BatchTransfer, Layout
from sylvie.sampling.edge_batches import EdgeBatch
from sylvie.sampling.neighbor_sampler import NeighborSampler, input_counts
from sylvie.sampling.packed_blocks import PackedBlocks


@dataclass(frozen=True)
class PairBatch:
    """A link batch's pairs on the training device, as rows of the batch's seeds (``EdgeBatch``'s): ``src_at``,
    ``dst_at`` ``[n]``, ``neg_at`` ``[n, k]`` (or ``[k]``, shared), ``relation`` ``[n]`` (None: one relation)."""
    src_at: torch.Tensor
    dst_at: torch.Tensor
    neg_at: torch.Tensor
    relation: torch.Tensor | None


@dataclass(frozen=True)
class PreparedBatch:
    """Minibatch ``index`` of an epoch: its seeds and input vertices (``input_nodes``, type by type) on the host;
    on the training device, views of the batch's one copied buffer: its ``blocks``, the seeds' ``labels`` (a node
    batch's) or its ``pairs`` (a link batch's) and its input rows ``x`` per node type (None for a type without
    features). ``ready``: the event the training's stream waits for before it uses them (a GPU's;
    ``batch_transfer.wait``)."""
    index: int
    seeds: torch.Tensor
    input_nodes: torch.Tensor
    blocks: list
    labels: torch.Tensor | None
    x: list[torch.Tensor | None]
    ready: object = None
    pairs: PairBatch | None = None

    def input_counts(self) -> tuple[int, ...]:
        return input_counts(self.blocks)


class BatchPreparer:
    """Makes minibatches of ``sampler`` ready with the rows of ``features`` and the ``labels`` of the rank's own
    vertices (from ``first_id``), through ``transfer``. The features keep the account of fetching; this keeps the
    time spent sampling (``sample_seconds``, from ``begin_epoch``)."""

    def __init__(self, sampler: NeighborSampler, features: FeaturesByType, labels: torch.Tensor, first_id: int,
                 transfer: BatchTransfer):
        self.sampler, self.features, self.transfer = sampler, features, transfer
        self.labels, self.first_id = labels, first_id
        self.sample_seconds = 0.0

    def begin_epoch(self) -> None:
        self.sample_seconds = 0.0

    def producer(self, epoch: int, batches: Sequence) -> Callable[[int], PreparedBatch]:
        """``produce(i)``: minibatch i of ``epoch``, ``batches[i]``: seed vertices, or an ``EdgeBatch`` (made when
        asked for, here in the sampling thread); Low-bit remote rows draw from the stream of (epoch, i)."""
        def produce(i: int) -> PreparedBatch:
            t0 = time.perf_counter()
            batch = batches[i]
            edges = batch if isinstance(batch, EdgeBatch) else None
            mb = self.sampler.sample(batch, epoch, i) if edges is None else \
                self.sampler.sample(edges.seeds, epoch, i, exclude_pairs=edges.exclude_pairs)
            self.sample_seconds += time.perf_counter() - t0
            pending = self.features.fetch(torch.split(mb.input_nodes, list(mb.input_counts())), key=(epoch, i))
            layout = Layout()
            blocks = PackedBlocks(mb.blocks, layout)
            if edges is None:
                labels = layout.add(self.labels.dtype, tuple(mb.seeds.shape))
            else:
                pair_arrays = [torch.from_numpy(a) for a in (edges.src_at, edges.dst_at, edges.neg_at)]
                if edges.relation is not None:
                    pair_arrays.append(torch.from_numpy(edges.relation))
                pair_segments = [layout.add_like(a) for a in pair_arrays]
            rows = self.features.batch_rows(pending, layout)
            k, host = self.transfer.host_buffer(layout.nbytes)
            views = layout.views(host)
            blocks.write(views)
            if edges is None:
                torch.index_select(self.labels, 0, mb.seeds - self.first_id, out=views[labels])
            else:
                for a, at in zip(pair_arrays, pair_segments, strict=True):
                    views[at].copy_(a)
            for r in rows:
                if r is not None:
                    r.write(views)
            sent = self.transfer.send(k, host)
            if sent is not host:  # a device's copy (on the CPU the host buffer is sent as it is)
                views = layout.views(sent)
            with self.transfer.on_device():
                x = [None if r is None else r.finish(views, self.transfer.hand_over) for r in rows]
            if edges is None:
                return PreparedBatch(i, mb.seeds, mb.input_nodes, blocks.unpack(views), views[labels], x,
                                     self.transfer.ready())
            on_device = [views[at] for at in pair_segments]
            pairs = PairBatch(*on_device[:3], on_device[3] if len(on_device) > 3 else None)
            return PreparedBatch(i, mb.seeds, mb.input_nodes, blocks.unpack(views), None, x, self.transfer.ready(),
                                 pairs)
        return produce
