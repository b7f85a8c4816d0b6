"""Indexing that waits for free space (README "Running under systemd", *A full disk*).

A pass or event batch that the store refused for want of space ends as ``disk_full``
(:class:`~ancre.errors.DiskFullError`, before any byte of the refused write). :class:`DiskWait`
then holds the daemon's content work: it logs one line naming the folder and the space needed,
sets ``ancre_disk_full`` to 1 and ``disk`` in ``daemon-status.json`` / ``ancre status``, keeps
the sources whose work it held back, and — checked every few seconds from the daemon's
keep-alive loop (:meth:`DiskWait.poll`) — once the file system has what the refused write
needed, logs that indexing resumes and queues a full pass of each of those sources. Questions
are answered from the index as it is all along (reads need no space).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ancre.daemon.metrics import DaemonMetrics
from ancre.daemon.queue import ChangeQueue
from ancre.errors import DiskFullError
from ancre.index.disk_space import SpaceGuard, free_bytes, mib

log = logging.getLogger("ancre.daemon")

TRIGGER = "disk_space"
"""The trigger of the passes queued when space is back."""


class DiskWait:
    """The daemon's "waiting for free space" state over ``space`` (the store's guard; ``None``:
    a store that does not check, whose writes fail with their own error instead). Thread-safe:
    the lanes report and ask, the keep-alive loop polls."""

    def __init__(
        self, space: SpaceGuard | None, queue: ChangeQueue, metrics: DaemonMetrics, clock: Callable[[], float] = time.time
    ) -> None:
        self.space, self.queue, self.metrics, self.clock = space, queue, metrics, clock
        self._mu = threading.Lock()
        self._error: DiskFullError | None = None
        self._since = 0.0
        self._sources: set[str] = set()

    def waiting(self) -> bool:
        """Whether indexing waits for space now."""
        with self._mu:
            return self._error is not None

    def hold(self, source: str) -> None:
        """Content work of ``source`` not started because indexing waits: it is resumed with the rest."""
        with self._mu:
            self._sources.add(source)

    def full(self, source: str, error: DiskFullError) -> None:
        """A pass, batch or ACL refresh of ``source`` stopped on ``error``: start (or go on)
        waiting; the first one logs the line."""
        with self._mu:
            first = self._error is None
            if first or error.needed > self._error.needed:  # type: ignore[union-attr]
                self._error = error
            if first:
                self._since = self.clock()
            self._sources.add(source)
        self.metrics.disk_full.set(1)
        self.metrics.free_bytes.set(error.free)
        if first:
            log.warning("%s", error, extra={"disk": self.status()})

    def poll(self) -> bool:
        """Refresh the free-space gauge; when indexing waits and the file system has what the
        refused write needed, stop waiting and queue a full pass of every held-back source.
        Returns whether it resumed."""
        free = self._free()
        if free is not None:
            self.metrics.free_bytes.set(free)
        with self._mu:
            error = self._error
            if error is None or free is None or free < error.needed:
                return False
            sources, self._sources, self._error = sorted(self._sources), set(), None
        self.metrics.disk_full.set(0)
        log.info("free space is back on %s (%s free, %s needed): indexing resumes with a full pass of %s",
                 error.folder, mib(free), mib(error.needed), ", ".join(sources) or "no source",
                 extra={"sources": sources})
        for sid in sources:
            self.queue.request_full(sid, TRIGGER)
        return True

    def _free(self) -> int | None:
        if self.space is None:
            return None
        try:
            return free_bytes(self.space.folder)
        except OSError:
            return None

    def status(self) -> dict[str, Any]:
        """``{"state": "ok"}``, or while waiting ``{"state": "disk_full", "folder", "free_bytes",
        "needed_bytes", "since", "sources", "message"}`` (bytes; ``since`` epoch seconds)."""
        with self._mu:
            e = self._error
            if e is None:
                return {"state": "ok"}
            return {"state": "disk_full", "folder": str(e.folder), "free_bytes": e.free, "needed_bytes": e.needed,
                    "since": self._since, "sources": sorted(self._sources), "message": str(e)}


__all__ = ["TRIGGER", "DiskWait"]
