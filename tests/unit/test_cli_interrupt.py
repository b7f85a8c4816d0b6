"""Ctrl-C while ``ancre sync`` follows a pass of the running ancre (:func:`ancre.app.cli._ctrl_c_as_flag`):
the first SIGINT only sets a flag that the follow loop checks between two requests (an interrupt
raised inside an HTTP call could leave httpcore's pool lock held and hang the exit), a second one
raises as usual, and the previous handler is back afterwards; a Ctrl-C is seen wherever in the
loop's wait it lands (a handler calling ``threading.Event.set`` deadlocked there)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

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


SPIN = textwrap.dedent("""
    import os, signal, sys, time
    from ancre.app.cli import _ctrl_c_as_flag

    for trial in range(300):
        with _ctrl_c_as_flag() as stop:
            child = os.fork()
            if child == 0:  # lands at a different moment of the parent's loop each time
                time.sleep(0.0001 * (trial % 7))
                os.kill(os.getppid(), signal.SIGINT)
                os._exit(0)
            while not stop.wait(0):
                pass
            os.waitpid(child, 0)
    print("seen", trial + 1)
""")


def test_a_ctrl_c_is_seen_wherever_it_lands_in_the_wait() -> None:
    """300 SIGINTs, each landing at another moment of a loop that does nothing but wait on the
    flag: each is seen. With a ``threading.Event`` as the flag (its ``set`` in the handler, its
    ``wait`` in the loop), the handler blocks for ever on the event's lock within a few trials."""
    out = subprocess.run([sys.executable, "-c", SPIN], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.split() == ["seen", "300"], (out.stdout, out.stderr[-2000:])
