"""Run under torchrun (one rank per part): train every link-prediction cell given as JSON (name -> {section:
overrides}), one after the other in this process, and evaluate each trained model partition-parallel.

argv: partition directory, output root, cells. Each cell's run directory is ``<root>/<name>`` (model.pt,
metrics.jsonl) with ``parts.json`` from partition-parallel evaluation beside it. Each stage joins a process group of
its own keys (as tests/workers/matrix_worker.py says why).
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

partition_dir, root, cells = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                      timeout=timedelta(seconds=60))


def join(key: str) -> None:
    dist.init_process_group("gloo", store=dist.PrefixStore(f"link/{key}/", store), rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))


for name, cfg in cells.items():
    out = root / name
    join(f"{name}/train")
    run_training(TrainingJob(partition_dir, out, section("model", cfg.get("model")),
                             section("train", {"task": "link", **cfg.get("train", {})}),
                             section("comm", cfg.get("comm")), 0, link=section("link", cfg.get("link"))))
    join(f"{name}/evaluate")
    evaluate_partitioned(partition_dir, out / "model.pt", out / "parts.json")
