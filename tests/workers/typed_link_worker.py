"""Run under torchrun: per case of the comma-separated argv[2] (arch:decoder:negatives; arch as
tests/workers/typed_exactness_worker.py names them: rgcn, rgcn-bases with 2 bases, rgat, gcn, sage, gat), 3
link-prediction training steps of the real full-graph trainer on the typed partition argv[1] (BCE, uniform negatives
of each pair's destination type); rank 0 saves to argv[3]/<case>.pt the weights before every step (embedding tables
whole), every step's loss, and its gradients (the embedding tables' whole, gathered from the ranks that hold their
rows)."""
import sys
from pathlib import Path

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.partitioned_rows import gather_rows
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.runtime.rank_pairs import RankPairs
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, cases, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
ctx = init_distributed("cpu")
manifest = read_manifest(partition_dir)
shard = read_shard(partition_dir, ctx.rank, manifest)
for case in cases:
    name, decoder, k = case.split(":")
    arch, _, variant = name.partition("-")
    model = section("model", {"arch": arch, "dropout": 0.0, "hidden": 8, "heads": 2, "layers": 2,
                              "num_bases": 2 if variant == "bases" else None})
    link = section("link", {"decoder": decoder, "negatives": int(k)})
    pairs = RankPairs(ctx, partition_dir, manifest, shard, link, seed=0)
    trainer = FullGraphTrainer(ctx, shard, model, section("train", {"task": "link"}), section("comm"), 0, pairs,
                               link)
    states, losses, grads = [], [], []
    for step in range(3):
        states.append(trainer.weights())
        losses.append(trainer.train_step(step))
        tables = trainer.weights_of.partitioned
        grads.append({n: gather_rows(p.grad, *tables[n]) if n in tables else p.grad.clone()
                      for n, p in trainer.model.named_parameters() if p.grad is not None})
    trainer.close()
    if ctx.rank == 0:
        torch.save({"states": states, "losses": losses, "grads": grads}, out / f"{case.replace(':', '-')}.pt")
shutdown()
