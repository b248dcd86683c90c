"""``link_pairs.arrow``: the edge split of a link-prediction dataset, beside its canonical graph and copied into each of
its partitions. This module is its only writer and reader.

The canonical graph's edges are the training edges (what passes messages); this file holds the pairs to predict: the
training pairs (positives of the loss), and the validation and test pairs with the fixed negatives each is ranked
against (OGB's ``target_node_neg``), or negative pairs shared by a split (OGB's ``edge_neg``, ogbl-collab's). Node ids
are the canonical graph's. Columns: below.
"""
# Columns of link_pairs.arrow (one record batch):
#
#     src, dst     int64: the pair's ends (canonical node ids)
#     split        int8: 0 train, 1 val, 2 test (the order of ``SPLITS``)
#     relation     int16, a typed graph's only: the pair's relation index
#     negatives    large_list<int64>: a validation or test pair's negative destinations, every such list of one length
#                  k (empty for training pairs, and for every pair where the split's negatives are shared pairs)
#
# link_negative_pairs.arrow, only where a split ranks its positives against shared negative pairs (OGB's Hits@K of
# ogbl-collab): src, dst (int64), split (int8: 1 val, 2 test).
#
# The file's metadata holds ``undirected`` ("1": the graph's messages travel both ways along every training pair, as
# written in edges.arrow; a pair given once). meta.json records each file's sha256 (``link_pairs_sha256``,
# ``link_negative_pairs_sha256``).
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from sylvie.arrow_arrays import as_numpy
from sylvie.atomic import file_sha256
from sylvie.errors import SylvieError, one_line
from sylvie.formats.splits import SPLITS

FILE = "link_pairs.arrow"
NEGATIVE_PAIRS_FILE = "link_negative_pairs.arrow"
TRAIN, VAL, TEST = range(3)
_FIX = "rerun `sylvie download`"


@dataclass(frozen=True)
class LinkPairs:
    """A link-prediction dataset's pairs: ``negatives`` has a row per validation and test pair, in file order (a
    ``[0, 0]`` array where there are none per pair); ``negative_pairs`` (src, dst, split) where a split's positives are
    ranked against shared negative pairs instead."""

    src: np.ndarray
    dst: np.ndarray
    split: np.ndarray
    negatives: np.ndarray
    relation: np.ndarray | None = None
    undirected: bool = True
    negative_pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def num_pairs(self) -> int:
        return int(self.src.shape[0])

    def indices(self, split: int | str) -> np.ndarray:
        """The positions of ``split``'s pairs (an index of ``SPLITS``, or its name), ascending."""
        s = SPLITS.index(split) if isinstance(split, str) else split
        return np.flatnonzero(self.split == s)

    def negatives_of(self, split: int | str) -> np.ndarray:
        """The fixed negative destinations of ``split``'s pairs (a row per pair, in their order): ``[n, k]``, k = 0
        where the split has shared negative pairs instead."""
        s = SPLITS.index(split) if isinstance(split, str) else split
        evaluated = self.split[self.split != TRAIN]
        return self.negatives[evaluated == s]

    def counts(self) -> dict[str, int]:
        """Pairs per split, by name."""
        return {name: int((self.split == s).sum()) for s, name in enumerate(SPLITS)}

    def validate(self, num_nodes: int, where: str, num_relations: int = 1) -> None:
        """A SylvieError naming ``where`` for pairs that are not of a graph of ``num_nodes`` nodes."""
        n = self.num_pairs
        for name in ("src", "dst", "split"):
            if getattr(self, name).shape != (n,):
                raise SylvieError(f"{where}: column '{name}' has {getattr(self, name).shape[0]} rows for {n} pairs")
        bad = np.flatnonzero((self.split < 0) | (self.split >= len(SPLITS)))
        if bad.size:
            raise SylvieError(f"{where}: row {int(bad[0])}: split {int(self.split[bad[0]])} is none of 0 (train), "
                              f"1 (val), 2 (test)")
        ids = [self.src, self.dst, self.negatives.reshape(-1)]
        if self.negative_pairs is not None:
            ids += list(self.negative_pairs[:2])
        for a in ids:
            if a.size and (int(a.min()) < 0 or int(a.max()) >= num_nodes):
                raise SylvieError(f"{where}: a pair names node {int(a.min()) if a.min() < 0 else int(a.max())}, "
                                  f"outside the graph's {num_nodes} nodes")
        evaluated = int((self.split != TRAIN).sum())
        if self.negatives.ndim != 2 or (self.negatives.shape[1] and self.negatives.shape[0] != evaluated):
            raise SylvieError(f"{where}: {self.negatives.shape[0]} negative lists for {evaluated} validation and "
                              f"test pairs")
        if self.relation is not None and self.relation.size and (
                int(self.relation.min()) < 0 or int(self.relation.max()) >= num_relations):
            raise SylvieError(f"{where}: a pair's relation is outside the graph's {num_relations} relations")
        if not (self.split == TRAIN).any():
            raise SylvieError(f"{where}: no training pairs; link prediction trains on them")


def _negatives_column(pairs: LinkPairs) -> pa.Array:
    k = pairs.negatives.shape[1] if pairs.negatives.ndim == 2 else 0
    evaluated = (pairs.split != TRAIN) & (k > 0)
    lengths = np.where(evaluated, k, 0).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()),
                                         pa.array(np.ascontiguousarray(pairs.negatives, np.int64).reshape(-1)))


def _write(path: Path, table: pa.Table) -> str:
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table.combine_chunks(), max_chunksize=max(table.num_rows, 1))
    return file_sha256(path)


def write_link_pairs(directory: str | Path, pairs: LinkPairs) -> dict[str, str]:
    """Write ``pairs`` into ``directory`` (a canonical graph being written: its temporary folder); returns meta.json's
    fields for them: each file's sha256."""
    directory = Path(directory)
    columns = {"src": pa.array(np.asarray(pairs.src, np.int64)), "dst": pa.array(np.asarray(pairs.dst, np.int64)),
               "split": pa.array(np.asarray(pairs.split, np.int8))}
    if pairs.relation is not None:
        columns["relation"] = pa.array(np.asarray(pairs.relation, np.int16))
    columns["negatives"] = _negatives_column(pairs)
    table = pa.table(columns).replace_schema_metadata({"undirected": "1" if pairs.undirected else "0"})
    out = {"link_pairs_sha256": _write(directory / FILE, table)}
    if pairs.negative_pairs is not None:
        src, dst, split = pairs.negative_pairs
        out["link_negative_pairs_sha256"] = _write(directory / NEGATIVE_PAIRS_FILE, pa.table({
            "src": pa.array(np.asarray(src, np.int64)), "dst": pa.array(np.asarray(dst, np.int64)),
            "split": pa.array(np.asarray(split, np.int8))}))
    return out


def _read(path: Path, sha256: str | None, columns: dict[str, pa.DataType], fix: str) -> pa.Table:
    if not path.is_file():
        raise SylvieError(f"{path}: missing; {fix}")
    if sha256 and file_sha256(path) != sha256:
        raise SylvieError(f"{path}: changed since it was written (its sha256 is not the one recorded); {fix}")
    try:
        table = ipc.open_file(pa.memory_map(str(path))).read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise SylvieError(f"{path}: not a readable Arrow file ({one_line(e)}); {fix}") from None
    for name, typ in columns.items():
        if name not in table.column_names or table.schema.field(name).type != typ:
            raise SylvieError(f"{path}: column '{name}' missing or not {typ}; {fix}")
    return table


def _array(table: pa.Table, name: str) -> np.ndarray:
    col = table.column(name)
    return as_numpy(col.chunk(0)) if col.num_chunks == 1 else col.to_numpy()


def has_link_pairs(directory: str | Path) -> bool:
    """Whether the canonical graph or partition in ``directory`` has an edge split."""
    return (Path(directory) / FILE).is_file()


def read_link_pairs(directory: str | Path, num_nodes: int, sha256: dict | None = None, num_relations: int = 1,
                    fix: str = _FIX) -> LinkPairs:
    """The pairs in ``directory``, checked against ``sha256`` (meta.json's or a manifest's fields) where given and
    against a graph of ``num_nodes`` nodes; ``fix``: what an error tells the user to do."""
    directory = Path(directory)
    sha256 = sha256 or {}
    path = directory / FILE
    table = _read(path, sha256.get("link_pairs_sha256"),
                  {"src": pa.int64(), "dst": pa.int64(), "split": pa.int8(), "negatives": pa.large_list(pa.int64())},
                  fix)
    split = _array(table, "split")
    negatives = table.column("negatives").combine_chunks()
    lengths = np.diff(as_numpy(negatives.offsets))
    evaluated = split != TRAIN
    k = int(lengths[evaluated].max()) if evaluated.any() else 0
    if (lengths[~evaluated] != 0).any():
        raise SylvieError(f"{path}: training pairs with negatives; {fix}")
    if k and (lengths[evaluated] != k).any():
        row = int(np.flatnonzero(evaluated & (lengths != k))[0])
        raise SylvieError(f"{path}: row {row}: {int(lengths[row])} negatives where the others have {k}; {fix}")
    values = as_numpy(negatives.values) if len(negatives.values) else np.zeros(0, np.int64)
    relation = _array(table, "relation") if "relation" in table.column_names else None
    meta = table.schema.metadata or {}
    negative_pairs = None
    if (directory / NEGATIVE_PAIRS_FILE).is_file() or sha256.get("link_negative_pairs_sha256"):
        neg = _read(directory / NEGATIVE_PAIRS_FILE, sha256.get("link_negative_pairs_sha256"),
                    {"src": pa.int64(), "dst": pa.int64(), "split": pa.int8()}, fix)
        negative_pairs = (_array(neg, "src"), _array(neg, "dst"), _array(neg, "split"))
    pairs = LinkPairs(src=_array(table, "src"), dst=_array(table, "dst"), split=split,
                      negatives=values.reshape(-1, k) if k else np.zeros((0, 0), np.int64), relation=relation,
                      undirected=meta.get(b"undirected", b"1") == b"1", negative_pairs=negative_pairs)
    pairs.validate(num_nodes, str(path), num_relations)
    return pairs


def copy_link_pairs(source: str | Path, target: str | Path) -> dict[str, str]:
    """Copy the pair files of the canonical graph in ``source`` into ``target`` (a partition being written); returns
    their sha256 by field name, for the manifest."""
    import shutil

    out = {}
    for name, key in ((FILE, "link_pairs_sha256"), (NEGATIVE_PAIRS_FILE, "link_negative_pairs_sha256")):
        if (Path(source) / name).is_file():
            shutil.copyfile(Path(source) / name, Path(target) / name)
            out[key] = file_sha256(Path(target) / name)
    return out
