"""Test-only crash points: ``kill -9`` the process at a named point of a sync.

Enabled only by the environment variable ``ANCRE_TEST_CRASH_AT`` — ``"<point>:<n>"`` (comma
separated for several): the *n*-th time the process reaches ``<point>`` it sends itself SIGKILL
(no cleanup, no flush, exactly like ``kill -9``). Unset (production), :func:`crash_point` is one
dictionary lookup. Points (see :mod:`ancre.daemon.sync`):

``extract``       a file was read and is about to be extracted (no state written for it yet)
``after_upsert``  the document's points are in the store, its state row still says ``pending``
``purge``         a vanished document's points were deleted, its state row not yet
``bm25_publish``  a BM25 index was built from the store and is about to be published
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "ANCRE_TEST_CRASH_AT"

_lock = threading.Lock()
_hits: dict[str, int] = {}


def _plan() -> dict[str, int]:
    spec = os.environ.get(ENV, "")
    plan: dict[str, int] = {}
    for part in spec.split(","):
        name, _, n = part.strip().partition(":")
        if name:
            plan[name] = int(n or 1)
    return plan


_PLAN = _plan()


def crash_point(name: str) -> None:
    """SIGKILL this process if ``ANCRE_TEST_CRASH_AT`` asks for it at this hit of ``name``."""
    target = _PLAN.get(name)
    if target is None:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] == target:
            os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["ENV", "crash_point"]
