"""The long-running daemon (``ancre daemon``; docs/ARCHITECTURE.md "Data flow of indexing").

One :class:`Daemon` receives its parts from the composition root (:class:`DaemonParts`: the
sync engine over the store and embedder, the state DB, the BM25 snapshots, the connectors, the
audit purge; :mod:`ancre.app.daemon` builds them) and runs:

- **event sources** (:mod:`ancre.daemon.watch`, wired by :mod:`ancre.daemon.wiring`), by capability: a
  connector's own ``watch()`` (SMB CHANGE_NOTIFY), else its change feed (Graph delta) run every
  ``poll_interval_s`` from a cursor the daemon keeps (:class:`~ancre.index.cursors.CursorStore`), else
  watchdog on a folder source, else the snapshot-diff poller (:mod:`ancre.connectors.poller`); all feed one
  :class:`~ancre.daemon.queue.ChangeQueue` (bounded, de-duplicating, debounced);
- **one worker thread** (:mod:`ancre.daemon.lanes`) that applies every content change: full passes
  (:meth:`SyncEngine.run_pass`) and event batches (:meth:`SyncEngine.sync_paths`);
- **one rights thread** that applies rights changes (an ACL manifest edit, an SMB
  security-change notification, the periodic ACL sweep) at once, while the worker may be
  embedding a long backlog (:meth:`SyncEngine.refresh_acls`: ACL payloads only, no embedding;
  the engine's ACL lock keeps the two consistent) — a revocation never waits behind content work;
- **one BM25 thread** (:class:`~ancre.daemon.bm25_rebuild.Bm25Rebuilder`): a rebuild after any change, coalesced
  (an empty snapshot when BM25 lives in the store, ``[store] bm25 = "qdrant"``: every write is seen there at once);
- **one index-build thread** (:class:`~ancre.daemon.maintenance.IndexMaintainer`): the store's HNSW
  builds, in a separate process, whenever enough points are searched exactly — during long passes too;
- **apscheduler jobs** (:mod:`ancre.daemon.schedule`) that only *request* work from the queue, so a job whose work overruns its
  interval is merged into the pending request (and apscheduler itself runs each job with
  ``coalesce=True, max_instances=1``): per source a full reconciliation (events get lost) and an
  ACL sweep — a rights-lane refresh of every indexed document's ACL (a permission change often
  produces no content event); plus audit-log retention;
- **signals** (from :meth:`Daemon.run_forever`): SIGHUP → a forced full pass of every source
  (content hashes and ACLs re-read; only what changed is embedded); SIGTERM/SIGINT → stop the
  watchers and the scheduler, let the worker finish its current item, flush, exit 0;
- **observability** (:mod:`ancre.daemon.progress`): JSON logs (:mod:`ancre.daemon.logs`), Prometheus metrics
  (:mod:`ancre.daemon.metrics`), ``<data_dir>/daemon-status.json``, systemd ``READY=1`` /
  ``STATUS=`` / ``WATCHDOG=1`` (:mod:`ancre.daemon.notify`), and the local control socket that
  the composition root serves next to it (:mod:`ancre.api.control`). While a pass or batch runs, all of them show its
  progress live — items done / to do, the current path, the queue depth — refreshed at most
  every :data:`PROGRESS_EVERY_S` seconds, not only when it ends.

:class:`Daemon` is usable from another program (``ancre serve`` runs it next to the API on the
same parts): ``start()`` returns once everything runs, ``stop()`` shuts it down, and
``run_forever()`` adds signal handling for the CLI.

Crash safety is the sync engine's (pending rows, idempotent upserts) plus a ``bm25_dirty`` flag in
the state DB: set before the worker touches the store, cleared once a BM25 generation built after
the last change is published; a start that finds it set rebuilds BM25.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from ancre.config import Settings
from ancre.connectors.base import ChangeEvent, Connector
from ancre.daemon.bm25_rebuild import BM25_DIRTY_KEY, Bm25Rebuilder
from ancre.daemon.disk import DiskWait
from ancre.daemon.lanes import RETRY_AFTER_S, Lanes
from ancre.daemon.maintenance import IndexMaintainer
from ancre.daemon.metrics import DaemonMetrics
from ancre.daemon.notify import SdNotifier, watchdog_interval
from ancre.daemon.progress import PROGRESS_EVERY_S, STATUS_FILE, ProgressBook, StatusFile
from ancre.daemon.queue import ChangeQueue
from ancre.daemon.schedule import PurgeAudit, retry_later, start_scheduler
from ancre.daemon.sync import PassReport, SyncEngine
from ancre.daemon.wiring import Watcher, feed, start_watchers
from ancre.index.bm25 import Bm25Manager
from ancre.index.cursors import CursorStore
from ancre.index.disk_space import SpaceGuarded
from ancre.index.state import StateDB
from ancre.models import PassScope

log = logging.getLogger("ancre.daemon")


@dataclass(frozen=True)
class DaemonParts:
    """What the daemon works with, built by the composition root (:mod:`ancre.app.daemon`):
    ``engine`` (its store opened: the embedded store's lock is held), ``state``, ``bm25``,
    ``connectors`` (one per configured source), ``cursors``, where the change feeds' cursors are
    kept (both closed by whoever built them), and ``purge_audit`` (deletes audit files past
    retention; ``None``: no audit purge job)."""

    engine: SyncEngine
    state: StateDB
    bm25: Bm25Manager
    connectors: Sequence[Connector]
    cursors: CursorStore
    purge_audit: PurgeAudit | None = None


@dataclass(frozen=True)
class SyncTicket:
    """A pass requested from the daemon (:meth:`Daemon.request_sync`): ``sources`` queued at
    ``requested_at`` (``time.time()`` seconds); ``running``: the pass or batch running at that
    moment (its progress dict), so that the requested one was queued behind it; ``None`` if none."""

    sources: tuple[str, ...]
    requested_at: float
    running: dict[str, Any] | None


class Daemon:
    """The sync daemon over ``settings`` and ``parts`` (see the module doc). ``notifier``:
    systemd notifications (default from ``$NOTIFY_SOCKET``). The parts stay open after
    :meth:`stop`: their builder closes them. :meth:`start` raises ``OSError`` when the metrics
    port can't be bound."""

    def __init__(self, settings: Settings, parts: DaemonParts, *, notifier: SdNotifier | None = None) -> None:
        self.settings = settings
        self.cfg = settings.daemon
        self.parts = parts
        self.notifier = notifier if notifier is not None else SdNotifier()
        self.queue = ChangeQueue(
            debounce_s=self.cfg.debounce_s, max_delay_s=self.cfg.max_delay_s,
            queue_max=self.cfg.queue_max, batch_max=self.cfg.batch_max,
        )
        self.metrics = DaemonMetrics()
        self.book = ProgressBook(self.metrics)
        self.status_path = Path(settings.data_dir) / STATUS_FILE
        self._status_file = StatusFile(self.status_path)
        self.state = "created"
        self.started_at = 0.0
        self.metrics_port: int | None = None
        self.control_socket: str | None = None
        """Path of the control socket served next to the daemon (set by whoever serves it)."""
        self._stop = threading.Event()
        self._connectors: dict[str, Connector] = {c.source_id: c for c in parts.connectors}
        self._watchers: list[Watcher] = []
        self._scheduler: BackgroundScheduler | None = None
        self._threads: dict[str, threading.Thread] = {}
        self._bm25: Bm25Rebuilder | None = None
        self._builder: IndexMaintainer | None = None
        store = parts.engine.store
        self.disk = DiskWait(store.space if isinstance(store, SpaceGuarded) else None, self.queue, self.metrics)
        """Whether indexing waits for free space (:mod:`ancre.daemon.disk`)."""
        self._term = False
        self._hup = False

    # ================================================================================ lifecycle
    def start(self) -> None:
        """Start the worker, rights and BM25 threads, watchers, scheduler, metrics server and
        keep-alives, queue the initial full pass of every source, send ``READY=1``. Returns
        at once (the initial sync runs on the worker)."""
        if self.state != "created":
            raise RuntimeError("a Daemon can be started once")
        self.state = "starting"
        self.started_at = time.time()
        try:
            self._start()
        except BaseException:
            self._shutdown(self.cfg.stop_timeout_s)
            self.state = "stopped"
            raise
        self.notifier.ready(self._status_line())
        log.info(
            "daemon started",
            extra={"sources": list(self._connectors), "metrics_port": self.metrics_port, "control_socket": self.control_socket},
        )

    def _start(self) -> None:
        p = self.parts
        gen = p.bm25.current_generation()
        self.book = ProgressBook(self.metrics, gen)
        self.book.watch_modes(list(self._connectors))
        self._bm25 = Bm25Rebuilder(p.engine, p.state, should_stop=self._stop.is_set, on_published=self._published)
        if self.cfg.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.cfg.metrics_host, self.cfg.metrics_port)
        self._watchers = start_watchers(
            self.settings.sources, self._connectors, self._on_event, self.settings.ignore, p.cursors
        )
        self._bm25.start(rebuild_now=gen == 0)
        self._builder = IndexMaintainer(p.engine, should_stop=self._stop.is_set)
        self._builder.start()
        if self.cfg.initial_sync:
            for sid in self._connectors:
                self.queue.request_full(sid, "startup")
        lanes = Lanes(
            p.engine, self.queue, self._connectors, self.book, self._bm25,
            stop=self._stop, retry_later=self._retry_later, refresh=self._refresh, disk=self.disk,
        )
        self._spawn("sync-worker", lanes.content_loop)
        self._spawn("rights-worker", lanes.rights_loop)
        self._scheduler = start_scheduler(self.cfg, self._connectors, self.queue, p.purge_audit)
        self.state = "running"
        self._write_status()
        self._spawn("keepalive", self._keepalive_loop)

    def _spawn(self, name: str, target: Any) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        self._threads[name] = t
        t.start()

    def _shutdown(self, budget_s: float) -> bool:
        """Stop everything started; ``True`` when the worker, rights and BM25 threads ended
        within ``budget_s`` seconds."""
        deadline = time.monotonic() + budget_s
        for w in self._watchers:
            w.stop(timeout=1.0)
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
        self._stop.set()
        self.queue.close()
        clean = True
        for name in ("sync-worker", "rights-worker"):
            t = self._threads.get(name)
            if t is not None:
                t.join(max(0.0, deadline - time.monotonic()))
                clean = not t.is_alive() and clean
        if self._bm25 is not None:
            clean = self._bm25.join(max(0.0, deadline - time.monotonic())) and clean
        if self._builder is not None:
            clean = self._builder.join(max(0.0, deadline - time.monotonic())) and clean
        self.metrics.close()
        keepalive = self._threads.get("keepalive")
        if keepalive is not None:
            keepalive.join(2.0)
        return clean

    def stop(self, timeout: float | None = None) -> bool:
        """Stop watchers and scheduler, let the worker finish its current item, stop the BM25
        thread and the metrics server. ``timeout`` (default ``daemon.stop_timeout_s``) bounds
        the wait for the worker and the BM25 thread; returns ``False`` when they did not end in
        time (the parts must then be left open: the caller should exit the process; state and
        store are crash-safe, the next start redoes the item)."""
        if self.state in ("stopped", "created"):
            return True
        self.state = "stopping"
        self.notifier.stopping("stopping: finishing the current item")
        log.info("daemon stopping")
        clean = self._shutdown(self.cfg.stop_timeout_s if timeout is None else timeout)
        self.state = "stopped"
        self._write_status()
        if clean:
            log.info("daemon stopped")
        else:
            log.warning("daemon stop: the current item did not finish in time; leaving it to the next start")
        return clean

    def run_forever(self) -> int:
        """:meth:`start`, then wait for SIGTERM/SIGINT (stop) or SIGHUP (full resync) — signal
        handlers are installed when called from the main thread — then :meth:`stop`. Returns the
        exit status (0); when the worker did not finish in time the process is ended at once
        with status 0 (``os._exit``), the state being crash-safe."""
        import signal

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_term)
            signal.signal(signal.SIGINT, self._on_term)
            signal.signal(signal.SIGHUP, self._on_hup)
        self.start()
        try:
            while not self._term:
                time.sleep(0.1)
                if self._hup:
                    self._hup = False
                    self.request_resync()
        finally:
            clean = self.stop()
        if not clean:
            logging.shutdown()
            sys.stdout.flush()
            os._exit(0)
        return 0

    def _on_term(self, signum: int, frame: object) -> None:
        self._term = True

    def _on_hup(self, signum: int, frame: object) -> None:
        self._hup = True

    def request_stop(self) -> None:
        """Make :meth:`run_forever` return (as SIGTERM does)."""
        self._term = True

    # ================================================================================ requests
    def request_resync(self, trigger: str = "sighup", *, force: bool = True) -> None:
        """Queue a full pass of every source now (SIGHUP: ``force``: content hashes and ACLs
        re-read, only what changed embedded)."""
        log.info("full resync requested", extra={"trigger": trigger})
        for sid in self._connectors:
            self.queue.request_full(sid, trigger, force=force)

    def request_sync(self, source: str | None = None, *, force: bool = False, trigger: str = "control") -> SyncTicket:
        """Queue a full pass of ``source`` (``None``: every source), merged with a pending one;
        a pass already running goes on and the requested one runs after it. Raises
        :class:`~ancre.errors.ConfigError` for an unknown source."""
        sources = (self.settings.source(source).id,) if source else tuple(self._connectors)
        running = self.book.current()
        at = time.time()
        log.info("full pass requested", extra={"trigger": trigger, "sources": list(sources), "force": force})
        for sid in sources:
            self.queue.request_full(sid, trigger, force=force)
        return SyncTicket(sources, at, running)

    def full_reports(self, since: float) -> dict[str, PassReport]:
        """The last full-pass report of each source whose pass started at or after ``since``
        (``time.time()`` seconds): the outcome of a :class:`SyncTicket` once every source of it
        is in."""
        return self.book.full_reports(since)

    def busy(self) -> str | None:
        """Why the index is busy (a pass or batch running or queued), or ``None`` when idle."""
        cur = self.book.current()
        if cur is not None:
            what = "pass" if cur["scope"] == PassScope.FULL else "batch"
            count = f"{cur['done']}/{cur['total']}" if cur["total"] is not None else "listing"
            return f"a {cur['trigger']} {what} of {cur['source']} is running ({count})"
        if self.queue.pending():
            return f"{self.queue.pending()} sync task(s) are queued"
        return None

    # ================================================================================ events
    def _on_event(self, ev: ChangeEvent) -> None:
        if ev.source not in self._connectors or self._stop.is_set():
            return
        feed(self.queue, ev)
        self.metrics.queue_depth.set(self.queue.depth())

    def _retry_later(self, source: str) -> None:
        if self._scheduler is None or self._stop.is_set():
            return
        retry_later(self._scheduler, self.queue, source, RETRY_AFTER_S)

    def _published(self, generation: int, seconds: float, first_event_times: list[float]) -> None:
        self.book.published(generation, seconds, first_event_times)
        if self._builder is not None:
            self._builder.poke()
        self._write_status()

    # ================================================================================ status
    def status(self) -> dict[str, Any]:
        """The daemon status (JSON-able): ``state``, ``pid``, ``queue_depth``, ``idle`` (queue
        empty, worker and BM25 idle), ``current`` (the running pass or batch: ``source``,
        ``trigger``, ``scope``, ``started_at``, ``done``, ``total``, ``to_do``, next ``path``; ``None``
        when none runs), ``bm25_generation``, ``passes`` by trigger,
        ``embedded_chunks_total``, per-source last pass/batch (``last``), last full pass
        (``last_full``), last ACL refresh (``last_acl``) and watch mode, document and chunk
        counts, recent event-to-searchable ``delays_s``, the metrics port and control socket,
        ``index_build`` (``running``, ``builds`` done, ``last_error``: the store's index builds),
        ``disk`` (``state`` ``ok`` or ``disk_full`` while indexing waits for free space, with the
        folder, free and needed bytes: :meth:`DiskWait.status <ancre.daemon.disk.DiskWait.status>`)."""
        counts = self.book.doc_counts(self.parts.state) if self.state in ("running", "stopping", "stopped") else {}
        pending = self.queue.pending()
        bm25_idle = self._bm25.idle() if self._bm25 is not None else True
        snap = self.book.snapshot({w.source_id: w.effective_mode for w in self._watchers})
        return {
            "pid": os.getpid(),
            "state": self.state,
            "started_at": self.started_at,
            "updated_at": time.time(),
            "queue_depth": self.queue.depth(),
            "idle": pending == 0 and bm25_idle,
            **snap,
            "bm25_dirty": bool(self._bm25 and self._bm25.dirty),
            "index_build": {
                "running": bool(self._builder and self._builder.building),
                "builds": self._builder.builds if self._builder else 0,
                "last_error": self._builder.last_error if self._builder else None,
            },
            "metrics_port": self.metrics_port,
            "control_socket": self.control_socket,
            "disk": self.disk.status(),
            **counts,
        }

    def _write_status(self) -> None:
        try:
            self._status_file.write(self.status())
        except Exception:  # status is best effort, never a reason to stop syncing
            log.exception("could not write %s", self.status_path)

    def _refresh(self, notify: bool) -> None:
        self.metrics.queue_depth.set(self.queue.depth())
        if notify:
            self.notifier.status(self._status_line())
        self._write_status()

    def _status_line(self) -> str:
        line = self.book.status_line(self.state, self.queue.depth())
        disk = self.disk.status()
        if disk["state"] != "ok":
            return f"disk full: {disk['folder']} needs {disk['needed_bytes'] / 2**20:.0f} MiB free, indexing waits; {line}"
        return line

    def _keepalive_loop(self) -> None:
        wd = self.cfg.watchdog_interval_s or watchdog_interval()
        tick = min(wd, self.cfg.status_interval_s) if wd else self.cfg.status_interval_s
        next_status = 0.0
        while not self._stop.wait(tick):
            worker = self._threads.get("sync-worker")
            if wd and worker is not None and worker.is_alive():
                self.notifier.watchdog()
            if self.disk.poll():
                self._write_status()
            if time.monotonic() >= next_status:
                self.notifier.status(self._status_line())
                self._write_status()
                next_status = time.monotonic() + self.cfg.status_interval_s


__all__ = [
    "BM25_DIRTY_KEY",
    "PROGRESS_EVERY_S",
    "STATUS_FILE",
    "Bm25Rebuilder",
    "Daemon",
    "DaemonParts",
    "SyncTicket",
]
