"""The daemon's two work lanes (see :mod:`ancre.daemon.service`): the **content lane** (one
thread: full passes and event batches through the sync engine, BM25 rebuild requested after any
change) and the **rights lane** (one thread: ACL refreshes only, so that a revocation never waits
behind a content backlog; the engine's ACL lock keeps the two consistent)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ancre.connectors.base import Connector
from ancre.daemon.bm25_rebuild import Bm25Rebuilder
from ancre.daemon.disk import DiskWait
from ancre.daemon.progress import ProgressBook
from ancre.daemon.queue import AclRefresh, ChangeQueue, FullPass, Task
from ancre.daemon.sync import SyncEngine
from ancre.errors import AncreError, DiskFullError
from ancre.models import PassOutcome, PassScope

log = logging.getLogger("ancre.daemon")

RETRY_AFTER_S = 30.0
"""A task that raised (embedding server down, store error) is retried as a full pass this much later."""


class Lanes:
    """The loops of both lanes over one queue. ``retry_later(source)`` schedules a full pass of
    ``source`` in :data:`RETRY_AFTER_S` seconds; ``refresh(notify)`` refreshes the outward status
    (status file, queue gauge, and systemd ``STATUS=`` when ``notify``); ``disk``: the wait for
    free space — while it waits, content tasks are held back (resumed by a full pass), and a task
    stopped for want of space starts it (:mod:`ancre.daemon.disk`)."""

    def __init__(
        self,
        engine: SyncEngine,
        queue: ChangeQueue,
        connectors: Mapping[str, Connector],
        book: ProgressBook,
        bm25: Bm25Rebuilder,
        *,
        stop: threading.Event,
        retry_later: Callable[[str], None],
        refresh: Callable[[bool], None],
        disk: DiskWait,
    ) -> None:
        self.engine, self.queue, self.connectors, self.book, self.bm25 = engine, queue, connectors, book, bm25
        self.disk = disk
        self._stop = stop
        self._retry_later = retry_later
        self._refresh = refresh

    def content_loop(self) -> None:
        """The content lane: take tasks until stopped; a failing task is retried as a full pass."""
        self._serve(self.queue.take, self._content, self.queue.done, "sync task")

    def _content(self, task: Task) -> None:
        """One content task, unless the daemon waits for disk space: then it is held (nothing is
        extracted or embedded that could not be written)."""
        if self.disk.waiting():
            self.disk.hold(task.source)
        else:
            self.run_task(task)

    def rights_loop(self) -> None:
        """The rights lane: ACL refreshes only, alongside the content lane."""
        self._serve(self.queue.take_acl, self.run_acl, self.queue.done_acl, "ACL refresh")

    def _serve(self, take: Callable[[float], Any], run: Callable[[Any], None], done: Callable[[], None], what: str) -> None:
        """One lane's loop until stopped: ``take`` a task (``None`` after 0.5 s: look again),
        ``run`` it, mark it ``done`` and refresh the status; a task that raises is logged and its
        source gets a full pass :data:`RETRY_AFTER_S` seconds later (the lane never dies)."""
        while not self._stop.is_set():
            task = take(0.5)
            if task is None:
                continue
            try:
                run(task)
            except DiskFullError as e:
                self.disk.full(task.source, e)
            except AncreError as e:  # a server down, a key to fix: one line naming it, no traceback
                log.error("%s of %s failed: %s; full pass in %gs", what, task.source, e, RETRY_AFTER_S)
                self._retry_later(task.source)
            except Exception:
                log.exception("%s failed; full pass of %s in %gs", what, task.source, RETRY_AFTER_S)
                self._retry_later(task.source)
            finally:
                done()
                self._refresh(False)

    def run_acl(self, task: AclRefresh) -> None:
        """One rights task: the ACLs of the task's source (of its paths, or all) re-read and
        written, recorded; a suspect refresh (source unreachable) is retried as a full pass."""
        conn = self.connectors.get(task.source)
        if conn is None:
            return
        t0 = time.time()
        rep = self.engine.refresh_acls(conn, task.paths, should_stop=self._stop.is_set)
        self.book.record(rep, task.trigger, t0)
        if rep.outcome == PassOutcome.SUSPECT:
            self._retry_later(task.source)

    def run_task(self, task: Task) -> None:
        """One content task: a full pass or a batch of paths, with live progress, the BM25
        dirty flag around it and a rebuild requested when the index changed."""
        conn = self.connectors.get(task.source)
        if conn is None:
            return
        times: list[float] = []
        changed = False
        full = isinstance(task, FullPass)
        trigger = task.trigger if isinstance(task, FullPass) else "event"
        t0 = time.time()
        self.book.begin(task.source, trigger, PassScope.FULL if full else PassScope.PATHS)
        self._refresh(True)
        self.bm25.begin()
        try:
            if isinstance(task, FullPass):
                rep = self.engine.run_pass(
                    conn, rebuild_bm25=False, force=task.force, should_stop=self._stop.is_set, progress=self._progress
                )
            else:
                times = list(task.first_event)
                rep = self.engine.sync_paths(
                    conn, task.paths, rebuild_bm25=False, should_stop=self._stop.is_set, progress=self._progress
                )
            changed = rep.changed_index
        finally:
            self.book.end(task.source)
            self.bm25.end(changed, times if changed else [])
        if times and not changed:  # nothing to rebuild: searchable as it is now
            self.book.observe_delays(times)
        self.book.record(rep, trigger, t0)
        if rep.outcome == PassOutcome.DISK_FULL and self.engine.disk_full is not None:
            self.disk.full(task.source, self.engine.disk_full)

    def _progress(self, path: str, done: int, total: int) -> None:
        if self.book.progress(path, done, total):
            self._refresh(True)


__all__ = ["RETRY_AFTER_S", "Lanes"]
