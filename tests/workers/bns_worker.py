"""Run under torchrun: the real full-graph trainer with boundary-node sampling. Per case of the JSON list argv[2]
({name, arch, share, bits, pipeline, epochs, dropout, seed; lr}), rank 0 saves per epoch the weights the step started
from, the summed weight gradients and the epoch's record (``trainer.epoch``: loss, bytes, accuracies)."""
import json
import sys

import torch

from sylvie.config import section
from sylvie.formats.partition_manifest import read_manifest
from sylvie.partition.shard_reader import read_shard
from sylvie.runtime.process_group import init_distributed, shutdown
from sylvie.train.fullgraph_trainer import FullGraphTrainer

partition_dir, cases, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
ctx = init_distributed("cpu")
shard = read_shard(partition_dir, ctx.rank, read_manifest(partition_dir))
results = {}
for case in cases:
    model = section("model", {"arch": case["arch"], "dropout": case["dropout"], "self_loop": case["arch"] != "sage"})
    train = section("train", {"boundary_sampling": case["share"], "lr": case.get("lr", 0.01)})
    comm = section("comm", {"bits": case["bits"], "pipeline": case["pipeline"]})
    trainer = FullGraphTrainer(ctx, shard, model, train, comm, seed=case["seed"])
    weights, grads, records = [], [], []

    def recording_step(epoch, trainer=trainer, step=trainer.train_step, grads=grads):
        loss = step(epoch)  # the weight gradients are summed over the ranks; the optimiser step does not clear them
        grads.append({n: p.grad.clone() for n, p in trainer.model.named_parameters()})
        return loss

    trainer.train_step = recording_step
    for epoch in range(case["epochs"]):
        weights.append({k: v.clone() for k, v in trainer.model.state_dict().items()})
        records.append(trainer.epoch(epoch, evaluate=epoch == case["epochs"] - 1).to_json())
    results[case["name"]] = {"weights": weights, "grads": grads, "records": records}
if ctx.rank == 0:
    torch.save(results, out)
shutdown()
