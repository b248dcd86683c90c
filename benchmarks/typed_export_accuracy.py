"""A typed graph as users export it, trained by R-GCN: Cora as papers and words (tests/support/graphs.py's
``write_papers_and_words``: papers keyed ``paper`` with their bag of words as features, words keyed ``word`` and
learnt as embeddings, ``has_word`` from each paper's nonzero words), its citations given three ways:

- undirected: each citation once, in an arbitrary direction, declared ``directed: false`` (one relation, both ways);
- both ways: each citation in both directions, taken as directed, so ``reverse_relations`` adds ``rev-cites``, the
  same edges again under a weight of its own (how our reader had to be given it before ``directed: false``);
- one way: each citation once, taken as directed (what the export gave, undeclared): cites and rev-cites each hold
  an arbitrary half of a paper's neighbours.

Each trained by our R-GCN (``sylvie.models.gnn.GNN``, whole graph, one process) and by DGL's R-GCN on the same
canonical graph (``HeteroGraphConv`` of ``GraphConv(norm='right')`` per relation, summed, a self-loop weight per
node type and a bias: DGL's entity-classification layer; words an ``nn.Embedding``), both 2 x 16, dropout 0.5 between
the layers, Adam lr 0.01, weight decay 5e-4, the test accuracy at the best validation epoch, seeds 0-2.

    python benchmarks/typed_export_accuracy.py [--epochs 200] [--seeds 0 1 2] [--forms undirected ...] [--record]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import dgl
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import REPO, add_record_option, embedded_cora, publish

sys.path.insert(0, str(REPO / "tests"))
from support.graphs import write_papers_and_words  # noqa: E402  (the tests' writer: one copy of the export)

from sylvie.config import section  # noqa: E402
from sylvie.data.graph import load_graph  # noqa: E402
from sylvie.data.registry import download  # noqa: E402
from sylvie.models.blocks import whole_graph_block  # noqa: E402
from sylvie.models.gnn import GNN  # noqa: E402

HIDDEN, LR, WEIGHT_DECAY, DROPOUT = 16, 0.01, 5e-4, 0.5
FORMS = ("undirected", "both ways", "one way")


def graphs(work: Path, forms=FORMS) -> dict:
    """Each form's canonical graph, built from the exported files by ``sylvie download``'s loader."""
    cora = embedded_cora(work)
    out = {}
    for form in forms:
        options = write_papers_and_words(cora, work / f"files-{form.replace(' ', '-')}",
                                         cites_both_ways=form == "both ways")
        if form != "undirected":
            del options["relations"][0]["directed"]
        if form == "one way":
            options["relations"][0]["directed"] = True
        target = work / f"graph-{form.replace(' ', '-')}"
        shutil.rmtree(target, ignore_errors=True)
        download("mine", target, section("dataset", options))
        out[form] = load_graph(target)
    return out


def _split(g):
    p = g.node_counts[0]
    y = torch.from_numpy(g.labels[:p].copy())
    return p, y, [torch.from_numpy(m[:p].copy()) for m in (g.train_mask, g.val_mask, g.test_mask)]


def _best(logits_of, params, y, masks, epochs: int, seed: int) -> float:
    """Test accuracy at the best validation accuracy over ``epochs`` full-graph epochs."""
    train, val, test = masks
    opt = torch.optim.Adam(params, lr=LR, weight_decay=WEIGHT_DECAY)
    best = (-1.0, 0.0)
    for _ in range(epochs):
        loss = F.cross_entropy(logits_of(True)[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            pred = logits_of(False).argmax(1)
        v, t = ((pred[m] == y[m]).float().mean().item() for m in (val, test))
        if v > best[0]:
            best = (v, t)
    return best[1]


def ours(g, epochs: int, seed: int) -> float:
    p, y, masks = _split(g)
    block = whole_graph_block(g.src, g.dst, g.node_counts, types=g.types, relation=g.relation)
    torch.manual_seed(seed)
    model = GNN("rgcn", g.feature_widths, hidden=HIDDEN, num_classes=g.num_classes, layers=2, dropout=DROPOUT,
                embedding_rows=g.node_counts, embedding_width=HIDDEN, types=g.types)
    x = [torch.from_numpy(g.type_features[0].copy()), None]

    def logits(training: bool):
        model.train(training)
        return model(block, x)

    return _best(logits, list(model.parameters()), y, masks, epochs, seed)


class _DGLLayer(nn.Module):
    def __init__(self, relations, widths: dict, out: int, activation):
        super().__init__()
        self.conv = dgl.nn.HeteroGraphConv({r.name: dgl.nn.GraphConv(widths[r.src], out, norm="right", bias=False,
                                                                     allow_zero_in_degree=True)
                                            for r in relations}, aggregate="sum")
        self.loop = nn.ParameterDict({t: nn.Parameter(torch.empty(w, out)) for t, w in widths.items()})
        for w in self.loop.values():
            nn.init.xavier_uniform_(w, gain=nn.init.calculate_gain("relu"))
        self.bias = nn.Parameter(torch.zeros(out))
        self.activation = activation

    def forward(self, g, h):
        out = {t: v + h[t] @ self.loop[t] + self.bias for t, v in self.conv(g, h).items()}
        return {t: self.activation(v) if self.activation else v for t, v in out.items()}


def reference(g, epochs: int, seed: int) -> float:
    p, y, masks = _split(g)
    data = {}
    for r, rel in enumerate(g.types.relations):
        s, d = g.types.ends(r)
        mine = g.relation == r
        data[(rel.src, rel.name, rel.dst)] = (torch.from_numpy(g.src[mine] - g.type_offsets[s]),
                                              torch.from_numpy(g.dst[mine] - g.type_offsets[d]))
    hg = dgl.heterograph(data, num_nodes_dict=dict(zip(g.types.node_types, g.node_counts, strict=True)))
    torch.manual_seed(seed)
    x = torch.from_numpy(g.type_features[0].copy())
    words = nn.Embedding(g.node_counts[1], HIDDEN)
    nn.init.normal_(words.weight, std=HIDDEN ** -0.5)
    first = _DGLLayer(g.types.relations, {"paper": x.shape[1], "word": HIDDEN}, HIDDEN, F.relu)
    second = _DGLLayer(g.types.relations, {"paper": HIDDEN, "word": HIDDEN}, g.num_classes, None)

    def logits(training: bool):
        h = first(hg, {"paper": x, "word": words.weight})
        h = {t: F.dropout(v, DROPOUT, training) for t, v in h.items()}
        return second(hg, h)["paper"]

    params = [*words.parameters(), *first.parameters(), *second.parameters()]
    return _best(logits, params, y, masks, epochs, seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS),
                    help="the forms of the citations to train")
    ap.add_argument("--work", default="results/bench-typed-export", help="the files and graphs go here")
    add_record_option(ap, "typed-export-accuracy")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    built = graphs(work, args.forms)
    rows = []
    for form in args.forms:
        g = built[form]
        t0 = time.perf_counter()
        mine = [ours(g, args.epochs, s) for s in args.seeds]
        theirs = [reference(g, args.epochs, s) for s in args.seeds]
        rows.append((form, g, mine, theirs, time.perf_counter() - t0))
        print(f"{form}: ours {mine}, DGL {theirs}", file=sys.stderr, flush=True)

    def cell(values):
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values):.3f} ± {sd:.3f} ({' / '.join(f'{v:.3f}' for v in values)})"

    lines = [f"Cora as papers and words (2,708 papers with their 1,433-word bags as features; 1,433 words learnt as "
             f"{HIDDEN}-wide embeddings; has_word and rev-has_word from the bags), its 5,278 citations given three "
             f"ways; R-GCN 2 x {HIDDEN}, dropout {DROPOUT}, Adam lr {LR}, weight decay {WEIGHT_DECAY}, "
             f"{args.epochs} full-graph epochs, the test accuracy at the best validation epoch, seeds "
             f"{', '.join(map(str, args.seeds))} (mean ± sample std, then each). Ours: sylvie's R-GCN in one process; "
             f"DGL: HeteroGraphConv of GraphConv(norm='right') per relation plus a self-loop weight per type.", "",
             "| citations given | relations | edges of cites (+ rev-cites) | ours | DGL's R-GCN |",
             "| --- | --- | --- | --- | --- |"]
    for form, g, mine, theirs, _ in rows:
        names = [r.name for r in g.types.relations]
        cites = [int((g.relation == names.index(n)).sum()) for n in ("cites", "rev-cites") if n in names]
        lines.append(f"| {form} | {', '.join(names)} | {' + '.join(f'{c:,}' for c in cites)} | {cell(mine)} | "
                     f"{cell(theirs)} |")
    lines += ["", "Seconds per form (both models, every seed): " +
              ", ".join(f"{form} {secs:.0f}" for form, _, _, _, secs in rows) + "."]
    publish("\n".join(lines), args.record and "typed-export-accuracy")


if __name__ == "__main__":
    main()
