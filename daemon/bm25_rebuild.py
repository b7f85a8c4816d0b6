"""Coalesced BM25 rebuilds on their own thread (the daemon's BM25 lane, see
:mod:`ancre.daemon.service`) and the ``bm25_dirty`` crash flag they keep in the state DB."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ancre.daemon.sync import SyncEngine
from ancre.daemon.wakeable import Wakeable
from ancre.index.state import StateDB

log = logging.getLogger("ancre.daemon")

BM25_DIRTY_KEY = "bm25_dirty"
"""State DB ``meta`` key: ``"1"`` while the BM25 snapshot may lag the store."""


class Bm25Rebuilder:
    """Coalesced BM25 rebuilds on one thread: at most one rebuild runs; any number of requests
    during it cause exactly one more rebuild after it.

    The worker calls :meth:`begin` before each task and :meth:`end` after it. The ``bm25_dirty``
    flag (state DB ``meta``) is set in :meth:`begin` and cleared only when no task runs, no
    rebuild is pending and the last publish started after the last change: a crash anywhere in
    between leaves it set, and the next start rebuilds. ``on_published(generation, seconds,
    first_event_times)`` is called after each publish (times are monotonic seconds).
    """

    def __init__(
        self,
        engine: SyncEngine,
        state: StateDB,
        *,
        should_stop: Callable[[], bool],
        on_published: Callable[[int, float, list[float]], None],
    ) -> None:
        self.engine = engine
        self.state = state
        self._should_stop = should_stop
        self._on_published = on_published
        self._lane = Wakeable("bm25", self._loop)
        self._requested = False
        self._running = False
        self._active = False
        self._seq = 0
        self._done_seq = 0
        self._times: list[float] = []
        self.dirty = state.get_meta(BM25_DIRTY_KEY) == "1"

    def start(self, *, rebuild_now: bool = False) -> None:
        """Start the thread; ``rebuild_now`` (or a ``bm25_dirty`` flag left by a crash) queues a
        rebuild at once."""
        with self._lane.cv:
            if rebuild_now or self.dirty:
                self._requested = True
                self._seq += 1
        self._lane.start()

    def begin(self) -> None:
        """A task is about to touch the store: set the dirty flag (durably) first."""
        with self._lane.cv:
            self._active = True
            if not self.dirty:
                self.state.set_meta(BM25_DIRTY_KEY, "1")
                self.dirty = True

    def end(self, changed: bool, first_event_times: list[float]) -> None:
        """The task is done; ``changed``: it modified the index (a rebuild is requested)."""
        with self._lane.cv:
            self._active = False
            if changed:
                self._seq += 1
                self._requested = True
                self._times.extend(first_event_times)
                self._lane.cv.notify_all()
            else:
                self._maybe_clean()

    def idle(self) -> bool:
        """No rebuild running or pending."""
        with self._lane.cv:
            return not (self._requested or self._running)

    def join(self, timeout: float) -> bool:
        """Wake the thread (it exits when ``should_stop``) and wait; ``True`` if it ended."""
        return self._lane.join(timeout)

    def _maybe_clean(self) -> None:
        if self.dirty and not (self._active or self._requested or self._running) and self._seq == self._done_seq:
            self.state.set_meta(BM25_DIRTY_KEY, "0")
            self.dirty = False

    def _loop(self) -> None:
        while not self._should_stop():
            with self._lane.cv:
                if not self._requested:
                    self._lane.cv.wait(0.5)
                    continue
                self._requested = False
                self._running = True
                snap, times, self._times = self._seq, self._times, []
            gen: int | None = None
            t0 = time.monotonic()
            try:
                gen = self.engine.rebuild_bm25(should_stop=self._should_stop)
            except Exception:
                log.exception("BM25 rebuild failed; retrying in 5 s")
                for _ in range(50):
                    if self._should_stop():
                        break
                    time.sleep(0.1)
            finally:
                with self._lane.cv:
                    self._running = False
                    if gen is None:  # failed or stopped: ask again, keep the event times
                        self._requested = not self._should_stop()
                        self._times = times + self._times
                    else:
                        self._done_seq = max(self._done_seq, snap)
                        self._maybe_clean()
            if gen is not None:
                self._on_published(gen, time.monotonic() - t0, times)


__all__ = ["BM25_DIRTY_KEY", "Bm25Rebuilder"]
