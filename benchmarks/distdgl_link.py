"""A sampled link-prediction epoch of ours beside DistDGL's (issue 69): ``sylvie train --task link --mode sampled`` on 4
ranks against DGL 1.1.3's ``examples/pytorch/graphsage/dist/train_dist_unsupervised.py``, one server and one trainer
per part, both on this machine's loopback, on the same graph and the same node-to-part assignment, interleaved in
one run (ours, DistDGL, ours, DistDGL, ...) so that other load on the machine hits both alike.

    python benchmarks/distdgl_link.py --distdgl-example /tmp/distdgl-src/train_dist_unsupervised.py
    python benchmarks/distdgl_link.py --distdgl-example PATH --record     # as root: DistDGL needs mount namespaces

The example is not part of this repository: take it from DGL's 1.1.3 tree, e.g. ``git show
v1.1.3:examples/pytorch/graphsage/dist/train_dist_unsupervised.py`` in a clone of dmlc/dgl.

Graph: ``sylvie download synthetic`` of ``sampled.py``'s DistDGL setting (50,000 nodes, average degree 20, 64
features) with ``--edge-split 0.05 0.05 --eval-negatives 100``: the held-out pairs leave the graph, the rest are the
training pairs, each an edge both ways in the graph. It is cut once by ``sylvie partition --parts 4`` (METIS), and
DGL's ``dgl.distributed.partition_graph`` (``part_method="metis"``, one hop of halo) is handed that assignment in
place of its own METIS call, so each rank owns the same nodes on both sides (checked).

Both sides, one epoch: every training pair once as a positive (448,377 at the defaults; DistDGL's example trains on
every edge of its graph, both directions of each pair, so its ``edge_split`` is given the pairs' one direction, see
the patches), ``--batch-size`` positives per rank per step, ``--negatives`` uniform negative destinations per positive
(DGL's ``negative_sampler.Uniform``, our ``uniform``), GraphSAGE-mean of ``--layers`` x ``--hidden`` (the last layer
``--hidden`` wide too, the example's ``n_classes = num_hidden``), dropout 0.5, no self-loops, the pair scored by the
dot product of its ends' embeddings, BCE, Adam lr 0.003, neighbours sampled by ``--fanouts`` (DGL's order, the first
next to the inputs), each batch's positive edges kept out of its neighbourhoods (DistDGL: ``--remove_edge``, the
example's ``exclude="reverse_id"`` with the identity as reverse, so the edge itself; ours: the edge and its reverse),
no feature cache on either side (ours ``--alpha 0``), one OMP thread per trainer (DGL's ``launch.py`` default here:
cores / 2 / trainers) and per server. Ours pipelines sampling and fetching ``--prefetch`` batches ahead (our
default, 2); DistDGL's example samples in the trainer (``launch.py``'s default of 0 sampler processes).

Timing: ours is rank 0's ``epoch_time`` in metrics.jsonl; DistDGL's the line machine 0's trainer prints,
``[r]Epoch Time(s):`` (the sum of its steps; every step of every trainer meets the others' in DDP's all-reduce).
Each run trains ``--epochs`` epochs; the first of each run is warm-up and dropped; the table gives the median over
the remaining epochs of all ``--repeats`` runs, with each run's median beside it, and the load average before and
after each run.

How DistDGL runs here, as ``tools/launch.py`` would on 4 machines, without ssh: each "machine" m is a mount
namespace of its own (``unshare -m``, a private tmpfs on /dev/shm, where DistDGL's server shares its partition with
its trainer) holding the server (``DGL_ROLE=server``, ``DGL_SERVER_ID=m``) and the trainer (``DGL_ROLE=client``,
``DGL_DIST_MODE=distributed``, torch's ``RANK=m``, ``WORLD_SIZE=4``), with launch.py's environment variables;
ip_config lists 127.0.0.1 four times, one port each. The example runs unchanged (``runpy``) under these patches,
made in its process at run time (this script with ``--as-distdgl-process``):

1. ``dgl.distributed.rpc_client.get_local_machine_id`` returns the machine's number (``DISTDGL_MACHINE_ID``):
   DistDGL finds its machine by its IP address, and all four share 127.0.0.1.
2. ``dgl.distributed.edge_split``, given the example's all-true mask over every edge, is given instead the mask of
   each training pair's one direction (the graph's edge ``u -> v`` with ``u < v``, in DGL's shuffled edge ids), so
   that an epoch trains on the same positives as ours, once each.
3. ``sklearn.linear_model.LogisticRegression`` drops the ``multi_class`` argument, which scikit-learn 1.8 removed:
   only the example's evaluation after training uses it (outside the timed epochs).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

MACHINES = 4
GRAPH = {"nodes": 50_000, "avg_degree": 20.0, "features": 64}  # sampled.py's DistDGL setting (issue 30)
EDGE_SPLIT = ("0.05", "0.05")
EVAL_NEGATIVES = 100
GRAPH_NAME = "synthetic"
LR, DROPOUT = 0.003, 0.5
EPOCH_LINE = re.compile(r"^\[(\d+)\]Epoch Time\(s\): ([0-9.]+)", re.M)


# ----------------------------------------------------------------------------------- inside a DistDGL process

def distdgl_process(example: str, argv: list[str]) -> None:
    """Run ``example`` as ``__main__`` with ``argv``, after the patches of the module docstring."""
    import dgl.distributed as dd
    import dgl.distributed.rpc_client as rpc_client
    import sklearn.linear_model as lm
    import torch

    machine = int(os.environ["DISTDGL_MACHINE_ID"])
    rpc_client.get_local_machine_id = lambda server_namebook: machine  # 1: four machines on 127.0.0.1

    pair_mask = torch.load(os.environ["DISTDGL_PAIR_MASK"])
    edge_split = dd.edge_split

    def one_direction_split(edges, partition_book=None, *args, **kwargs):  # 2: each training pair once
        if isinstance(edges, torch.Tensor) and edges.dtype == torch.bool and edges.shape == pair_mask.shape \
                and bool(edges.all()):
            edges = pair_mask
        return edge_split(edges, partition_book, *args, **kwargs)

    dd.edge_split = one_direction_split

    logistic = lm.LogisticRegression

    def logistic_regression(*args, multi_class=None, **kwargs):  # 3: scikit-learn >= 1.8 has no multi_class
        return logistic(*args, **kwargs)

    lm.LogisticRegression = logistic_regression

    import runpy
    sys.argv = [example, *argv]
    runpy.run_path(example, run_name="__main__")


# ------------------------------------------------------------------------------------------------ preparation

def dataset(work: Path) -> Path:
    from common import sylvie

    out = work / "graph"
    if not (out / "meta.json").exists():
        flags = [x for k, v in GRAPH.items() for x in (f"--{k.replace('_', '-')}", v)]
        sylvie("download", "synthetic", "--out", out, *flags, "--edge-split", *EDGE_SPLIT, "--eval-negatives",
               EVAL_NEGATIVES, log=work / "download.log")
    else:
        meta = json.loads((out / "meta.json").read_text())
        made = {k: meta["params"].get(k) for k in GRAPH}
        split = meta.get("edge_split") or {}
        if made != GRAPH or (str(split.get("val")), str(split.get("test"))) != EDGE_SPLIT:
            raise SystemExit(f"{out} holds another graph ({made}, edge split {split}): remove it or give another "
                             "--work")
    return out


def dgl_partition(graph_dir: Path, part_dir: Path, out: Path) -> dict:
    """DGL's partition of the canonical graph (training edges both ways) with our METIS assignment, and the mask of
    the training pairs' one direction in its shuffled edge ids. Returns a summary (nodes and edges per part)."""
    config = out / f"{GRAPH_NAME}.json"
    summary = out / "summary.json"
    if config.exists() and summary.exists():
        return json.loads(summary.read_text())
    import dgl
    import dgl.distributed.partition as dgl_partition_module
    import numpy as np
    import torch

    from sylvie.data.graph import load_graph
    from sylvie.formats.partition_manifest import read_manifest
    from sylvie.partition.shard_reader import read_shard

    g = load_graph(graph_dir)
    src, dst = np.array(g.src, np.int64), np.array(g.dst, np.int64)
    dg = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=g.num_nodes)
    dg.ndata["features"] = torch.from_numpy(np.ascontiguousarray(g.features))
    dg.ndata["labels"] = torch.from_numpy(np.asarray(g.labels, np.int64))
    for name, mask in (("train_mask", g.train_mask), ("val_mask", g.val_mask), ("test_mask", g.test_mask)):
        dg.ndata[name] = torch.from_numpy(np.asarray(mask, bool))
    manifest = read_manifest(part_dir)
    assignment = np.full(g.num_nodes, -1, np.int64)
    for p in range(manifest["num_parts"]):
        assignment[np.asarray(read_shard(part_dir, p, manifest).global_id, np.int64)] = p
    if (assignment < 0).any():
        raise SystemExit(f"{part_dir}: {int((assignment < 0).sum())} nodes in no part")

    def ours(sim_g, num_parts, **kwargs):
        assert sim_g.num_nodes() == assignment.shape[0] and num_parts == manifest["num_parts"]
        return torch.from_numpy(assignment)

    metis = dgl_partition_module.metis_partition_assignment
    dgl_partition_module.metis_partition_assignment = ours
    try:
        orig_nids, orig_eids = dgl.distributed.partition_graph(
            dg, GRAPH_NAME, manifest["num_parts"], str(out), part_method="metis", return_mapping=True)
    finally:
        dgl_partition_module.metis_partition_assignment = metis
    # the check: DGL's part of every node is ours (its node ids are shuffled: part p holds a contiguous range)
    meta = json.loads(config.read_text())
    ranges = meta["node_map"]["_N"] if isinstance(meta["node_map"], dict) else meta["node_map"]
    dgl_part = np.zeros(g.num_nodes, np.int64)
    for p, (lo, hi) in enumerate(ranges):
        dgl_part[orig_nids[lo:hi].numpy()] = p
    if not np.array_equal(dgl_part, assignment):
        raise SystemExit("DGL's partition does not keep our node assignment")
    forward = torch.from_numpy(src < dst)
    pair_mask = forward[orig_eids]  # orig_eids[new id] = original id
    torch.save(pair_mask, out / "pair_mask.pt")
    counts = {"nodes": [int(hi - lo) for lo, hi in ranges],
              "edges": [int(hi - lo) for lo, hi in (meta["edge_map"]["_N:_E:_N"] if isinstance(
                  meta["edge_map"], dict) else meta["edge_map"])],
              "pairs": int(pair_mask.sum()), "graph_edges": int(dg.num_edges())}
    summary.write_text(json.dumps(counts))
    return counts


# ------------------------------------------------------------------------------------------------------ runs

def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ours(args, part: Path, out: Path) -> list[float]:
    """``sylvie launch --ranks 4 -- sylvie train --task link --mode sampled ...``: rank 0's epoch times."""
    from common import BIN, run

    from sylvie.formats.epoch_record import read_metrics

    train = [BIN / "sylvie", "train", "--partition", part, "--out", out, "--seed", 0, "--task", "link", "--mode",
             "sampled", "--arch", "sage", "--layers", args.layers, "--hidden", args.hidden, "--dropout", DROPOUT,
             "--no-self-loop", "--decoder", "dot", "--loss", "bce", "--negatives", args.negatives,
             "--negative-sampler", "uniform", "--fanouts", *args.fanouts, "--batch-size", args.batch_size,
             "--prefetch", args.prefetch, "--alpha", 0, "--lr", LR, "--weight-decay", 0, "--epochs", args.epochs,
             "--eval-every", args.epochs, "--checkpoint-every", 0, "--log-every", 1, "--no-progress"]
    run([BIN / "sylvie", "launch", "--ranks", MACHINES, "--", *train], log=out.parent / f"{out.name}.log",
        timeout_s=args.timeout)
    return [r.epoch_time for r in read_metrics(out)]


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def distdgl(args, dgl_parts: Path, out: Path) -> list[float]:
    """The example on 4 machines of this one (see the module docstring): machine 0's trainer's epoch times."""
    out.mkdir(parents=True, exist_ok=True)
    *server_ports, master_port = free_ports(MACHINES + 1)
    ip_config = out / "ip_config.txt"
    ip_config.write_text("".join(f"127.0.0.1 {p}\n" for p in server_ports))
    part_config = (dgl_parts / f"{GRAPH_NAME}.json").resolve()
    example_args = ["--graph_name", GRAPH_NAME, "--ip_config", str(ip_config), "--part_config", str(part_config),
                    "--num_epochs", str(args.epochs), "--num_hidden", str(args.hidden), "--num-layers",
                    str(args.layers), "--fan_out", ",".join(map(str, args.fanouts)), "--batch_size",
                    str(args.batch_size), "--lr", str(LR), "--dropout", str(DROPOUT), "--num_negs",
                    str(args.negatives), "--remove_edge", "--log_every", "1000000", "--n_classes", "8"]
    common_env = {"DGL_NUM_SAMPLER": "0", "DGL_NUM_CLIENT": str(MACHINES), "DGL_CONF_PATH": str(part_config),
                  "DGL_IP_CONFIG": str(ip_config), "DGL_NUM_SERVER": "1", "DGL_GRAPH_FORMAT": "csc",
                  "OMP_NUM_THREADS": "1", "DISTDGL_PAIR_MASK": str((dgl_parts / "pair_mask.pt").resolve()),
                  "PYTHONUNBUFFERED": "1"}
    me = [sys.executable, str(Path(__file__).resolve()), "--as-distdgl-process",
          str(Path(args.distdgl_example).resolve()), "--"]
    procs = []
    try:
        for m in range(MACHINES):
            server = {**common_env, "DGL_ROLE": "server", "DGL_SERVER_ID": str(m), "DGL_KEEP_ALIVE": "0",
                      "DISTDGL_MACHINE_ID": str(m)}
            client = {**common_env, "DGL_DIST_MODE": "distributed", "DGL_ROLE": "client", "DGL_GROUP_ID": "0",
                      "DISTDGL_MACHINE_ID": str(m), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port),
                      "RANK": str(m), "WORLD_SIZE": str(MACHINES), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}

            def line(env, log):
                return (" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(
                    me + example_args) + f" > {shlex.quote(str(log))} 2>&1")

            script = (f"mount -t tmpfs -o size=2g distdgl-shm /dev/shm || exit 97\n"
                      f"cd {shlex.quote(str(out))}\n"
                      f"env {line(server, out / f'server-{m}.log')} &\n"
                      f"server=$!\n"
                      f"env {line(client, out / f'trainer-{m}.log')}\n"
                      f"rc=$?\n"
                      f"wait $server\n"
                      f"exit $((rc ? rc : $?))\n")
            procs.append(subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                                          start_new_session=True))
        deadline = time.monotonic() + args.timeout
        for m, p in enumerate(procs):
            try:
                rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise SystemExit(f"DistDGL ran past {args.timeout:g} s; logs in {out}") from None
            if rc:
                logs = "\n".join(f"--- {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-15:])
                                 for f in sorted(out.glob("*.log")))
                raise SystemExit(f"DistDGL machine {m} exited {rc}; logs in {out}:\n{logs}")
    finally:
        for p in procs:
            stop(p)
    times = [float(t) for _, t in EPOCH_LINE.findall((out / "trainer-0.log").read_text())]
    if len(times) != args.epochs:
        raise SystemExit(f"{out / 'trainer-0.log'}: {len(times)} epoch lines, expected {args.epochs}")
    return times


def stop(p: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the process group ``p`` leads if anything of it is left, SIGKILL after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            continue
        break
    p.poll()


# ------------------------------------------------------------------------------------------------------ main

def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--as-distdgl-process":
        return distdgl_process(sys.argv[2], sys.argv[4:] if sys.argv[3:4] == ["--"] else sys.argv[3:])
    from common import add_record_option, partition, publish

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--distdgl-example", required=True,
                    help="DGL 1.1.3's examples/pytorch/graphsage/dist/train_dist_unsupervised.py")
    ap.add_argument("--epochs", type=int, default=3, help="epochs of each run (the first of each dropped)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each side, interleaved")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[10, 25], help="DGL's order: the first next to the "
                    "inputs (the example's default 10,25)")
    ap.add_argument("--batch-size", type=int, default=1000, help="positive pairs per rank per step (the example's "
                    "default)")
    ap.add_argument("--negatives", type=int, default=1, help="uniform negatives per positive (the example's default)")
    ap.add_argument("--prefetch", type=int, default=2, help="ours: sampling.prefetch (our default)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds each run may take")
    ap.add_argument("--work", default="results/bench-distdgl-link")
    ap.add_argument("--note", help="a sentence added to the record's introduction (e.g. where the package came from)")
    add_record_option(ap, "distdgl-link")
    args = ap.parse_args()
    if len(args.fanouts) != args.layers:
        raise SystemExit(f"--fanouts gives {len(args.fanouts)} fanouts for {args.layers} layers")
    if not Path(args.distdgl_example).is_file():
        raise SystemExit(f"--distdgl-example {args.distdgl_example}: no such file")
    if os.geteuid() != 0:
        raise SystemExit("DistDGL's four machines are mount namespaces (unshare -m): run as root")
    work = Path(args.work).resolve()
    graph = dataset(work)
    part = partition(graph, work / "metis-p4", parts=MACHINES)
    counts = dgl_partition(graph, part, work / "dgl-p4")
    print(f"DGL partition: nodes {counts['nodes']}, edges {counts['edges']}, training pairs "
          f"{counts['pairs']:,} of {counts['graph_edges']:,} directed edges", file=sys.stderr, flush=True)

    runs: dict[str, list[list[float]]] = {"ours": [], "DistDGL": []}
    loads = [load()]
    for rep in range(args.repeats):
        for side in ("ours", "DistDGL"):
            out = work / "runs" / f"{side.lower()}-{rep}"
            if out.exists():  # this script's own run of an earlier call
                shutil.rmtree(out)
            out.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            times = ours(args, part, out) if side == "ours" else distdgl(args, work / "dgl-p4", out)
            runs[side].append(times)
            loads.append(load())
            print(f"{side} run {rep + 1}: epochs {', '.join(f'{t:.2f}' for t in times)} s "
                  f"({time.perf_counter() - t0:.0f} s in all; load {loads[-1]})", file=sys.stderr, flush=True)

    steady = {side: [t for r in rs for t in (r[1:] or r)] for side, rs in runs.items()}
    med = {side: statistics.median(ts) for side, ts in steady.items()}
    per_run = {side: ", ".join(f"{statistics.median(r[1:] or r):.2f}" for r in rs) for side, rs in runs.items()}
    fan = ", ".join(map(str, args.fanouts))
    head = (f"Synthetic graph (`sylvie download synthetic`, {GRAPH['nodes']:,} nodes, average degree "
            f"{GRAPH['avg_degree']:g}, {GRAPH['features']} features; edge split {EDGE_SPLIT[0]} / {EDGE_SPLIT[1]} held "
            f"out): {counts['graph_edges']:,} directed edges, {counts['pairs']:,} training pairs, every one a positive "
            f"once an epoch; 4 parts, our METIS assignment on both sides (DGL's nodes per part {counts['nodes']}). "
            f"GraphSAGE-mean {args.layers} x {args.hidden}, dropout {DROPOUT}, fanouts ({fan}) (first next to the "
            f"inputs), {args.batch_size} positives per rank per step, {args.negatives} uniform negative(s) per "
            f"positive, dot decoder, BCE, Adam lr {LR}, positive edges excluded from their neighbourhoods, no cache. "
            f"4 ranks on this machine's {os.cpu_count()} cores over loopback: ours `sylvie launch --ranks 4` (prefetch "
            f"{args.prefetch}); DistDGL 1.1.3's `train_dist_unsupervised.py`, one server and one trainer per part (0 "
            f"sampler processes, 1 OMP thread each). {args.repeats} runs of each side, interleaved, {args.epochs} "
            f"epochs each; s/epoch: rank 0's (DistDGL: machine 0's trainer), the median over every run's epochs "
            f"after its first. Load average "
            f"(1, 5, 15 min) before and after each run: {' -> '.join(loads)}.")
    table = "\n".join([head, "", "| | s/epoch (median) | each run's median | vs DistDGL |", "| --- | --- | --- | --- |",
                       f"| ours (`sylvie train --task link --mode sampled`) | {med['ours']:.2f} | {per_run['ours']} | "
                       f"{med['ours'] / med['DistDGL']:.2f}x |",
                       f"| DistDGL 1.1.3 (`train_dist_unsupervised.py`) | {med['DistDGL']:.2f} | "
                       f"{per_run['DistDGL']} | 1.00x |"])
    intro = ("DistDGL's example ran unchanged under three patches made in its processes at run time (see "
             "`benchmarks/distdgl_link.py`'s docstring): (1) `dgl.distributed.rpc_client.get_local_machine_id` "
             "returns the machine's number, since all four machines share 127.0.0.1 (each is a mount namespace with "
             "a private /dev/shm); (2) `dgl.distributed.edge_split` gets the mask of each training pair's one "
             "direction in place of the example's all-true mask, so both sides train the same positives once an "
             "epoch; (3) `sklearn.linear_model.LogisticRegression` drops `multi_class` (removed in scikit-learn "
             "1.8), used only by the example's evaluation after training." + (f" {args.note}" if args.note else ""))
    publish(table, args.record and "distdgl-link", intro=intro)


if __name__ == "__main__":
    main()
