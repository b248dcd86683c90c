"""Run under torchrun (or tests/support/forked_ranks.py): per case of the comma-separated argv[2]
(arch:decoder:loss:sampler:negatives), the first 2 steps of sampled link-prediction training (the real sampled trainer,
fanouts argv[4] and batch size argv[5]; one trainer after another in the same process group). Every rank saves to
argv[3]/<case>-rank<r>.pt what its batches held (their pairs and negatives in canonical ids, the numbers of the pairs,
the edges their blocks drew) and rank 0 also the weights before every step and every step's loss and gradients."""
import sys
from pathlib import Path

import numpy as np
import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard, read_topology
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.runtime.rank_pairs import RankPairs
from sylvie.train.sampled_trainer import SampledTrainer

STEPS = 2
partition_dir, cases, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
fanouts, batch_size = [int(f) for f in sys.argv[4].split("-")], int(sys.argv[5])
ctx = init_distributed("cpu")
manifest = read_manifest(partition_dir)
shard = read_shard(partition_dir, ctx.rank, manifest)
topology = read_topology(partition_dir, manifest)
canonical = np.asarray(topology.original_id)


def block_edges(blocks) -> np.ndarray:
    """Every edge the blocks drew, as canonical (source, destination) rows."""
    out = []
    for block in blocks:
        b = block.relations[0]
        src = b.src_ids[b.indices.long()].numpy()
        dst = np.repeat(b.dst_ids.numpy(), np.diff(b.indptr.numpy()))
        out.append(np.stack([canonical[src], canonical[dst]], 1))
    return np.concatenate(out)


for case in cases:
    arch, decoder, loss, sampler, k = case.split(":")
    model = section("model", {"arch": arch, "dropout": 0.0, "self_loop": arch in ("gcn", "gat")})
    link = section("link", {"decoder": decoder, "loss": loss, "negative_sampler": sampler, "negatives": int(k)})
    train = section("train", {"task": "link", "mode": "sampled"})
    sampling = section("sampling", {"fanouts": fanouts, "batch_size": batch_size, "prefetch": 0})
    pairs = RankPairs(ctx, partition_dir, manifest, shard, link, seed=0)
    trainer = SampledTrainer(ctx, shard, topology, model, train, sampling, section("cache", {"alpha": 0}), 0, None,
                             60.0, pairs=pairs, link=link)
    produce = trainer.preparer.producer(0, trainer.edges.epoch(0))
    edges = trainer.edges.epoch(0)
    states, losses, grads, batches = [], [], [], []
    for step in range(STEPS):
        batch = produce(step)
        b = edges[step]
        batches.append({"number": b.number, "src": canonical[b.src], "dst": canonical[b.dst],
                        "negatives": canonical[b.negatives], "edges": block_edges(batch.blocks),
                        "targets": trainer._step_targets(step)})
        states.append({n: v.clone() for n, v in trainer.model.state_dict().items()})
        losses.append(trainer.train_step(0, batch) / trainer._step_targets(step))
        grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    trainer.close()
    name = case.replace(":", "-")
    torch.save({"batches": batches, "iterations": trainer.iterations}, out / f"{name}-rank{ctx.rank}.pt")
    if ctx.rank == 0:
        torch.save({"states": states, "losses": losses, "grads": grads}, out / f"{name}.pt")
shutdown()
