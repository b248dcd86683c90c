"""The two places where sylvie's launcher (sylvie/launch/supervise.py) leans on torchrun's internals, each pinned
here, so that a torch that changes them fails this test rather than silently undoing what the launcher adds:

- ``SubprocessHandler.close(death_sig)`` stops a rank (its process in ``self.proc``); the launcher wraps it to also
  continue a rank that was stopped (SIGSTOP, Ctrl-Z), which could not act on torchrun's SIGTERM otherwise;
- torchrun's loggers and the messages it logs as it stops ranks, which the launcher filters out (its own last line
  says why the run stopped).

No public API of torch.distributed.run does either (torchrun's ``main`` takes arguments only)."""
import inspect
import logging

import pytest

pytestmark = pytest.mark.unit


def test_subprocess_handler_close_is_what_the_launcher_wraps():
    from torch.distributed.elastic.multiprocessing.subprocess_handler import SubprocessHandler

    from sylvie.launch import supervise

    params = list(inspect.signature(SubprocessHandler.close).parameters)
    assert params[:2] == ["self", "death_sig"], params
    assert "self.proc" in inspect.getsource(SubprocessHandler.__init__)  # the rank's Popen, whose pid is its group
    original = SubprocessHandler.close
    try:
        supervise._continue_what_torchrun_stops()
        assert SubprocessHandler.close is not original  # wrapped
    finally:
        SubprocessHandler.close = original


def test_the_messages_the_launcher_filters_are_torchruns():
    import torch.distributed.elastic.agent.server.api as agent_api
    import torch.distributed.elastic.multiprocessing.api as mp_api

    from sylvie.launch import supervise

    assert "Received %s death signal" in inspect.getsource(agent_api)
    assert "Sending process %s closing signal %s" in inspect.getsource(mp_api)
    supervise._quiet_about_signals()
    for module, msg in ((agent_api, "Received %s death signal, shutting down workers"),
                        (mp_api, "Sending process %s closing signal %s")):
        logger = logging.getLogger(module.__name__)
        assert module.logger is logger  # torchrun logs there, where the filter is
        record = logger.makeRecord(logger.name, logging.WARNING, "x", 1, msg, ("SIGTERM",) * msg.count("%s"), None)
        assert not logger.filter(record), msg  # filtered out
        assert logger.filter(logger.makeRecord(logger.name, logging.WARNING, "x", 1, "other", (), None))
