"""benchmarks/gat_two_ranks.py's rank, under torchrun: GAT's 3 full-graph steps (tests/workers/
gpu_exactness_worker.py's), but EVERY rank saves its weights before each step, its loss and gradients, so that ranks
whose weights drift apart show. argv: partition, out dir, device (cuda | cpu; cpu runs PyTorch's path,
ops.torch_ops(), as the GPU does)."""
import os
import sys
from pathlib import Path

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.models import ops
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, out, device = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
ctx = init_distributed(device)
shard = read_shard(partition_dir, ctx.rank, read_manifest(partition_dir))
settings = {"arch": "gat", "dropout": 0.0, "hidden": 16, "heads": 2, "self_loop": True}
with ops.torch_ops():
    trainer = FullGraphTrainer(ctx, shard, section("model", settings), section("train", {"device": device}),
                               section("comm"), seed=0)
    states, losses, grads = [], [], []
    for step in range(3):
        states.append({k: v.detach().cpu().clone() for k, v in trainer.model.state_dict().items()})
        losses.append(trainer.train_step(step))
        grads.append({n: p.grad.detach().cpu().clone() for n, p in trainer.model.named_parameters()})
    trainer.close()
torch.save({"states": states, "losses": losses, "grads": grads, "device": str(ctx.device)},
           out / f"rank{ctx.rank}-of-{ctx.world}.pt")
shutdown(finished=True)
sys.stdout.flush()
os._exit(0)
