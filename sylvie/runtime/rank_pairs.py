"""A rank's pairs of link prediction: the training, validation and test pairs whose source it owns, their ends in the
partition's id space (rank r owns ids ``part_offsets[r] ..``, in its shard's inner-row order), and how their scores
are computed from the embeddings every rank holds of its own nodes, fetching the rows of ends other ranks own
(``RemoteEmbeddings``: fp32 or Low-bit, gradients sent back). What the full-graph trainer trains on and evaluation
ranks.
"""
# Pairs are numbered by their position in the dataset's link_pairs.arrow: a uniform negative is a hash of (seed,
# epoch, that number), so P ranks draw what one process draws. Evaluation ranks each pair's true destination among its
# fixed negatives as OGB does (``sylvie.runtime.ranking``: the mean of the optimistic and pessimistic rank).
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sylvie.comm.lowbit.format import FULL_PRECISION
from sylvie.comm.remote_embeddings import RemoteEmbeddings
from sylvie.comm.stats import CommStats
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TRAIN, has_link_pairs, read_link_pairs
from sylvie.formats.splits import SPLITS
from sylvie.models.link_loss import link_loss_sum, link_targets
from sylvie.partition.shard_format import Shard
from sylvie.partition.shard_reader import read_topology
from sylvie.runtime.process_group import Context, all_reduce_sum
from sylvie.runtime.ranking import pair_ranks, shared_negative_metrics
from sylvie.sampling.negatives import joint_negatives, local_negatives, negatives_key, uniform_negatives


@dataclass(frozen=True)
class PairRows:
    """Some pairs of this rank: their numbers in the dataset, sources (this rank's inner rows), destinations and
    relations (partition ids), and for evaluated pairs their fixed negatives (partition ids, ``[n, k]``)."""
    number: np.ndarray
    src: torch.Tensor
    dst: torch.Tensor
    relation: torch.Tensor | None
    dst_type: np.ndarray  # each pair's destination node type
    negatives: torch.Tensor | None = None


def partition_ids(part_dir: str | Path, manifest: dict) -> np.ndarray:
    """Every canonical node id's id in the partition (the inverse of the topology's ``original_id``)."""
    topology = read_topology(part_dir, manifest)
    new_of = np.empty(topology.num_nodes, np.int64)
    new_of[topology.original_id] = np.arange(topology.num_nodes)
    return new_of


class RankPairs:
    """``shard``: this rank's; ``link``: the run's ``link`` section; ``seed``: the run's. A pair's relation gives its
    destination's node type, whose nodes its negatives are drawn from."""

    def __init__(self, ctx: Context, part_dir: str | Path, manifest: dict, shard: Shard, link, seed: int):
        part_dir = Path(part_dir)
        if not has_link_pairs(part_dir) or "link_pairs" not in manifest:
            raise SylvieError(f"{part_dir}: train.task is link, but this partition's dataset has no edge split (no "
                              f"link_pairs.arrow); set the dataset's edge_split (or, for your own files, "
                              f"edge_split_column or val_edges and test_edges), rerun `sylvie download` and "
                              f"`sylvie partition`")
        types = shard.types
        self.ctx, self.link, self.seed, self.types = ctx, link, seed, types
        n = int(manifest["num_nodes"])
        pairs = read_link_pairs(part_dir, n, manifest["link_pairs"], len(types.relations),
                                fix="rerun `sylvie partition`")
        new_of = partition_ids(part_dir, manifest)
        self.part_offsets = np.asarray(manifest["topology"]["part_offsets"], np.int64)
        first = int(self.part_offsets[ctx.rank])
        counts = manifest.get("type_counts", [n])
        self.type_first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # canonical ids of each type
        self.new_of = new_of
        src = new_of[pairs.src]
        mine = (src >= first) & (src < self.part_offsets[ctx.rank + 1])
        relation = pairs.relation if pairs.relation is not None else np.zeros(pairs.num_pairs, np.int16)
        dst_type = np.array([types.ends(r)[1] for r in range(len(types.relations))], np.int64)[relation]
        dev = ctx.device
        evaluated = np.flatnonzero(pairs.split != TRAIN)  # the rows of pairs.negatives, in order
        negative_row = np.full(pairs.num_pairs, -1, np.int64)
        negative_row[evaluated] = np.arange(len(evaluated))
        self.splits: dict[str, PairRows] = {}
        for s, name in enumerate(SPLITS):
            at = np.flatnonzero(mine & (pairs.split == s))
            negatives = None
            if s != TRAIN and pairs.negatives.shape[1]:
                negatives = torch.from_numpy(new_of[pairs.negatives[negative_row[at]]]).to(dev)
            self.splits[name] = PairRows(
                number=at, src=torch.from_numpy(src[at] - first).to(dev),
                dst=torch.from_numpy(new_of[pairs.dst[at]]).to(dev),
                relation=torch.from_numpy(relation[at].astype(np.int64)).to(dev) if pairs.relation is not None
                else None, dst_type=dst_type[at], negatives=negatives)
        self.num_train_global = int((pairs.split == TRAIN).sum())
        self.ranked = pairs.negatives.shape[1] > 0  # per-pair negatives: MRR
        # negative pairs a split shares (OGB's ogbl-collab), numbered within their split: this rank's (its sources)
        self.shared: dict[str, PairRows] = {}
        self.num_shared: dict[str, int] = {}
        if pairs.negative_pairs is not None:
            n_src, n_dst, n_split = pairs.negative_pairs
            n_new = new_of[n_src]
            n_mine = (n_new >= first) & (n_new < self.part_offsets[ctx.rank + 1])
            for s, name in enumerate(SPLITS):
                of_split = np.flatnonzero(n_split == s)
                self.num_shared[name] = len(of_split)
                at = np.flatnonzero(n_mine[of_split])
                rows = of_split[at]
                self.shared[name] = PairRows(number=at, src=torch.from_numpy(n_new[rows] - first).to(dev),
                                             dst=torch.from_numpy(new_of[n_dst[rows]]).to(dev), relation=None,
                                             dst_type=np.zeros(len(rows), np.int64))
        # this rank's partition ids of each node type (the local sampler's candidates)
        own = np.arange(first, int(self.part_offsets[ctx.rank + 1]))
        own_type = np.searchsorted(self.type_first, np.asarray(shard.global_id, np.int64), side="right") - 1
        self.own_of_type = [own[own_type == t] for t in range(len(counts))]
        self.stats = CommStats()
        self.remote = RemoteEmbeddings(ctx.rank, self.part_offsets, link.pair_bits, seed, self.stats)
        self.eval_remote = RemoteEmbeddings(ctx.rank, self.part_offsets, FULL_PRECISION, seed, CommStats())

    @property
    def num_targets(self) -> int:
        """What the summed loss is divided by: every scored pair (bce) or every positive (contrastive), globally."""
        return link_targets(self.link.loss, self.num_train_global, self.link.negatives)

    def negatives(self, pairs: PairRows, epoch: int) -> torch.Tensor:
        """The epoch's negative destinations of ``pairs`` (partition ids): ``[n, k]``, or ``[k]`` shared (joint)."""
        return torch.from_numpy(self.negative_ids(pairs.number, pairs.dst_type, epoch)).to(self.ctx.device)

    def negative_ids(self, number: np.ndarray, dst_type: np.ndarray, epoch: int, batch: int = 0) -> np.ndarray:
        """The negative destinations (partition ids) of the pairs numbered ``number`` (their destinations of node types
        ``dst_type``) in batch ``batch`` of ``epoch`` (a full-graph epoch is batch 0): ``[n, k]``, or ``[k]`` shared
        (joint, drawn per batch). Uniform and local negatives are a pair's alone, whatever batch it is in."""
        k, sampler = self.link.negatives, self.link.negative_sampler
        out = np.empty((len(number), k), np.int64)
        for t in np.unique(dst_type):
            which = dst_type == t
            first, count = int(self.type_first[t]), int(self.type_first[t + 1] - self.type_first[t])
            if sampler == "uniform":
                out[which] = self.new_of[uniform_negatives(negatives_key(self.seed, epoch), number[which], k,
                                                           first, count)]
            elif sampler == "local":
                own = self.own_of_type[t]
                if not len(own):
                    raise SylvieError(f"rank {self.ctx.rank}: link.negative_sampler local, but this rank owns no "
                                      f"nodes of a pair's destination type; use uniform or joint")
                out[which] = local_negatives(negatives_key(self.seed, epoch, rank=self.ctx.rank), number[which], k,
                                             own)
        if sampler == "joint":
            if len(self.type_first) > 2 and len(np.unique(dst_type)) > 1:
                raise SylvieError("link.negative_sampler joint draws one set of destinations per batch, of one node "
                                  "type; this graph's pairs end in several: use uniform or local")
            t = int(dst_type[0]) if len(dst_type) else 0
            first, count = int(self.type_first[t]), int(self.type_first[t + 1] - self.type_first[t])
            return self.new_of[joint_negatives(negatives_key(self.seed, epoch, batch, self.ctx.rank), k, first,
                                               count)]
        return out

    def scores(self, own: torch.Tensor, decoder, pairs: PairRows, negatives: torch.Tensor, key: tuple,
               remote: RemoteEmbeddings) -> tuple[torch.Tensor, torch.Tensor]:
        """(positive scores ``[n]``, negative scores ``[n, k]``) of ``pairs`` from ``own`` (this rank's inner rows'
        embeddings); ``negatives``: ``[n, k]`` or ``[k]`` (shared). Collective (the fetch of remote ends)."""
        n = pairs.dst.shape[0]
        ids = torch.cat([pairs.dst, negatives.reshape(-1)])
        rows = remote.fetch(own, ids, key)
        neg = rows[n:].reshape(*negatives.shape, rows.shape[-1])
        return score_pairs(decoder, own[pairs.src], rows[:n], neg, pairs.relation)

    def loss_sum(self, own: torch.Tensor, decoder, epoch: int) -> torch.Tensor:
        """This rank's training pairs' summed loss (``link.loss``) with the epoch's negatives; collective."""
        pairs = self.splits["train"]
        pos, neg = self.scores(own, decoder, pairs, self.negatives(pairs, epoch), (epoch,), self.remote)
        return link_loss_sum(self.link.loss, pos, neg)

    @property
    def metric(self) -> str:
        """What the epochs record of the validation and test pairs: "mrr" where each has negatives of its own, else
        "hits@50" (against the negative pairs their split shares, as OGB ranks ogbl-collab's)."""
        return "mrr" if self.ranked or not self.shared else "hits@50"

    @torch.no_grad()
    def split_scores(self, own: torch.Tensor, decoder, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Split ``name``'s pairs of this rank, scored from ``own`` (this rank's rows' embeddings, eval mode): their
        positive scores ``[n]``, and their fixed negatives' ``[n, k]`` (per-pair negatives) or this rank's share of
        the split's shared negative pairs' ``[m]``. Collective (fp32 fetches of remote ends)."""
        pairs = self.splits[name]
        if self.ranked:
            return self.scores(own, decoder, pairs, pairs.negatives, (), self.eval_remote)
        pos, _ = self.scores(own, decoder, pairs, pairs.dst[:0].reshape(0), (), self.eval_remote)
        shared = self.shared.get(name)
        if shared is None:
            return pos, pos.new_zeros(0)
        neg, _ = self.scores(own, decoder, shared, shared.dst[:0].reshape(0), (), self.eval_remote)
        return pos, neg

    @torch.no_grad()
    def metric_counts(self, own: torch.Tensor, decoder) -> torch.Tensor:
        """Per split (``SPLITS``): the sum of this rank's pairs' reciprocal ranks among their fixed negatives (or, with
        negative pairs shared by the split, their hits at 50: ``metric``), and their number (float64
        ``[len(SPLITS), 2]``, to be summed over the ranks: their mean); none for training pairs (they have no fixed
        negatives). Collective."""
        out = torch.zeros(len(SPLITS), 2, dtype=torch.float64, device=own.device)
        if not self.ranked and not self.shared:
            return out
        for s, name in enumerate(SPLITS):
            if s == TRAIN:
                continue
            pos, neg = self.split_scores(own, decoder, name)
            if self.ranked:
                out[s, 0] = (1.0 / pair_ranks(pos, neg)).sum()
            else:  # Hits@50 against the split's negative pairs, every rank's scores of them gathered
                every = torch.zeros(self.num_shared[name], dtype=torch.float64, device=own.device)
                every[torch.from_numpy(self.shared[name].number).to(own.device)] = neg.to(torch.float64)
                every = all_reduce_sum(every)
                if pos.shape[0]:
                    out[s, 0] = shared_negative_metrics(pos, every, hits=(50,))["hits@50"] * pos.shape[0]
            out[s, 1] = pos.shape[0]
        return out


def score_pairs(decoder, src: torch.Tensor, dst: torch.Tensor, neg: torch.Tensor, relation: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(positive scores ``[n]``, negative scores ``[n, k]``) of pairs from their ends' embeddings: ``src`` and ``dst``
    ``[n, d]``, ``neg`` the negatives' ``[n, k, d]``, or ``[k, d]`` shared by the pairs; ``relation``: ``[n]`` or
    None."""
    pos = decoder(src, dst, relation)
    rel = None if relation is None else relation.unsqueeze(1)
    shared = neg.unsqueeze(0) if neg.dim() == 2 else neg
    return pos, decoder(src.unsqueeze(1), shared, rel)


def global_metrics(counts: torch.Tensor) -> dict[str, float | None]:
    """``{split}_acc`` (the epoch record's slots; here MRR) from ``metric_counts`` summed over the ranks."""
    return {f"{s}_acc": float(c / t) if t > 0 else None for s, (c, t) in zip(SPLITS, counts.tolist())}


def reduce_counts(counts: torch.Tensor) -> torch.Tensor:
    """``counts`` summed over the ranks."""
    return all_reduce_sum(counts)
