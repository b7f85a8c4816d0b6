"""The daemon's index-build lane: keeps the store a sync leaves the fast one
(:meth:`ancre.daemon.sync.SyncEngine.maintain_index`).

One thread checks every :data:`CHECK_EVERY_S` seconds, and at once when a task changed the index
(:meth:`IndexMaintainer.poke`), whether the store needs an index build — for the embedded store:
enough points searched exactly, or keywords to fill in (:class:`~ancre.index.store.Maintainable`)
— and runs it. The build itself runs in a separate process while passes, rights updates and
questions go on (:mod:`ancre.index.edge_build`); this thread only waits for it, so it also checks
*during* a long pass: a first sync of a million chunks is indexed as it grows, not once at its end.
A failed build is logged and tried again after :data:`RETRY_AFTER_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ancre.daemon.sync import SyncEngine

log = logging.getLogger("ancre.daemon")

CHECK_EVERY_S = 30.0
"""Seconds between two checks when nothing pokes the thread."""
RETRY_AFTER_S = 300.0
"""Seconds before a failed build is tried again."""


class IndexMaintainer:
    """The index-build thread (see the module doc). ``on_built(reports)`` is called after the
    builds of one round (a list of :class:`~ancre.index.edge_build.BuildReport`)."""

    def __init__(
        self,
        engine: SyncEngine,
        *,
        should_stop: Callable[[], bool],
        on_built: Callable[[list[object]], None] | None = None,
        check_every_s: float = CHECK_EVERY_S,
    ) -> None:
        self.engine = engine
        self._should_stop = should_stop
        self._on_built = on_built
        self._every = check_every_s
        self._cv = threading.Condition()
        self._poked = False
        self._building = False
        self._retry_at = 0.0
        self.builds = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="index-build", daemon=True)

    def start(self) -> None:
        """Start the thread (it checks at once)."""
        self.poke()
        self._thread.start()

    def poke(self) -> None:
        """Check now (a task changed the index)."""
        with self._cv:
            self._poked = True
            self._cv.notify_all()

    @property
    def building(self) -> bool:
        """Whether a build is running."""
        return self._building

    def join(self, timeout: float) -> bool:
        """Wake the thread (it exits when ``should_stop``; a running build is abandoned, the live
        index kept) and wait; ``True`` if it ended."""
        with self._cv:
            self._cv.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while not self._should_stop():
            with self._cv:
                if not self._poked:
                    self._cv.wait(self._every)
                self._poked = False
            if self._should_stop() or time.monotonic() < self._retry_at:
                continue
            self._building = True
            try:
                reports = self.engine.maintain_index(should_stop=self._should_stop)
            except Exception as exc:  # the live index is intact: log, try again later
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
                log.exception("index build failed; trying again in %.0f s", RETRY_AFTER_S)
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                continue
            finally:
                self._building = False
            if reports:
                self.builds += len(reports)
                self.last_error = None
                if self._on_built is not None:
                    self._on_built(reports)


__all__ = ["CHECK_EVERY_S", "RETRY_AFTER_S", "IndexMaintainer"]
