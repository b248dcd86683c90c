import pytest
from support.commands import BIN, run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stage", ["", "download", "export", "partition", "vip", "train", "evaluate", "report",
                                   "launch"])
def test_help(stage):
    p = run([str(BIN / "sylvie"), *([stage] if stage else []), "--help"])
    assert "usage: sylvie" in p.stdout


def test_train_flags_come_from_the_schema():
    p = run([str(BIN / "sylvie"), "train", "--help"])
    assert "--weight-decay" in p.stdout and "the optimiser's weight decay" in p.stdout
    assert "{gcn,sage,gat,rgcn,rgat}" in p.stdout
    assert "--optimizer-args OPTIMIZER_ARGS" in p.stdout and "--lr-schedule LR_SCHEDULE" in p.stdout
