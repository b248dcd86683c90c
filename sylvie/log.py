"""Where sylvie's messages go. Every module logs to its own logger under ``sylvie`` (``logging.getLogger(__name__)``);
the commands (``sylvie.cli``, the launcher's supervisor) call ``configure`` once: one handler on the ``sylvie``
logger that writes each message as one line on stderr through ``tqdm.write``, so that a progress bar on the
terminal is redrawn under the line instead of being torn by it. Level INFO (the epoch lines, what a stage wrote),
WARNING with ``--quiet``, DEBUG with ``--verbose``. A program that imports sylvie as a library configures logging
as it likes; sylvie adds no handler of its own there.
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
            tqdm.write(self.format(record), file=sys.stderr)
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
