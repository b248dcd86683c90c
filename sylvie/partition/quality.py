"""Partition-quality summary from a manifest: balance, edge cut, halo sizes."""
from __future__ import annotations

import numpy as np


def quality(manifest: dict) -> dict:
    parts = manifest["parts"]
    inner = np.array([p["inner_nodes"] for p in parts])
    train = np.array([p["train_nodes"] for p in parts])
    edges = np.array([p["edges"] for p in parts])
    halo = np.array([p["halo_nodes"] for p in parts])

    def imbalance(x):
        return float(x.max() / x.mean()) if x.mean() > 0 else 1.0

    return {
        "edge_cut": manifest["edge_cut"],
        "edge_cut_fraction": manifest["edge_cut"] / max(manifest["num_edges"], 1),
        "replication_factor": float((inner.sum() + halo.sum()) / max(inner.sum(), 1)),
        "imbalance_nodes": imbalance(inner), "imbalance_train": imbalance(train),
        "imbalance_edges": imbalance(edges), "halo_total": int(halo.sum()),
    }


def format_summary(manifest: dict) -> str:
    q = quality(manifest)
    lines = [f"partition of {manifest['dataset']}: {manifest['num_parts']} parts by {manifest['method']}",
             f"{'part':>4} {'inner':>10} {'train':>8} {'edges':>11} {'halo':>10}"]
    for p in manifest["parts"]:
        lines.append(f"{p['part']:>4} {p['inner_nodes']:>10,} {p['train_nodes']:>8,} {p['edges']:>11,} "
                     f"{p['halo_nodes']:>10,}")
    lines.append(f"edge cut {q['edge_cut']:,} ({100 * q['edge_cut_fraction']:.1f}% of edges), replication factor "
                 f"{q['replication_factor']:.3f}, max/mean imbalance: nodes {q['imbalance_nodes']:.3f}, "
                 f"train {q['imbalance_train']:.3f}, edges {q['imbalance_edges']:.3f}")
    return "\n".join(lines)
