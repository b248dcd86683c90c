"""Run under torchrun: per architecture of the comma-separated argv[2] (gcn, sage, gat, rgcn, rgat; rgcn-bases: R-GCN
with 2 bases; rgat-noloop: R-GAT without its self-loop weight; rgcn-bns: R-GCN under boundary-node sampling, 0.5;
each with its own self-loops otherwise),
3 training steps of the real trainer on the typed partition argv[1]; rank 0 saves to argv[3]/<arch>.pt the weights
before every step (embedding tables whole), every step's loss, and its gradients (the embedding tables' whole,
gathered from the ranks that hold their rows)."""
import sys
from pathlib import Path

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.partitioned_rows import gather_rows
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, archs, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
ctx = init_distributed("cpu")
shard = read_shard(partition_dir, ctx.rank, read_manifest(partition_dir))
for name in archs:
    arch, _, variant = name.partition("-")
    model = section("model", {"arch": arch, "dropout": 0.0, "hidden": 8, "heads": 2, "layers": 2,
                              "num_bases": 2 if variant == "bases" else None,
                              "loop_weight": False if variant == "noloop" else None})
    train = section("train", {"boundary_sampling": 0.5} if variant == "bns" else {})
    trainer = FullGraphTrainer(ctx, shard, model, train, section("comm"), seed=0)
    states, losses, grads = [], [], []
    for step in range(3):
        states.append(trainer.weights())
        losses.append(trainer.train_step(step))
        # (the last layer computes the target type only: the weights of the rest have no gradient)
        tables = trainer.weights_of.partitioned
        grads.append({n: gather_rows(p.grad, *tables[n]) if n in tables else p.grad.clone()
                      for n, p in trainer.model.named_parameters() if p.grad is not None})
    trainer.close()
    if ctx.rank == 0:
        torch.save({"states": states, "losses": losses, "grads": grads}, out / f"{name}.pt")
shutdown()
