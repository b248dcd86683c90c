"""train.tensorboard: rank 0 also writes each epoch's metrics as TensorBoard scalars in RUN/tensorboard, the same
numbers as metrics.jsonl (which stays the record the report reads)."""
import pytest
from support.commands import ranks

from sylvie.atomic import read_jsonl

pytestmark = pytest.mark.slow


def test_scalars_are_the_metrics(cora_partitions, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    ranks(2, "--no-python", "sylvie", "train", "--partition", cora_partitions[2], "--out", out, "--epochs", "5",
          "--eval-every", "2", "--tensorboard", "--lr-schedule", "ExponentialLR", "--lr-schedule-args",
          '{"gamma": 0.5}', "--no-progress")
    records = read_jsonl(out / "metrics.jsonl")
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"loss/train", "accuracy/val", "optimiser/lr", "seconds/epoch", "bytes/sent"} <= tags, tags

    def series(tag):
        return {e.step: e.value for e in events.Scalars(tag)}

    assert series("loss/train") == pytest.approx({r["epoch"]: r["loss"] for r in records}, rel=1e-6)
    assert series("optimiser/lr") == pytest.approx({e: 0.01 * 0.5 ** e for e in range(5)}, rel=1e-6)
    # accuracies only where evaluated (every 2nd epoch and the last)
    assert series("accuracy/val") == pytest.approx({r["epoch"]: r["val_acc"] for r in records
                                                    if r["val_acc"] is not None}, rel=1e-6)
    assert sorted(series("accuracy/val")) == [1, 3, 4]
