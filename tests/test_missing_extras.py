"""A stage whose optional extra is not installed (pyproject.toml's report, ogb and tensorboard extras) says which
to install in one line (``sylvie.extras.needs``), exit 2, nothing written; never a ModuleNotFoundError traceback."""
import logging
import sys

import numpy as np
import pytest

from sylvie import cli
from sylvie.errors import SylvieError

pytestmark = pytest.mark.unit


def _without(monkeypatch, *tops: str) -> None:
    """As if the packages ``tops`` were not installed: importing them (or a module of theirs) fails, and the
    modules of ours that imported them import again."""
    for name in list(sys.modules):
        if name.split(".")[0] in tops or name in ("sylvie.report.plots", "sylvie.report.html"):
            monkeypatch.delitem(sys.modules, name)
    for top in tops:
        monkeypatch.setitem(sys.modules, top, None)


def _last_line(argv, capsys) -> str:
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


def test_the_report_without_matplotlib(monkeypatch, capsys, tmp_path):
    _without(monkeypatch, "matplotlib")
    line = _last_line(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")], capsys)
    assert line.endswith("sylvie report (its plots) needs matplotlib, which is not installed: pip install "
                         "'sylvie[report]' (or pip install matplotlib)"), line
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("missing", ["ogb", "pandas"])
def test_an_ogb_download_without_the_ogb_extra(monkeypatch, capsys, tmp_path, missing):
    _without(monkeypatch, missing)
    line = _last_line(["download", "ogbn-arxiv", "--out", str(tmp_path / "g"), "--root", str(tmp_path / "raw")],
                      capsys)
    assert f"sylvie download ogbn-arxiv needs {missing}, which is not installed: pip install 'sylvie[ogb]'" in line
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(("dataset", "module"), [("ogbn-arxiv", "ogb.nodeproppred"), ("ogbl-collab", None)])
def test_ogbs_evaluator_without_the_ogb_extra(monkeypatch, dataset, module):
    from sylvie.evaluate import result

    _without(monkeypatch, "ogb")
    with pytest.raises(SylvieError, match=rf"evaluating {dataset} \(OGB's Evaluator\) needs ogb, which is not "
                                          r"installed: pip install 'sylvie\[ogb\]'"):
        if module:
            result.accuracy(dataset, np.zeros(3, np.int64), np.zeros(3, np.int64))
        else:
            result.link_metrics(dataset, np.ones(2), np.zeros((2, 3)), shared=False)


def test_tensorboard_without_its_extra_is_said_and_the_run_goes_on(monkeypatch, caplog, tmp_path):
    from sylvie.train.tensorboard_metrics import TensorBoardMetrics

    _without(monkeypatch, "tensorboard")
    monkeypatch.delitem(sys.modules, "torch.utils.tensorboard", raising=False)
    caplog.set_level(logging.WARNING)
    TensorBoardMetrics(tmp_path)
    assert "pip install 'sylvie[tensorboard]' (or pip install tensorboard)" in caplog.text
