"""The one log line per epoch (metrics files are JSON lines: ``sylvie.atomic.write_jsonl``)."""
from __future__ import annotations


def format_epoch(r: dict, epochs: int) -> str:
    """The one log line per epoch."""
    def acc(key):
        return "  –   " if r.get(key) is None else f"{r[key]:.4f}"

    return (f"epoch {r['epoch'] + 1:>4}/{epochs} | loss {r['loss']:.4f} | train {acc('train_acc')} | "
            f"val {acc('val_acc')} | test {acc('test_acc')} | {r['epoch_time']:.3f} s "
            f"(comm {r['comm_time']:.3f} s waited, {r.get('hidden_comm_time', 0.0):.3f} s hidden) | "
            f"sent {r['bytes_sent'] / 1e6:.2f} MB at {r.get('bits', 32)} bits"
            + (f" | {'sync' if r['staleness'] == 0 else 'stale'}" if r.get("pipeline") else ""))
