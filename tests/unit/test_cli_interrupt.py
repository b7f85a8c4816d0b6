"""Ctrl-C while ``ancre sync`` follows a pass of the running ancre (:func:`ancre.app.cli._ctrl_c_as_flag`):
the first SIGINT only sets a flag that the follow loop checks between two requests (an interrupt
raised inside an HTTP call could leave httpcore's pool lock held and hang the exit), a second one
raises as usual, and the previous handler is back afterwards."""

from __future__ import annotations

import os
import signal

import pytest

from ancre.app.cli import _ctrl_c_as_flag


def test_first_ctrl_c_sets_the_flag_second_raises_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    with _ctrl_c_as_flag() as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGINT)  # delivered to the main thread at the next bytecode
        assert stop.wait(5)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            stop.wait(5)  # the handler runs here and raises
    assert signal.getsignal(signal.SIGINT) is before
