"""A minibatch's blocks in a ``batch_transfer.Layout``: every array of every relation's block gets a segment, once
(arrays they share, such as a type's source ids, are laid out once); ``unpack`` builds the same blocks on the views
of the copied buffer. The graph ids travel too: the models do not read them, but a block that has them is a
minibatch's, which ``ops.aggregate`` goes by (it keeps nothing with such a block).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from sylvie.models.block_transpose import Transpose
from sylvie.models.relation_block import RelationBlock
from sylvie.sampling.batch_transfer import Layout

_BLOCK = ("indptr", "indices", "in_degree", "out_degree", "src_ids", "dst_ids")
_TRANSPOSE = ("indptr", "dst", "edge")


class PackedBlocks:
    """``blocks`` (``Block``s, on the host) laid out in ``layout``."""

    def __init__(self, blocks: list, layout: Layout):
        self.blocks, self.layout = blocks, layout
        self.arrays: list[torch.Tensor] = []  # what each of our segments holds
        self._segment: dict[tuple, int] = {}  # an array's identity -> its segment
        for block in blocks:
            for b in block.relations:
                for name in _BLOCK:
                    self._add(getattr(b, name))
                if b._transpose is not None:
                    for name in _TRANSPOSE:
                        self._add(getattr(b._transpose, name))
            if block.src_ids is not None:
                for t in block.src_ids:
                    self._add(t)

    def _add(self, t: torch.Tensor | None) -> None:
        if t is not None and _identity(t) not in self._segment:
            self._segment[_identity(t)] = self.layout.add_like(t)
            self.arrays.append(t)

    def write(self, views: list[torch.Tensor]) -> None:
        """Copy every array into its segment of the host buffer's ``views``."""
        for t in self.arrays:
            views[self._segment[_identity(t)]].copy_(t)

    def unpack(self, views: list[torch.Tensor]) -> list:
        """The blocks, their arrays the segments' ``views`` (on the buffer's device)."""
        def at(t):
            return None if t is None else views[self._segment[_identity(t)]]

        def block_of(b: RelationBlock) -> RelationBlock:
            tr = b._transpose
            return replace(b, **{name: at(getattr(b, name)) for name in _BLOCK}, _cache={},
                           _transpose=None if tr is None else Transpose(*(at(getattr(tr, n)) for n in _TRANSPOSE)))

        return [replace(block, relations=tuple(block_of(b) for b in block.relations),
                        src_ids=None if block.src_ids is None else tuple(at(t) for t in block.src_ids))
                for block in self.blocks]


def _identity(t: torch.Tensor) -> tuple:
    """Two tensors are the same array when they view the same memory the same way."""
    return t.data_ptr(), t.dtype, tuple(t.shape), t.stride()
