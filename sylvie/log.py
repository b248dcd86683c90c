"""Where sylvie's messages go. Modules log to ``logging.getLogger(__name__)``; the commands call ``configure`` once:
one handler writing each message as a line on stderr through ``tqdm.write``, so a progress bar is not torn. INFO by
default, WARNING with ``--quiet``, DEBUG with ``--verbose``. As a library, sylvie adds no handler. A progress bar
shows only where ``show_progress`` says: on a terminal, and not under ``--quiet``.
"""
from __future__ import annotations

import logging
import sys

from tqdm import tqdm

ROOT = "sylvie"
LEVELS = {"quiet": logging.WARNING, "normal": logging.INFO, "verbose": logging.DEBUG}


class _LineHandler(logging.Handler):
    """A record as one line on the current ``sys.stderr`` (looked up per record: tests and callers replace it),
    written by tqdm so that open bars are cleared and redrawn around it, and flushed at once: a rank may end with
    ``os._exit`` right after its last line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # the line and its newline in one write: ranks sharing one stderr (a pipe) then never interleave a
            # line with another's (tqdm.write's own end= is a second write, between which another rank's line lands)
            tqdm.write(self.format(record) + "\n", file=sys.stderr, end="")
            sys.stderr.flush()
        except Exception:  # logging's convention: a failed write must not raise
            self.handleError(record)


def configure(verbosity: str = "normal") -> None:
    """Send the ``sylvie`` loggers' records of ``verbosity``'s level and above to stderr, one line each (again:
    the level changes, the handler stays one)."""
    logger = logging.getLogger(ROOT)
    if not any(isinstance(h, _LineHandler) for h in logger.handlers):
        handler = _LineHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(LEVELS[verbosity])


def show_progress(wanted: bool = True) -> bool:
    """Whether a stage draws a progress bar: where it is ``wanted`` (its ``--progress``), stderr is a terminal (a
    log file gets the lines, not a bar redrawn in it) and the messages are not quieted (``--quiet``)."""
    return wanted and sys.stderr.isatty() and logging.getLogger(ROOT).getEffectiveLevel() <= logging.INFO
