"""One full-graph epoch and one sampled epoch of GraphSAGE and GCN on a GPU: our models (``sylvie.models.GNN`` on our
blocks) beside PyG's own layers (``torch_geometric.nn.SAGEConv``, ``GCNConv``) on the same graph, with the same
layers, widths, dropout, optimiser and minibatches, measured in the same run, interleaved.

    python benchmarks/gpu_epoch.py                              # products-like graph at 200,000 nodes, on the GPU
    python benchmarks/gpu_epoch.py --nodes 20000 --device cpu   # a smoke run where there is no GPU

PyG runs two ways, both measured: on ``edge_index`` (its gather-scatter path, "PyG scatter") and on a PyTorch sparse
CSR ``adj_t`` (rows the destinations, as ``ToSparseTensor(layout=torch.sparse_csr)`` and ``to_torch_csr_tensor``
build it: its layers' ``message_and_aggregate`` through ``torch.sparse.mm``, "PyG CSR"), the fastest path its docs
offer without pyg-lib or torch-sparse; the table's last column is ours against the faster of the two.

Full-graph: one training step over the whole graph (forward, backward, Adam): ours on ``whole_graph_block``, PyG's
on ``edge_index`` and on ``adj_t``, each built once outside the timing as our block is (GCNConv with ``cached=True``:
its normalisation computed once, as ours is kept with the block).
Sampled: one pass over the training vertices in minibatches, each sampled on the CPU (our counter-based sampler,
``sylvie.sampling``), one step each. Ours as the sampled trainer runs it: in its sampling thread, ``--prefetch``
minibatches ahead, each minibatch's blocks, labels and input rows (a one-rank feature store with the trainer's
defaults: on a GPU its rows read zero-copy from pinned memory) in one buffer sent in one copy
(``sylvie.train.sampled_batches``). PyG's with its ``NeighborLoader`` where the machine has the sampling library it
needs (pyg-lib or torch-sparse), else PyG's layers on our sampler's minibatches, sampled in line, their rows gathered
on the host and copied over (the same blocks as ``edge_index``; said under the table). PyG CSR takes each of our
blocks as a (destinations x sources) sparse CSR ``adj_t`` from the block's own CSR arrays (no sort; GCN's square over
the sources, as its scatter path), converted inside the timed step. Each figure is the median of the timed epochs,
after an untimed warm-up (compilation, cuSPARSE and allocator set-up). With ``--profile`` on a GPU, the profiler
also counts the host-to-device copies a sampled minibatch takes, ours and PyG's.
"""
import argparse
import statistics
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_record_option, publish

from sylvie.config import section
from sylvie.data.registry import load
from sylvie.features.features_by_type import FeaturesByType, TypeSpaces
from sylvie.models import GNN
from sylvie.models.blocks import whole_graph_block
from sylvie.sampling.batch_transfer import BatchTransfer, wait
from sylvie.sampling.neighbor_sampler import NeighborSampler
from sylvie.sampling.pipeline import SamplingPipeline
from sylvie.train.sampled_batches import BatchPreparer


def pyg_status() -> tuple[object, str]:
    """(torch_geometric or None, a line saying what PyG offers here)."""
    try:
        import torch_geometric
        import torch_geometric.typing as pyg_typing
    except ImportError as e:
        return None, f"PyG is not installed here ({e}): only our models are measured"
    libs = [name for name, ok in (("pyg-lib", pyg_typing.WITH_PYG_LIB), ("torch-sparse", pyg_typing.WITH_TORCH_SPARSE))
            if ok]
    if libs:
        return torch_geometric, (f"PyG {torch_geometric.__version__} with {' and '.join(libs)}: its sampled epochs "
                                 "use its NeighborLoader")
    return torch_geometric, (f"PyG {torch_geometric.__version__} without pyg-lib or torch-sparse, which its "
                             "NeighborLoader needs: its sampled epochs run PyG's layers on our sampler's minibatches "
                             "(PyG scatter on edge_index, PyG CSR on a torch.sparse CSR adj_t)")


class PygNet(nn.Module):
    """PyG's layers stacked as ``GNN`` stacks ours: ReLU and dropout between layers."""

    def __init__(self, arch: str, d_in: int, hidden: int, classes: int, layers: int, dropout: float,
                 cached: bool, self_loops: bool):
        super().__init__()
        from torch_geometric.nn import GCNConv, SAGEConv

        dims = [d_in] + [hidden] * (layers - 1) + [classes]
        self.arch, self.dropout = arch, dropout
        self.convs = nn.ModuleList(
            SAGEConv(a, b, aggr="mean") if arch == "sage" else GCNConv(a, b, cached=cached, add_self_loops=self_loops)
            for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x, edge_index):
        """The whole graph (or NeighborLoader's subgraph): every layer over every row."""
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x

    def forward_blocks(self, x, blocks):
        """Our sampler's blocks as ``edge_index`` (source row -> destination row, the destinations the first rows) or
        as a sparse CSR ``adj_t`` (``block_adj_t``)."""
        for i, (conv, (adj, num_src, num_dst)) in enumerate(zip(self.convs, blocks)):
            sparse = adj.layout == torch.sparse_csr
            if self.arch == "sage":
                x = conv((x, x[:num_dst]), adj, **({} if sparse else {"size": (num_src, num_dst)}))
            else:  # GCNConv is not bipartite: over the block's sources, whose first rows are its destinations
                x = conv(x, adj)[:num_dst]
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


def full_adj_t(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """The whole graph as PyG's sparse CSR ``adj_t`` (row v: v's in-edges), as
    ``ToSparseTensor(layout=torch.sparse_csr)`` builds it."""
    from torch_geometric.utils import to_torch_csr_tensor

    return to_torch_csr_tensor(edge_index.flip([0]), size=(n, n))


def block_adj_t(b, square: bool, device) -> torch.Tensor:
    """One of our blocks as PyG's sparse CSR ``adj_t`` (destinations x sources) from its own CSR arrays; ``square``:
    (sources x sources), the rows past the destinations empty (GCNConv, which is not bipartite)."""
    indptr = b.indptr
    if square and b.num_src > b.num_dst:
        indptr = torch.cat([indptr, indptr[-1:].expand(b.num_src - b.num_dst)])
    rows = b.num_src if square else b.num_dst
    return torch.sparse_csr_tensor(indptr.to(device), b.indices.long().to(device),
                                   torch.ones(b.num_edges, device=device), size=(rows, b.num_src))


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def train_step(model, opt, forward, labels) -> None:
    model.train()
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(forward(), labels).backward()
    opt.step()


def profile(title: str, fn, device) -> int:
    """PyTorch's profiler over ``fn()``: the operations that took the most time, CPU and GPU (--profile); returns
    the host-to-device copies it saw (0 on the CPU)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync(device)
    with torch_profile(activities=acts) as prof:
        fn()
        sync(device)
    for key in (("self_device_time_total", "self_cpu_time_total") if device.type == "cuda"
                else ("self_cpu_time_total",)):
        print(f"profile of {title}, by {key}:\n"
              f"{prof.key_averages().table(sort_by=key, row_limit=14, max_name_column_width=48)}", flush=True)
    return sum(1 for e in prof.events() if "HtoD" in e.name)


def in_edges(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole graph's in-edges by destination (the sampler's topology)."""
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, np.ascontiguousarray(np.asarray(src, np.int64)[order])


class Setting:
    """What both implementations of one architecture train on."""

    def __init__(self, arch: str, g, args, device, topology):
        self.arch, self.args, self.device, self.g, self.topology = arch, args, device, g, topology
        self.loop = arch == "gcn"  # GCN with a self-loop per node, as the pipeline trains it; GraphSAGE has its own
        self.feats, self.classes = g.features.shape[1], g.num_classes
        self.x_host = torch.from_numpy(np.ascontiguousarray(g.features))
        self.y_host = torch.from_numpy(np.asarray(g.labels, np.int64))
        self.train_ids = np.flatnonzero(g.train_mask)

    def edge_index(self) -> torch.Tensor:
        return torch.stack([torch.from_numpy(np.asarray(self.g.src, np.int64)),
                            torch.from_numpy(np.asarray(self.g.dst, np.int64))])

    def ours(self):
        torch.manual_seed(0)
        a = self.args
        m = GNN(self.arch, self.feats, a.hidden, self.classes, a.layers, a.dropout).to(self.device)
        return m, torch.optim.Adam(m.parameters(), lr=a.lr)

    def pyg(self, cached: bool, self_loops: bool):
        torch.manual_seed(0)
        a = self.args
        m = PygNet(self.arch, self.feats, a.hidden, self.classes, a.layers, a.dropout, cached, self_loops)
        m = m.to(self.device)
        return m, torch.optim.Adam(m.parameters(), lr=a.lr)


def interleaved(methods: dict, rounds: int, device, warm_up) -> dict[str, list[float]]:
    """Seconds of ``fn(r)`` for rounds r = 1..rounds, every method once per round, after ``warm_up(fn)`` of each."""
    for fn in methods.values():
        warm_up(fn)
    times = {k: [] for k in methods}
    for r in range(1, rounds + 1):
        for k, fn in methods.items():
            times[k].append(timed(lambda fn=fn, r=r: fn(r), device))
    return times


def measure_full(s: Setting, pyg) -> dict:
    """Seconds per full-graph epoch, ours and PyG's."""
    dev = s.device
    x, y = s.x_host.to(dev), s.y_host.to(dev)
    train_idx = torch.from_numpy(s.train_ids).to(dev)
    block = whole_graph_block(s.g.src, s.g.dst, s.g.num_nodes, s.loop, dev)
    ours, ours_opt = s.ours()
    methods = {"ours": lambda _r: train_step(ours, ours_opt, lambda: ours(block, x)[train_idx], y[train_idx])}
    if pyg is not None:
        edge_index = s.edge_index().to(dev)
        for key, adj in (("pyg", edge_index), ("pyg_csr", full_adj_t(edge_index, s.g.num_nodes))):
            theirs, theirs_opt = s.pyg(cached=True, self_loops=True)
            methods[key] = lambda _r, m=theirs, o=theirs_opt, a=adj: train_step(m, o, lambda: m(x, a)[train_idx],
                                                                               y[train_idx])
    times = interleaved(methods, s.args.epochs, dev, warm_up=lambda fn: fn(0))
    return {k: statistics.median(v) for k, v in times.items()}


def measure_sampled(s: Setting, pyg) -> dict:
    """Seconds per sampled epoch, ours and PyG's, and how long ours sampled; the minibatches of an epoch."""
    dev, args = s.device, s.args
    indptr, src = s.topology
    iterations = max(1, -(-len(s.train_ids) // args.batch_size))
    sampler = NeighborSampler(indptr, src, args.fanouts, s.train_ids, iterations, seed=0, rank=0, self_loop=s.loop)
    batches = min(iterations, args.max_batches) if args.max_batches else iterations
    sampling: list[float] = []
    seeds = {}

    def seeds_of(epoch):
        if epoch not in seeds:
            seeds[epoch] = sampler.epoch_seeds(epoch)
        return seeds[epoch]

    ours, ours_opt = s.ours()
    n = s.g.num_nodes  # one rank: every row its own, in id order, the trainer's feature store defaults
    features = FeaturesByType(0, TypeSpaces([0, n], [[n]]), [s.x_host.numpy()], [np.arange(n)],
                                 [np.zeros(0, np.int64)], all_to_all=None, device=dev)
    preparer = BatchPreparer(sampler, features, s.y_host, 0, BatchTransfer(dev, args.prefetch + 2))
    pipeline = SamplingPipeline(args.prefetch, timeout=None)

    def ours_epoch(epoch, n=batches):
        preparer.begin_epoch()
        for batch in pipeline.map(preparer.producer(epoch, seeds_of(epoch)), n):
            wait(batch.ready)
            train_step(ours, ours_opt, lambda b=batch: ours(b.blocks, b.x[0]), batch.labels)
        sampling.append(preparer.sample_seconds)

    methods = {"ours": ours_epoch}
    if pyg is not None:
        methods["pyg"] = pyg_sampled_epoch(s, sampler, seeds_of, batches)
        methods["pyg_csr"] = pyg_sampled_epoch(s, sampler, seeds_of, batches, csr=True)
    times = interleaved(methods, args.sampled_epochs, dev, warm_up=lambda fn: fn(0, n=min(3, batches)))
    copies = {}
    if args.profile:
        for name, fn in methods.items():
            copies[name] = profile(f"{s.arch}, sampled, {name}: 3 minibatches", lambda fn=fn: fn(0, n=min(3, batches)),
                                   dev) / min(3, batches)
    pipeline.close()
    return {**{k: statistics.median(v) for k, v in times.items()}, "sampling": statistics.median(sampling[1:]),
            "batches": batches, "copies": copies}


def pyg_sampled_epoch(s: Setting, sampler, seeds_of, batches: int, csr: bool = False):
    """PyG's sampled epoch: its NeighborLoader where it can sample, else its layers on our sampler's minibatches;
    ``csr``: its layers on our sampler's minibatches as sparse CSR ``adj_t``."""
    import torch_geometric.typing as pyg_typing

    dev = s.device
    if not csr and (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        theirs, opt = s.pyg(cached=False, self_loops=s.loop)
        data = Data(x=s.x_host, y=s.y_host, edge_index=s.edge_index(), num_nodes=s.g.num_nodes)
        loader = NeighborLoader(data, num_neighbors=list(reversed(s.args.fanouts)), batch_size=s.args.batch_size,
                                input_nodes=torch.from_numpy(s.train_ids), shuffle=True)

        def step(batch):
            batch = batch.to(dev)
            train_step(theirs, opt, lambda: theirs(batch.x, batch.edge_index)[:batch.batch_size],
                       batch.y[:batch.batch_size])

        def epoch_with_loader(epoch, n=batches):
            for i, batch in enumerate(loader):
                if i == n:
                    break
                step(batch)

        return epoch_with_loader
    theirs, opt = s.pyg(cached=False, self_loops=False)  # the sampler's blocks carry GCN's self-loops

    def step_on_blocks(mb):
        if csr:
            blocks = [(block_adj_t(b, s.arch == "gcn", dev), b.num_src, b.num_dst) for b in mb.blocks]
        else:
            blocks = [(torch.stack([b.indices.long(), b.dst_of_edges()]).to(dev), b.num_src, b.num_dst)
                      for b in mb.blocks]
        xb = s.x_host[mb.input_nodes].to(dev)
        train_step(theirs, opt, lambda: theirs.forward_blocks(xb, blocks), s.y_host[mb.seeds].to(dev))

    def epoch_on_our_blocks(epoch, n=batches):
        for i in range(n):
            step_on_blocks(sampler.sample(seeds_of(epoch)[i], epoch, i))

    return epoch_on_our_blocks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000, help="nodes of the products-like graph (default 200,000)")
    ap.add_argument("--archs", nargs="+", default=["sage", "gcn"], choices=["sage", "gcn"])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="per layer, input layer first")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=5, help="timed full-graph epochs (after one warm-up)")
    ap.add_argument("--sampled-epochs", type=int, default=1, help="timed sampled epochs (after a warm-up)")
    ap.add_argument("--max-batches", type=int, default=0, help="at most this many minibatches a sampled epoch")
    ap.add_argument("--prefetch", type=int, default=2, help="our sampled epoch's minibatches prepared ahead "
                    "(the trainer's sampling.prefetch; default 2)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--profile", action="store_true", help="after the timings, PyTorch's profiler over 3 sampled "
                    "minibatches of each implementation: the operations that took the most time")
    add_record_option(ap, "gpu-epoch")
    args = ap.parse_args()
    if len(args.fanouts) != args.layers:
        ap.error(f"--fanouts has {len(args.fanouts)} entries for {args.layers} layers")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible to torch (--device cpu for a smoke run)")
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    pyg, pyg_line = pyg_status()
    # PyTorch's one-time notes on building a sparse CSR tensor (beta; invariants unchecked), not about the measurement
    warnings.filterwarnings("ignore", message="Sparse (CSR tensor support is in beta|invariant checks)")
    print(pyg_line, flush=True)
    t0 = time.perf_counter()
    g = load("synthetic-products", section("dataset", {"source": "synthetic", "preset": "products",
                                                       "nodes": args.nodes}))
    topology = in_edges(g.src, g.dst, g.num_nodes)
    print(f"graph: {g.num_nodes:,} nodes, {len(g.src):,} directed edges, {g.features.shape[1]} features, "
          f"{g.num_classes} classes, {int(g.train_mask.sum()):,} training nodes ({time.perf_counter() - t0:.1f} s)",
          flush=True)
    rows, copy_counts = [], []
    for arch in args.archs:
        setting = Setting(arch, g, args, device, topology)
        full = measure_full(setting, pyg)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        sampled = measure_sampled(setting, pyg)
        print(f"{arch}: full graph {full}, sampled {sampled}", flush=True)
        name = {"sage": "GraphSAGE (mean)", "gcn": "GCN"}[arch]
        if sampled["copies"] and device.type == "cuda":
            copy_counts.append(f"{name} " + ", ".join(f"{k} {v:.1f}" for k, v in sampled["copies"].items()))
        for t in (full, sampled):
            ours, scatter, csr = t["ours"], t.get("pyg"), t.get("pyg_csr")
            what = f"sampled ({t['batches']} minibatches)" if t is sampled else "full graph"
            extra = f"{t['sampling']:.3f}" if t is sampled else ""
            if scatter is None:
                rows.append(f"| {name} | {what} | {ours:.3f} | {extra} | n/a | n/a | n/a |")
                continue
            best = min(scatter, csr)
            rows.append(f"| {name} | {what} | {ours:.3f} | {extra} | {scatter:.3f} | {csr:.3f} | "
                        f"{ours / best:.2f}x ({'CSR' if csr <= scatter else 'scatter'}) |")
    lines = [f"One training epoch on {where}: products-like graph ({g.num_nodes:,} nodes, {len(g.src):,} directed "
             f"edges, {g.features.shape[1]} features, {g.num_classes} classes), {args.layers} layers x {args.hidden} "
             f"hidden, dropout {args.dropout}, Adam; sampled: fanouts {args.fanouts} (input layer first), batch "
             f"{args.batch_size}; ours prepared {args.prefetch} ahead in one copy each, PyG's in line. Seconds per "
             f"epoch, medians of {args.epochs} full-graph and {args.sampled_epochs} sampled epoch(s) after a warm-up.",
             "", "| model | epoch | ours s | of which sampling s | PyG scatter s | PyG CSR s | ours / PyG's best |",
             "| --- | --- | --- | --- | --- | --- | --- |", *rows, "", pyg_line + "."]
    if copy_counts:
        lines.append("Host-to-device copies a sampled minibatch (PyTorch's profiler, 3 minibatches): "
                     + "; ".join(copy_counts) + ".")
    publish("\n".join(lines), args.record and ("gpu-epoch" if device.type == "cuda" else "gpu-epoch-cpu"))


if __name__ == "__main__":
    main()
