"""Run under torchrun with 2 ranks: pipelined training (fp32, bound K) of the real trainer, recording per
epoch and layer what each rank sent and what it computed with; each rank saves ``<out>.<rank>.pt``."""
import sys

import torch

from sylvie.comm.halo_wire import BACKWARD
from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, out, bound, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ctx = init_distributed("cpu")
shard = read_shard(partition_dir, ctx.rank, read_manifest(partition_dir))
model = section("model", {"arch": "sage", "layers": 3, "hidden": 8, "self_loop": False})
comm = section("comm", {"pipeline": True, "staleness": bound})
trainer = FullGraphTrainer(ctx, shard, model, section("train"), comm, seed=0)
halo, plan = trainer.halo, trainer.halo.plan
record = {"sent": {}, "used": {}, "grad_sent": {}, "grad_used": {}, "modes": []}
epoch_now = [0]
call = type(halo).__call__


def recording_call(self, inner, layer=0):
    rows = call(self, inner, layer)
    if layer > 0 and torch.is_grad_enabled():
        key = (epoch_now[0], layer)
        record["sent"][key] = inner[plan.send_index].detach().clone()
        record["used"][key] = rows.detach().clone()
        rows.register_hook(lambda g: record["grad_sent"].__setitem__(key, g.clone()))
    return rows


take = type(halo.stale_rows).take


def recording_take(self, layer, direction):
    rows = take(self, layer, direction)
    if direction == BACKWARD:
        record["grad_used"][(epoch_now[0], layer)] = rows.clone()
    return rows


type(halo).__call__ = recording_call
type(halo.stale_rows).take = recording_take
for epoch in range(epochs):
    epoch_now[0] = epoch
    rec = trainer.epoch(epoch)
    record["modes"].append(rec.halo.staleness)
torch.save(record, f"{out}.{ctx.rank}.pt")
shutdown()
