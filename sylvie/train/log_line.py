"""The one log line per epoch, rank 0's (the records themselves go to ``metrics.jsonl``:
``sylvie.formats.epoch_record``)."""
from __future__ import annotations

from sylvie.formats.epoch_record import EpochRecord


def format_epoch(r: EpochRecord, epochs: int) -> str:
    """Epoch, loss, accuracies (link prediction: its metric, MRR or Hits@50), time (of which communication waited on
    and hidden), bytes sent and their width, for pipelined full-graph training whether the epoch was synchronous, and
    with several ranks which one set the pace (computed longest) and how long the ranks waited."""
    def acc(value):
        return "  –   " if value is None else f"{value:.4f}"

    splits = (f"train {acc(r.train_acc)} | val {acc(r.val_acc)} | test {acc(r.test_acc)}" if r.metric == "accuracy"
              else f"val {r.metric} {acc(r.val_acc)} | test {r.metric} {acc(r.test_acc)}")  # link: none of training
    return (f"epoch {r.epoch + 1:>4}/{epochs} | loss {r.loss:.4f} | {splits} | {r.epoch_time:.3f} s "
            f"(comm {r.comm_time:.3f} s waited, {r.hidden_comm_time:.3f} s hidden) | "
            f"sent {r.bytes_sent / 1e6:.2f} MB at {r.bits} bits"
            + (f" (gradients {r.halo.gradient_bits})"
               if r.halo is not None and r.halo.gradient_bits not in (None, r.bits) else "")
            + (f" | {'sync' if r.halo.staleness == 0 else 'stale'}" if r.halo is not None and r.halo.pipeline else "")
            + _pace(r))


def _pace(r: EpochRecord) -> str:
    pace = r.pace()
    if pace is None or len(r.rank_compute_time) < 2:
        return ""
    rank, over_mean = pace
    wait = r.rank_wait_time
    return (f" | pace: rank {rank} computes {r.rank_compute_time[rank]:.3f} s ({over_mean:.2f}x mean), "
            f"ranks wait {min(wait):.3f}-{max(wait):.3f} s")
