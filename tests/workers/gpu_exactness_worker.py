"""Run under torchrun on a GPU machine: per model of argv[2] (JSON: name -> the model section), 3 training steps of the
full-graph trainer on the GPU (``init_distributed("cuda")``: nccl for one rank, gloo for ranks sharing the GPU; the
halo rows exchanged in fp32 through the real exchange); rank 0 saves to argv[3]/<name>.pt the weights before every
step, every step's loss and gradients, and the device and backend the ranks ran on."""
import json
import os
import sys
from pathlib import Path

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, models, out = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
ctx = init_distributed("cuda")
shard = read_shard(partition_dir, ctx.rank, read_manifest(partition_dir))
for name, settings in models.items():
    model = section("model", settings)
    trainer = FullGraphTrainer(ctx, shard, model, section("train", {"device": "cuda"}), section("comm"), seed=0)
    states, losses, grads = [], [], []
    for step in range(3):
        states.append({k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()})
        losses.append(trainer.train_step(step))
        grads.append({n: p.grad.detach().cpu().clone() for n, p in trainer.model.named_parameters()})
    on = {p.device.type for p in trainer.model.parameters()}
    trainer.close()
    if ctx.rank == 0:
        torch.save({"states": states, "losses": losses, "grads": grads, "device": str(ctx.device),
                    "backend": str(ctx.backend), "world": ctx.world, "parameters_on": sorted(on)}, out / f"{name}.pt")
shutdown(finished=True)
sys.stdout.flush()
os._exit(0)
