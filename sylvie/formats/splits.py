"""The node splits, by the names every file of ours uses for them: the mask columns of a canonical graph's
``nodes.arrow`` and of a partition's shards, the ``<split>_acc`` keys of epoch records and of ``eval.json``. The one
definition; the order is the order they are listed and reported in."""
from __future__ import annotations

SPLITS = ("train", "val", "test")
