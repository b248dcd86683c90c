"""Run under torchrun: per architecture of the comma-separated argv[2], 3 training steps of the real trainer (one
trainer after another in the same process group); rank 0 saves to argv[3]/<arch>.pt the weights before every step,
and every step's loss and gradients."""
import sys
from pathlib import Path

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, archs, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
ctx = init_distributed("cpu")
shard = read_shard(partition_dir, ctx.rank, read_manifest(partition_dir))
for arch in archs:
    model = section("model", {"arch": arch, "dropout": 0.0, "self_loop": arch in ("gcn", "gat")})
    trainer = FullGraphTrainer(ctx, shard, model, section("train"), section("comm"), seed=0)
    states, losses, grads = [], [], []
    for step in range(3):
        states.append({k: v.clone() for k, v in trainer.model.state_dict().items()})
        losses.append(trainer.train_step(step))
        grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
    trainer.close()
    if ctx.rank == 0:
        torch.save({"states": states, "losses": losses, "grads": grads}, out / f"{arch}.pt")
shutdown()
