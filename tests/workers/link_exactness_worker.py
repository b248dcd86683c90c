"""Run under torchrun: per case of the comma-separated argv[2] (arch:decoder:loss:sampler:negatives), 3 link-prediction
training steps of the real full-graph trainer (one trainer after another in the same process group); rank 0 saves to
argv[3]/<case>.pt the weights before every step, and every step's loss and gradients."""
import sys
from pathlib import Path

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.runtime.rank_pairs import RankPairs
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, cases, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
ctx = init_distributed("cpu")
manifest = read_manifest(partition_dir)
shard = read_shard(partition_dir, ctx.rank, manifest)
for case in cases:
    arch, decoder, loss, sampler, k = case.split(":")
    model = section("model", {"arch": arch, "dropout": 0.0, "self_loop": arch in ("gcn", "gat")})
    link = section("link", {"decoder": decoder, "loss": loss, "negative_sampler": sampler, "negatives": int(k)})
    train = section("train", {"task": "link"})
    pairs = RankPairs(ctx, partition_dir, manifest, shard, link, seed=0)
    trainer = FullGraphTrainer(ctx, shard, model, train, section("comm"), 0, pairs, link)
    states, losses, grads = [], [], []
    for step in range(3):
        states.append({k: v.clone() for k, v in trainer.model.state_dict().items()})
        losses.append(trainer.train_step(step))
        grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    trainer.close()
    if ctx.rank == 0:
        torch.save({"states": states, "losses": losses, "grads": grads}, out / f"{case.replace(':', '-')}.pt")
shutdown()
