"""Progress bars show only on a terminal and never under ``-q``: every stage that draws one asks
``sylvie.log.show_progress`` (a log file that is not a terminal gets lines, not a bar redrawn in it)."""
import io
import logging

import pytest

from sylvie import cli
from sylvie.log import ROOT

pytestmark = pytest.mark.unit


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _stderr_of(argv: list[str], monkeypatch, terminal: bool) -> str:
    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    level = logging.getLogger(ROOT).level
    try:
        assert cli.main(argv) == 0
    finally:
        logging.getLogger(ROOT).setLevel(level)
    return err.getvalue()


def _stages(cora_dir, tmp_path, name: str) -> list[list[str]]:
    part = tmp_path / f"{name}-part"
    return [["partition", str(cora_dir), "--out", str(part), "--parts", "2", "--method", "random"],
            ["vip", str(part), "--out", str(tmp_path / f"{name}-vip"), "--fanouts", "5", "5"]]


@pytest.mark.parametrize(("terminal", "flags", "bars"), [(True, [], True), (True, ["-q"], False),
                                                         (False, [], False), (False, ["-q"], False)])
def test_a_bar_only_on_a_terminal_and_never_quiet(cora_dir, tmp_path, monkeypatch, terminal, flags, bars):
    name = f"{'tty' if terminal else 'log'}{'-q' if flags else ''}"
    for argv in _stages(cora_dir, tmp_path, name):
        err = _stderr_of([*argv, *flags], monkeypatch, terminal)
        drawn = "part/s]" in err or "\r" in err
        assert drawn == bars, (argv, flags, err[-300:])
        if flags:  # quiet: not even the stage's summary line
            assert err.strip() == "", err
