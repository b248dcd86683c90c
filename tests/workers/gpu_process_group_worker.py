"""Run under torchrun on a GPU machine: join the process group as `sylvie train --device cuda` does
(``init_distributed``: nccl with a GPU per local rank, gloo when local ranks share one), then move CUDA tensors
through the collectives the trainers use: an all-to-all of uneven sizes (blocking, and in the background on a group
of its own, as a pipelined halo exchange sends), a sum over the ranks. Prints one JSON line per rank."""
import json
import os
import sys

import torch
import torch.distributed as dist

from sylvie.comm.collective import torch_all_to_all
from sylvie.runtime.process_group import init_distributed, shutdown, sum_over_ranks

ctx = init_distributed("cuda", timeout_s=60)
r, w, dev = ctx.rank, ctx.world, ctx.device
send_sizes = [(j + 1) * (r + 1) for j in range(w)]  # rank r sends (j + 1)(r + 1) values to rank j
recv_sizes = [(r + 1) * (j + 1) for j in range(w)]
send = torch.cat([torch.full((n,), 100.0 * r + j, device=dev) for j, n in enumerate(send_sizes)])
expected = torch.cat([torch.full((n,), 100.0 * j + r, device=dev) for j, n in enumerate(recv_sizes)])
recv = torch.zeros(sum(recv_sizes), device=dev)
torch_all_to_all()(recv, send, recv_sizes, send_sizes, False)
blocking = torch.equal(recv, expected)
group = dist.new_group(backend=dist.get_backend()) if w > 1 else None
recv.zero_()
work = torch_all_to_all(group)(recv, send, recv_sizes, send_sizes, True)
if work is not None:
    work.wait()
background = torch.equal(recv, expected)
total = float(sum_over_ranks(torch.tensor([r + 1.0], dtype=torch.float64), dev)[0])
print(json.dumps({"rank": r, "world": w, "device": str(dev), "backend": str(ctx.backend),
                  "group_backend": str(dist.get_backend()), "tensors_on": str(recv.device),
                  "all_to_all": blocking, "background_all_to_all": background,
                  "sum": total, "sum_expected": w * (w + 1) / 2}), flush=True)
shutdown(finished=True)
sys.stdout.flush()
os._exit(0)  # as `sylvie train` ends a rank: skip the C++ static destructors
