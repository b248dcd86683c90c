"""Partition-quality summary from a manifest: balance, edge cut, halo sizes, and each part's predicted cost."""
from __future__ import annotations

import numpy as np


def max_over_mean(x: np.ndarray) -> float:
    """The largest part's share of a quantity over the mean part's (1.0 when there is none)."""
    return float(x.max() / x.mean()) if x.size and x.mean() > 0 else 1.0


def quality(manifest: dict) -> dict:
    parts = manifest["parts"]
    inner = np.array([p["inner_nodes"] for p in parts])
    train = np.array([p["train_nodes"] for p in parts])
    edges = np.array([p["edges"] for p in parts])
    halo = np.array([p["halo_nodes"] for p in parts])
    return {
        "edge_cut": manifest["edge_cut"],
        "edge_cut_fraction": manifest["edge_cut"] / max(manifest["num_edges"], 1),
        "replication_factor": float((inner.sum() + halo.sum()) / max(inner.sum(), 1)),
        "imbalance_nodes": max_over_mean(inner), "imbalance_train": max_over_mean(train),
        "imbalance_edges": max_over_mean(edges), "halo_total": int(halo.sum()),
    }


def predicted_cost(manifest: dict) -> dict[str, np.ndarray]:
    """Per part, what a full-graph epoch asks of its rank: ``halo_in`` and ``halo_out`` (rows it receives and sends
    per layer's exchange), and its ``compute`` and ``exchange`` over the mean part's: the aggregation grows with the
    edges a part stores, the exchange with the rows it receives and sends. Every layer waits for the slowest rank."""
    parts = manifest["parts"]
    halo_in = np.array([p["halo_nodes"] for p in parts], dtype=np.int64)
    halo_out = np.zeros(len(parts), dtype=np.int64)
    for p in parts:
        halo_out[:len(p.get("halo_from", []))] += np.asarray(p.get("halo_from", []), dtype=np.int64)
    edges = np.array([p["edges"] for p in parts], dtype=np.float64)
    rows = (halo_in + halo_out).astype(np.float64)
    return {"halo_in": halo_in, "halo_out": halo_out,
            "compute": edges / edges.mean() if edges.mean() > 0 else np.ones(len(parts)),
            "exchange": rows / rows.mean() if rows.mean() > 0 else np.ones(len(parts))}


def format_summary(manifest: dict) -> str:
    q, cost = quality(manifest), predicted_cost(manifest)
    by = manifest["method"]
    if "partitioner" in manifest:
        by += f" ({manifest['partitioner']['library']}, {manifest['partitioner']['idx_bits']}-bit)"
    lines = [f"partition of {manifest['dataset']}: {manifest['num_parts']} parts by {by}",
             f"{'part':>4} {'inner':>10} {'train':>8} {'edges':>11} {'halo in':>10} {'halo out':>10} "
             f"{'compute':>8} {'exchange':>8}"]
    for i, p in enumerate(manifest["parts"]):
        lines.append(f"{p['part']:>4} {p['inner_nodes']:>10,} {p['train_nodes']:>8,} {p['edges']:>11,} "
                     f"{cost['halo_in'][i]:>10,} {cost['halo_out'][i]:>10,} {cost['compute'][i]:>7.2f}x "
                     f"{cost['exchange'][i]:>7.2f}x")
    lines.append(f"edge cut {q['edge_cut']:,} ({100 * q['edge_cut_fraction']:.1f}% of edges), replication factor "
                 f"{q['replication_factor']:.3f}, max/mean imbalance: nodes {q['imbalance_nodes']:.3f}, "
                 f"train {q['imbalance_train']:.3f}, edges {q['imbalance_edges']:.3f}")
    balance = manifest.get("balance")
    if balance and "regime" in balance:
        bound = f"each within {balance['tolerance']} of the mean" if balance["tolerance"] else "no bound"
        lines.append(f"balanced for {balance['regime']} training ({bound}), max/mean: " + ", ".join(
            f"{name} {c['max_over_mean']:.3f}" for name, c in balance["constraints"].items()))
    if manifest["num_parts"] > 1:
        c, x = int(np.argmax(cost["compute"])), int(np.argmax(cost["exchange"]))
        lines.append(f"predicted pace of a full-graph epoch (x the mean part): compute set by part {c} "
                     f"({cost['compute'][c]:.2f}x: its edges), halo exchange by part {x} ({cost['exchange'][x]:.2f}x: "
                     f"the rows it receives and sends)")
    lines += over_tolerance(manifest)
    return "\n".join(lines)


def over_tolerance(manifest: dict) -> list[str]:
    """A warning per balance constraint whose max/mean exceeds the partitioner's tolerance by more than its vertex
    slack (what the indivisible heaviest vertex allows)."""
    balance = manifest.get("balance") or {}
    tolerance = balance.get("tolerance")
    if not tolerance:
        return []
    return [f"warning: {name} is {c['max_over_mean']:.3f} of the mean in its largest part, above the tolerance "
            f"{tolerance} plus {c['vertex_slack']:.3f} for its heaviest vertex: the partitioner could not balance it "
            f"(try more parts' worth of nodes per part, or another seed)"
            for name, c in balance.get("constraints", {}).items()
            if c["max_over_mean"] > tolerance + c["vertex_slack"] + 1e-9]
