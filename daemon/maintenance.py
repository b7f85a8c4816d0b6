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
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from ancre.daemon.sync import SyncEngine
from ancre.daemon.wakeable import Wakeable

log = logging.getLogger("ancre.daemon")

CHECK_EVERY_S = 30.0
"""Seconds between two checks when nothing pokes the thread."""
RETRY_AFTER_S = 300.0
"""Seconds before a failed build is tried again."""


@dataclass(eq=False)
class IndexMaintainer:
    """The index-build thread (see the module doc) over ``engine``'s store: it ends once
    ``should_stop`` is true; ``on_built(reports)`` is called after the builds of one round (a list
    of :class:`~ancre.index.edge_build.BuildReport`); ``check_every_s``: seconds between two
    checks when nothing pokes it."""

    engine: SyncEngine
    _: KW_ONLY
    should_stop: Callable[[], bool]
    on_built: Callable[[list[object]], None] | None = None
    check_every_s: float = CHECK_EVERY_S
    builds: int = field(default=0, init=False)
    """Builds done so far."""
    last_error: str | None = field(default=None, init=False)
    """Why the last build failed (``None`` once one succeeded)."""
    building: bool = field(default=False, init=False)
    """Whether a build is running."""

    def __post_init__(self) -> None:
        self._lane = Wakeable("index-build", self._loop)
        self._poked = False
        self._retry_at = 0.0

    def start(self) -> None:
        """Start the thread (it checks at once)."""
        self.poke()
        self._lane.start()

    def poke(self) -> None:
        """Check now (a task changed the index)."""
        with self._lane.cv:
            self._poked = True
            self._lane.cv.notify_all()

    def join(self, timeout: float) -> bool:
        """Wake the thread (it exits when ``should_stop``; a running build is abandoned, the live
        index kept) and wait; ``True`` if it ended."""
        return self._lane.join(timeout)

    def _loop(self) -> None:
        while not self.should_stop():
            with self._lane.cv:
                if not self._poked:
                    self._lane.cv.wait(self.check_every_s)
                self._poked = False
            if self.should_stop() or time.monotonic() < self._retry_at:
                continue
            self.building = True
            try:
                reports = self.engine.maintain_index(should_stop=self.should_stop)
            except Exception as exc:  # the live index is intact: log, try again later
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
                log.exception("index build failed; trying again in %.0f s", RETRY_AFTER_S)
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                continue
            finally:
                self.building = False
            if reports:
                self.builds += len(reports)
                self.last_error = None
                if self.on_built is not None:
                    self.on_built(reports)


__all__ = ["CHECK_EVERY_S", "RETRY_AFTER_S", "IndexMaintainer"]
