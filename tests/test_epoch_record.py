"""metrics.jsonl's one owner (``sylvie.formats.epoch_record``): a record round-trips, version 1 lines (before
``format_version`` and ``mode``) still read, other versions and foreign lines are refused naming the line."""
import json

import pytest

from sylvie.errors import SylvieError
from sylvie.formats.epoch_record import (
    FORMAT_VERSION,
    BatchEpoch,
    EpochRecord,
    HaloEpoch,
    PlannedEpoch,
    read_metrics,
    write_metrics,
)

pytestmark = pytest.mark.unit

COMMON = dict(loss=1.25, train_acc=0.5, val_acc=None, test_acc=None, epoch_time=0.3, compute_time=0.2,
              comm_time=0.1, hidden_comm_time=0.05, codec_time=0.01, allreduce_time=0.02, sample_time=0.0,
              eval_time=0.0, bits=1, bytes_sent=100, bytes_received=100, fp32_bytes_sent=3200, allreduce_bytes=64)
FULL = EpochRecord(epoch=0, mode="full", **COMMON,
                   halo=HaloEpoch(0.08, True, 1, "", 0.5, 0.01, None, PlannedEpoch(2, True, "bound K=5")),
                   rank_compute_time=[0.2, 0.3, 0.25, 0.25], rank_wait_time=[0.1, 0.0, 0.05, 0.05])
SAMPLED = EpochRecord(epoch=1, mode="sampled", **COMMON,
                      batches=BatchEpoch(3, 120.5, 300, 40, 21, 40 / 61, 100, 0, 1000, 0.2, 0.01))


def test_records_of_both_modes_round_trip(tmp_path):
    write_metrics(tmp_path, [FULL, SAMPLED])
    assert read_metrics(tmp_path) == [FULL, SAMPLED]
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["format_version"] == FORMAT_VERSION and lines[0]["mode"] == "full"
    assert lines[0]["staleness"] == 1 and lines[0]["planned"] == {"epoch": 2, "synchronous": True,
                                                                  "reason": "bound K=5"}
    assert lines[1]["rows_remote"] == 21 and "staleness" not in lines[1]  # flat, each mode its own fields


def test_version_1_lines_read_with_their_mode_inferred(tmp_path):
    old_full = {k: v for k, v in FULL.to_json().items() if k not in ("format_version", "mode", "sample_time")}
    old_sampled = {k: v for k, v in SAMPLED.to_json().items() if k not in ("format_version", "mode")}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(old_full) + "\n" + json.dumps(old_sampled) + "\n")
    full, sampled = read_metrics(tmp_path / "metrics.jsonl")
    assert (full.mode, full.halo.staleness, full.sample_time) == ("full", 1, 0.0)
    assert sampled == SAMPLED


def test_every_ranks_times_travel_and_name_the_rank_that_sets_the_pace(tmp_path):
    """Rank 1 computed longest (0.3 s, 1.2x the mean 0.25 s) and waited least: the others waited for it."""
    from sylvie.train.log_line import format_epoch
    from sylvie.train.rank_times import rank_times, rank_times_slots

    faults = [1000, 2000, 3000, 4000]
    summed = sum(rank_times_slots(rank, 4, c, w, "cpu", faults[rank]) for rank, (c, w) in
                 enumerate(zip(FULL.rank_compute_time, FULL.rank_wait_time)))  # what the all-reduce sums
    got = rank_times(summed)
    assert (got["rank_compute_time"], got["rank_wait_time"]) == (FULL.rank_compute_time, FULL.rank_wait_time)
    assert got["rank_minor_faults"] == faults
    assert all(peak > 10 << 20 for peak in got["rank_peak_rss"])  # this process's, 4 times
    rank, over_mean = FULL.pace()
    assert rank == 1 and over_mean == pytest.approx(1.2)
    assert "pace: rank 1 computes 0.300 s (1.20x mean), ranks wait 0.000-0.100 s" in format_epoch(FULL, 10)
    assert SAMPLED.pace() is None and "pace" not in format_epoch(SAMPLED, 10)  # written without per-rank times
    (tmp_path / "metrics.jsonl").write_text(json.dumps({**FULL.to_json(), "rank_wait_time": [0.1, "x"]}) + "\n")
    with pytest.raises(SylvieError, match="line 1: .*'rank_wait_time' is a list with non-numbers"):
        read_metrics(tmp_path)


@pytest.mark.parametrize("line, words", [
    ({**FULL.to_json(), "format_version": 9}, "format_version 9"),
    ({"epoch": 1}, "not an epoch record"),
    ([1, 2], "a JSON list, not an object"),
])
def test_other_versions_and_foreign_lines_are_refused_naming_the_line(tmp_path, line, words):
    (tmp_path / "metrics.jsonl").write_text(json.dumps(FULL.to_json()) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(SylvieError, match=f"metrics.jsonl: line 2: .*{words}"):
        read_metrics(tmp_path)


def test_a_record_holds_the_part_of_its_mode_only():
    with pytest.raises(ValueError, match="halo for full"):
        EpochRecord(epoch=0, mode="sampled", **COMMON, halo=FULL.halo)


@pytest.mark.parametrize("epochs, words", [
    ((0, 1, 1), "line 3: epoch 1 after epoch 1 repeats an epoch"),
    ((0, 1, 2, 1), "line 4: epoch 1 after epoch 2 repeats an epoch"),
    ((0, 2), "line 2: epoch 2 after epoch 0 skips epochs"),
    ((1, 2), "line 1: epoch 1 as the first epoch skips epochs"),
])
def test_epochs_that_repeat_go_back_or_skip_are_refused_naming_the_line(tmp_path, epochs, words):
    """A metrics file holds epochs 0, 1, 2, ... once each: one edited by hand or pieced from two runs is refused
    with the file and the line, as the report and the cluster benchmark read it."""
    lines = [json.dumps({**FULL.to_json(), "epoch": e, "planned": {"epoch": e + 2, "synchronous": True,
                                                                  "reason": ""}}) for e in epochs]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SylvieError, match=f"metrics.jsonl: {words} .*rerun `sylvie train`"):
        read_metrics(tmp_path)
