"""Run under torchrun (one rank per part): train every cell of the model x mode matrix given as JSON, one after the
other in this process, and evaluate each trained model partition-parallel.

argv: partition directory, VIP directory, output root, cells (JSON: name -> {section: overrides}). Each cell's run
directory is ``<root>/<name>`` (model.pt, metrics.jsonl) with ``parts.json`` and ``parts.npy`` (every node's class)
from partition-parallel evaluation beside them.

Each stage joins the process group this worker made for it: a group torn down and made again in one process with
the same rendezvous keys can read its predecessor's stale addresses (gloo: "Connection refused"), so every stage
gets keys of its own under torchrun's store. The stages find the group joined and use it, as they would under a
caller that joined it for them.
"""
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from sylvie.config import section
from sylvie.evaluate.partitioned import evaluate_partitioned
from sylvie.train.job import TrainingJob
from sylvie.train.run import run_training

partition_dir, vip_dir, root, cells = sys.argv[1], sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                      timeout=timedelta(seconds=60))


def join(key: str) -> None:
    dist.init_process_group("gloo", store=dist.PrefixStore(f"matrix/{key}/", store), rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))


for name, cfg in cells.items():
    out = root / name
    train = section("train", cfg.get("train"))
    join(f"{name}/train")
    run_training(TrainingJob(partition_dir, out, section("model", cfg.get("model")), train,
                             section("comm", cfg.get("comm")), 0, section("sampling", cfg.get("sampling")),
                             section("cache", cfg.get("cache")), section("features", cfg.get("features")),
                             vip_dir if train.mode == "sampled" else None))
    join(f"{name}/evaluate")
    evaluate_partitioned(partition_dir, out / "model.pt", out / "parts.json", out / "parts.npy")
