"""The long-running daemon (``ancre daemon``; DESIGN.md "Sync" and "Events").

One :class:`Daemon` owns a :class:`~ancre.app.runtime.Runtime` (store, embedder, state DB,
BM25 snapshots, connectors) and runs:

- **event sources** (:mod:`ancre.daemon.watch`): watchdog on folder sources, a connector's own
  ``watch()`` (SMB CHANGE_NOTIFY) when it has one; all feed one :class:`~ancre.daemon.queue.ChangeQueue`
  (bounded, de-duplicating, debounced);
- **one worker thread** that applies every content change: full passes
  (:meth:`SyncEngine.run_pass`) and event batches (:meth:`SyncEngine.sync_paths`);
- **one rights thread** that applies rights changes (an ACL manifest edit, an SMB
  security-change notification, the periodic ACL sweep) at once, while the worker may be
  embedding a long backlog (:meth:`SyncEngine.refresh_acls`: ACL payloads only, no embedding;
  the engine's ACL lock keeps the two consistent) — a revocation never waits behind content work;
- **one BM25 thread** (:class:`Bm25Rebuilder`): a rebuild after any change, coalesced;
- **apscheduler jobs** that only *request* work from the queue, so a job whose work overruns its
  interval is merged into the pending request (and apscheduler itself runs each job with
  ``coalesce=True, max_instances=1``): per source a full reconciliation (events get lost) and an
  ACL sweep — a rights-lane refresh of every indexed document's ACL (a permission change often
  produces no content event); plus audit-log retention;
- **signals** (from :meth:`Daemon.run_forever`): SIGHUP → a forced full pass of every source
  (content hashes and ACLs re-read; only what changed is embedded); SIGTERM/SIGINT → stop the
  watchers and the scheduler, let the worker finish its current item, flush, exit 0;
- **observability**: JSON logs (:mod:`ancre.daemon.logs`), Prometheus metrics
  (:mod:`ancre.daemon.metrics`), ``<data_dir>/daemon-status.json``, systemd ``READY=1`` /
  ``STATUS=`` / ``WATCHDOG=1`` (:mod:`ancre.daemon.notify`), the optional loopback control
  endpoint (:mod:`ancre.daemon.control`). While a pass or batch runs, all of them show its
  progress live — items done / to do, the current path, the queue depth — refreshed at most
  every :data:`PROGRESS_EVERY_S` seconds, not only when it ends.

:class:`Daemon` is usable from another program (``ancre serve`` runs it next to the API on the
same Runtime): ``start()`` returns once everything runs, ``stop()`` shuts it down, and
``run_forever()`` adds signal handling for the CLI.

Crash safety is the sync engine's (pending rows, idempotent upserts) plus a ``bm25_dirty`` flag in
the state DB: set before the worker touches the store, cleared once a BM25 generation built after
the last change is published; a start that finds it set rebuilds BM25.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from ancre.config import Settings
from ancre.connectors.base import ChangeEvent, Connector, LocalTree, WatchableConnector
from ancre.daemon.control import ControlServer
from ancre.daemon.metrics import DaemonMetrics
from ancre.daemon.notify import SdNotifier, watchdog_interval
from ancre.daemon.queue import ChangeQueue, FullPass, Task
from ancre.app.runtime import Runtime
from ancre.index.state import StateDB
from ancre.daemon.sync import PassReport, SyncEngine, clean_rel_path
from ancre.daemon.watch import ConnectorWatcher, FolderWatcher

log = logging.getLogger("ancre.daemon")

STATUS_FILE = "daemon-status.json"
BM25_DIRTY_KEY = "bm25_dirty"
PROGRESS_EVERY_S = 1.0
"""During a pass, the status file and ``STATUS=`` are refreshed at most this often."""
RETRY_AFTER_S = 30.0
"""A task that raised (embedding server down, store error) is retried as a full pass this much later."""


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
        self._cv = threading.Condition()
        self._requested = False
        self._running = False
        self._active = False
        self._seq = 0
        self._done_seq = 0
        self._times: list[float] = []
        self.dirty = state.get_meta(BM25_DIRTY_KEY) == "1"
        self._thread = threading.Thread(target=self._loop, name="bm25", daemon=True)

    def start(self, *, rebuild_now: bool = False) -> None:
        """Start the thread; ``rebuild_now`` (or a ``bm25_dirty`` flag left by a crash) queues a
        rebuild at once."""
        with self._cv:
            if rebuild_now or self.dirty:
                self._requested = True
                self._seq += 1
        self._thread.start()

    def begin(self) -> None:
        """A task is about to touch the store: set the dirty flag (durably) first."""
        with self._cv:
            self._active = True
            if not self.dirty:
                self.state.set_meta(BM25_DIRTY_KEY, "1")
                self.dirty = True

    def end(self, changed: bool, first_event_times: list[float]) -> None:
        """The task is done; ``changed``: it modified the index (a rebuild is requested)."""
        with self._cv:
            self._active = False
            if changed:
                self._seq += 1
                self._requested = True
                self._times.extend(first_event_times)
                self._cv.notify_all()
            else:
                self._maybe_clean()

    def idle(self) -> bool:
        """No rebuild running or pending."""
        with self._cv:
            return not (self._requested or self._running)

    def join(self, timeout: float) -> bool:
        """Wake the thread (it exits when ``should_stop``) and wait; ``True`` if it ended."""
        with self._cv:
            self._cv.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _maybe_clean(self) -> None:
        if self.dirty and not (self._active or self._requested or self._running) and self._seq == self._done_seq:
            self.state.set_meta(BM25_DIRTY_KEY, "0")
            self.dirty = False

    def _loop(self) -> None:
        while not self._should_stop():
            with self._cv:
                if not self._requested:
                    self._cv.wait(0.5)
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
                with self._cv:
                    self._running = False
                    if gen is None:  # failed or stopped: ask again, keep the event times
                        self._requested = not self._should_stop()
                        self._times = times + self._times
                    else:
                        self._done_seq = max(self._done_seq, snap)
                        self._maybe_clean()
            if gen is not None:
                self._on_published(gen, time.monotonic() - t0, times)


class Daemon:
    """The sync daemon over ``settings`` (see the module doc).

    ``runtime``: share an existing :class:`Runtime` (``ancre serve``; the daemon then does not
    close it), else one is built and owned. ``notifier``: systemd notifications (default from
    ``$NOTIFY_SOCKET``). :meth:`start` raises :class:`~ancre.errors.StoreLockedError` when another
    process owns the embedded store, ``OSError`` when a configured port can't be bound.
    """

    def __init__(self, settings: Settings, *, runtime: Runtime | None = None, notifier: SdNotifier | None = None) -> None:
        self.settings = settings
        self.cfg = settings.daemon
        self.rt = runtime if runtime is not None else Runtime(settings)
        self._own_runtime = runtime is None
        self.notifier = notifier if notifier is not None else SdNotifier()
        self.queue = ChangeQueue(
            debounce_s=self.cfg.debounce_s, max_delay_s=self.cfg.max_delay_s,
            queue_max=self.cfg.queue_max, batch_max=self.cfg.batch_max,
        )
        self.metrics = DaemonMetrics()
        self.status_path = Path(settings.data_dir) / STATUS_FILE
        self.state = "created"
        self.started_at = 0.0
        self.metrics_port: int | None = None
        self.control_port: int | None = None
        self._stop = threading.Event()
        self._connectors: dict[str, Connector] = {}
        self._watchers: list[FolderWatcher | ConnectorWatcher] = []
        self._scheduler: BackgroundScheduler | None = None
        self._control: ControlServer | None = None
        self._worker: threading.Thread | None = None
        self._rights: threading.Thread | None = None
        self._keepalive: threading.Thread | None = None
        self._bm25: Bm25Rebuilder | None = None
        self._mu = threading.Lock()
        self._status_mu = threading.Lock()
        self._passes: Counter[str] = Counter()
        self._embedded_total = 0
        self._sources: dict[str, dict[str, Any]] = {}
        self._delays: deque[float] = deque(maxlen=1000)
        self._counts: dict[str, Any] | None = None
        self._bm25_generation = 0
        self._current: dict[str, Any] | None = None
        self._progress_pushed = 0.0
        self._term = False
        self._hup = False

    # ================================================================================ lifecycle
    def start(self) -> None:
        """Open the store, start the worker, BM25 thread, watchers, scheduler, servers and
        keep-alives, queue the initial full pass of every source, send ``READY=1``. Returns
        at once (the initial sync runs on the worker)."""
        if self.state != "created":
            raise RuntimeError("a Daemon can be started once")
        self.state = "starting"
        self.started_at = time.time()
        try:
            self._start()
        except BaseException:
            self._abort_start()
            raise
        self.notifier.ready(self._status_line())
        log.info(
            "daemon started",
            extra={"sources": list(self._connectors), "metrics_port": self.metrics_port, "control_port": self.control_port},
        )

    def _abort_start(self) -> None:
        self._stop.set()
        self.queue.close()
        for w in self._watchers:
            w.stop(timeout=1.0)
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
        if self._control is not None:
            self._control.close()
        self.metrics.close()
        for t in (self._worker, self._rights):
            if t is not None:
                t.join(self.cfg.stop_timeout_s)
        if self._bm25 is not None:
            self._bm25.join(self.cfg.stop_timeout_s)
        self.state = "stopped"
        if self._own_runtime:
            self.rt.close()

    def _start(self) -> None:
        engine = self.rt.engine  # opens the store: StoreLockedError names the owner
        self._connectors = {c.source_id: c for c in self.rt.connectors()}
        self._sources = {sid: {"watch": "off"} for sid in self._connectors}
        self._bm25_generation = self.rt.bm25.current_generation()
        self._bm25 = Bm25Rebuilder(engine, self.rt.state, should_stop=self._stop.is_set, on_published=self._published)
        if self.cfg.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.cfg.metrics_host, self.cfg.metrics_port)
        if self.cfg.control_port is not None:
            _ = self.rt.retriever  # build it here, not racing in a request thread
            self._control = ControlServer(self.cfg.control_port, self.status, self._search)
            self.control_port = self._control.port
            self._control.start()
        self._start_watchers()
        self._bm25.start(rebuild_now=self._bm25_generation == 0)
        if self.cfg.initial_sync:
            for sid in self._connectors:
                self.queue.request_full(sid, "startup")
        self._worker = threading.Thread(target=self._work, name="sync-worker", daemon=True)
        self._worker.start()
        self._rights = threading.Thread(target=self._rights_work, name="rights-worker", daemon=True)
        self._rights.start()
        self._start_scheduler()
        self.state = "running"
        self._write_status()
        self._keepalive = threading.Thread(target=self._keepalive_loop, name="keepalive", daemon=True)
        self._keepalive.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop watchers and scheduler, let the worker finish its current item, stop the BM25
        thread, close the servers and (if owned) the Runtime. ``timeout`` (default
        ``daemon.stop_timeout_s``) bounds the wait for the worker and the BM25 thread; returns
        ``False`` when they did not end in time (the Runtime is then left open: the caller should
        exit the process; state and store are crash-safe, the next start redoes the item)."""
        if self.state in ("stopped", "created"):
            return True
        deadline = time.monotonic() + (self.cfg.stop_timeout_s if timeout is None else timeout)
        self.state = "stopping"
        self.notifier.stopping("stopping: finishing the current item")
        log.info("daemon stopping")
        for w in self._watchers:
            w.stop(timeout=1.0)
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
        self._stop.set()
        self.queue.close()
        clean = True
        if self._worker is not None:
            self._worker.join(max(0.0, deadline - time.monotonic()))
            clean = not self._worker.is_alive()
        if self._rights is not None:
            self._rights.join(max(0.0, deadline - time.monotonic()))
            clean = not self._rights.is_alive() and clean
        if self._bm25 is not None:
            clean = self._bm25.join(max(0.0, deadline - time.monotonic())) and clean
        if self._control is not None:
            self._control.close()
        self.metrics.close()
        if self._keepalive is not None:
            self._keepalive.join(2.0)
        if clean:
            self.state = "stopped"
            self._write_status()
            if self._own_runtime:
                self.rt.close()
            log.info("daemon stopped")
        else:
            self.state = "stopped"
            self._write_status()
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

    def request_resync(self, trigger: str = "sighup", *, force: bool = True) -> None:
        """Queue a full pass of every source now (SIGHUP: ``force``: content hashes and ACLs
        re-read, only what changed embedded)."""
        log.info("full resync requested", extra={"trigger": trigger})
        for sid in self._connectors:
            self.queue.request_full(sid, trigger, force=force)

    # ================================================================================ wiring
    def _start_watchers(self) -> None:
        for src in self.settings.sources:
            conn = self._connectors[src.id]
            if src.watch == "off":
                continue
            w: FolderWatcher | ConnectorWatcher
            if isinstance(conn, WatchableConnector):
                w = ConnectorWatcher(conn, self._on_event)
            elif isinstance(conn, LocalTree):
                w = FolderWatcher(
                    src.id, conn.root, mode=src.watch, poll_interval_s=src.poll_interval_s,
                    on_change=self._on_event, ignore=self.settings.ignore, acl_manifest=conn.acl_manifest,
                )
            else:
                log.info("source %s has no event source; periodic reconciliation only", src.id)
                continue
            w.start()
            self._watchers.append(w)

    def _start_scheduler(self) -> None:
        sched = BackgroundScheduler(
            timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
        )
        for sid in self._connectors:
            if self.cfg.reconcile_interval_s > 0:
                sched.add_job(
                    self.queue.request_full, "interval", seconds=self.cfg.reconcile_interval_s,
                    args=[sid, "periodic"], id=f"reconcile:{sid}",
                )
            if self.cfg.acl_sweep_interval_s > 0:
                sched.add_job(
                    self.queue.request_acl, "interval", seconds=self.cfg.acl_sweep_interval_s,
                    args=[sid, "acl_sweep"], id=f"acl_sweep:{sid}",
                )
        if self.cfg.audit_purge_interval_s > 0:
            sched.add_job(
                self._purge_audit, "interval", seconds=self.cfg.audit_purge_interval_s, id="audit_retention",
                next_run_time=datetime.now(timezone.utc) + timedelta(seconds=5),
            )
        sched.start()
        self._scheduler = sched

    def _purge_audit(self) -> None:
        from ancre.query.audit import AuditLog

        a = self.settings.audit
        directory = Path(a.dir) if a.dir is not None else Path(self.settings.data_dir) / "audit"
        if a.retention_days <= 0 or not directory.is_dir():
            return
        removed = AuditLog(directory, a.retention_days).purge_expired()
        if removed:
            log.info("audit retention: %d file(s) deleted", len(removed), extra={"files": [p.name for p in removed]})

    def _on_event(self, ev: ChangeEvent) -> None:
        if ev.source not in self._connectors or self._stop.is_set():
            return
        if ev.path is not None:
            path = clean_rel_path(ev.path)
            if path is None:
                log.debug("ignored event outside the source: %r", ev)
                return
            dest = clean_rel_path(ev.dest_path) if ev.dest_path else None
            ev = ChangeEvent(ev.source, path, ev.kind, dest)
        self.queue.add_event(ev)
        self.metrics.queue_depth.set(self.queue.depth())

    # ================================================================================ the worker
    def _work(self) -> None:
        assert self._bm25 is not None
        while not self._stop.is_set():
            task = self.queue.take(0.5)
            if task is None:
                continue
            try:
                self._run_task(task)
            except Exception:
                log.exception("sync task failed; full pass of %s in %gs", task.source, RETRY_AFTER_S)
                self._retry_later(task.source)
            finally:
                self.queue.done()
                self.metrics.queue_depth.set(self.queue.depth())
                self._write_status()

    def _rights_work(self) -> None:
        """The rights thread: ACL refreshes only, alongside the worker (see the module doc)."""
        while not self._stop.is_set():
            task = self.queue.take_acl(0.5)
            if task is None:
                continue
            try:
                conn = self._connectors.get(task.source)
                if conn is not None:
                    rep = self.rt.engine.refresh_acls(conn, task.paths, should_stop=self._stop.is_set)
                    self._record(rep, task.trigger)
                    if rep.outcome == "suspect":
                        self._retry_later(task.source)
            except Exception:
                log.exception("ACL refresh failed; full pass of %s in %gs", task.source, RETRY_AFTER_S)
                self._retry_later(task.source)
            finally:
                self.queue.done_acl()
                self.metrics.queue_depth.set(self.queue.depth())
                self._write_status()

    def _run_task(self, task: Task) -> None:
        assert self._bm25 is not None
        conn = self._connectors.get(task.source)
        if conn is None:
            return
        engine = self.rt.engine
        times: list[float] = []
        changed = False
        trigger = task.trigger if isinstance(task, FullPass) else "event"
        self._begin_progress(task.source, trigger, "full" if isinstance(task, FullPass) else "paths")
        self._bm25.begin()
        try:
            if isinstance(task, FullPass):
                rep = engine.run_pass(
                    conn, rebuild_bm25=False, force=task.force, should_stop=self._stop.is_set, progress=self._on_progress
                )
            else:
                times = list(task.first_event)
                rep = engine.sync_paths(
                    conn, task.paths, rebuild_bm25=False, should_stop=self._stop.is_set, progress=self._on_progress
                )
            changed = rep.changed_index
        finally:
            self._end_progress(task.source)
            self._bm25.end(changed, times if changed else [])
        if times and not changed:  # nothing to rebuild: searchable as it is now
            self._observe_delays(times)
        self._record(rep, trigger)

    # ------------------------------------------------------------------ live progress of a task
    def _begin_progress(self, source: str, trigger: str, scope: str) -> None:
        with self._mu:
            self._current = {
                "source": source, "trigger": trigger, "scope": scope, "started_at": time.time(),
                "done": 0, "total": None, "to_do": None, "path": None,
            }
        self._push_progress(force=True)

    def _on_progress(self, path: str, done: int, total: int) -> None:
        """The engine's ``progress`` callback: ``done`` of ``total`` items behind, ``path`` next."""
        with self._mu:
            cur = self._current
            if cur is None:
                return
            cur.update(done=done, total=total, to_do=total - done, path=path)
            source = cur["source"]
        self.metrics.progress(source, done, total)
        self._push_progress()

    def _end_progress(self, source: str) -> None:
        with self._mu:
            self._current = None
        self.metrics.progress(source, 0, 0)

    def _push_progress(self, force: bool = False) -> None:
        """Refresh the status file, ``STATUS=`` and the queue gauge (at most every
        :data:`PROGRESS_EVERY_S` seconds unless ``force``)."""
        now = time.monotonic()
        if not force and now - self._progress_pushed < PROGRESS_EVERY_S:
            return
        self._progress_pushed = now
        self.metrics.queue_depth.set(self.queue.depth())
        self.notifier.status(self._status_line())
        self._write_status()

    def _retry_later(self, source: str) -> None:
        if self._scheduler is None or self._stop.is_set():
            return
        self._scheduler.add_job(
            self.queue.request_full, "date", run_date=datetime.now(timezone.utc) + timedelta(seconds=RETRY_AFTER_S),
            args=[source, "retry"], id=f"retry:{source}", replace_existing=True,
        )

    def _record(self, rep: PassReport, trigger: str) -> None:
        now = time.time()
        summary = {**asdict(rep), "trigger": trigger, "finished_at": now}
        summary["problems"] = summary["problems"][:20]
        with self._mu:
            self._passes[trigger] += 1
            self._embedded_total += rep.embedded_chunks
            src = self._sources.setdefault(rep.source, {})
            src["last"] = summary
            if rep.scope == "full":
                src["last_full"] = summary
            elif rep.scope == "acl":
                src["last_acl"] = summary
            if rep.outcome == "ok":
                src["last_ok_at"] = now
            self._counts = None
        self.metrics.record(rep, trigger, now)
        level = logging.INFO if rep.outcome in ("ok", "interrupted") else logging.WARNING
        log.log(
            level, "%s %s of %s: %s", trigger, {"full": "pass", "acl": "ACL refresh"}.get(rep.scope, "batch"), rep.source, rep.outcome,
            extra={"trigger": trigger, "outcome": rep.outcome, "reason": rep.reason, "embedded_chunks": rep.embedded_chunks},
        )

    def _published(self, generation: int, seconds: float, first_event_times: list[float]) -> None:
        with self._mu:
            self._bm25_generation = generation
        self.metrics.bm25_generation.set(generation)
        self.metrics.bm25_rebuild.observe(seconds)
        self._observe_delays(first_event_times)
        self._write_status()

    def _observe_delays(self, first_event_times: list[float]) -> None:
        now = time.monotonic()
        with self._mu:
            for t in first_event_times:
                d = max(0.0, now - t)
                self._delays.append(d)
                self.metrics.delay.observe(d)

    # ================================================================================ status
    def _search(self, q: str, user: str, limit: int) -> dict[str, Any]:
        principals = self.rt.directory.principals(user)
        res = self.rt.retriever.retrieve(q, principals, limit=limit)
        return {
            "user": user,
            "results": [
                {
                    "filename": r.filename, "path": r.path, "doc_id": r.doc_id, "chunk_index": r.chunk_index,
                    "score": round(r.score, 6), "location": r.location, "found_by": list(r.found_by),
                }
                for r in res.results
            ],
            "unverified": [
                {"source": u.source, "documents": u.documents, "reason": u.reason} for u in res.unverified
            ],
        }

    def _doc_counts(self) -> dict[str, Any]:
        with self._mu:
            if self._counts is not None:
                return self._counts
        items = self.rt.state.all_items()
        docs: dict[str, dict[str, int]] = {}
        chunks: dict[str, int] = {}
        for it in items:
            d = docs.setdefault(it.source, {})
            d[it.status] = d.get(it.status, 0) + 1
            chunks[it.source] = chunks.get(it.source, 0) + (it.chunk_count if it.status == "indexed" else 0)
        self.metrics.refresh_state(items)
        counts = {"documents": docs, "chunks": chunks}
        with self._mu:
            self._counts = counts
        return counts

    def status(self) -> dict[str, Any]:
        """The daemon status (JSON-able): ``state``, ``pid``, ``queue_depth``, ``idle`` (queue
        empty, worker and BM25 idle), ``current`` (the running pass or batch: ``source``,
        ``trigger``, ``scope``, ``started_at``, ``done``, ``total``, ``to_do``, next ``path``; ``None``
        when none runs), ``bm25_generation``, ``passes`` by trigger,
        ``embedded_chunks_total``, per-source last pass/batch (``last``), last full pass
        (``last_full``), last ACL refresh (``last_acl``) and watch mode, document and chunk
        counts, recent event-to-searchable ``delays_s``, the ports."""
        counts = self._doc_counts() if self.state in ("running", "stopping", "stopped") else {}
        pending = self.queue.pending()
        bm25_idle = self._bm25.idle() if self._bm25 is not None else True
        with self._mu:
            sources = {sid: dict(s) for sid, s in self._sources.items()}
            for w in self._watchers:
                sources.setdefault(w.source_id, {})["watch"] = w.effective_mode
            delays = list(self._delays)
            return {
                "pid": os.getpid(),
                "state": self.state,
                "started_at": self.started_at,
                "updated_at": time.time(),
                "queue_depth": self.queue.depth(),
                "idle": pending == 0 and bm25_idle,
                "current": dict(self._current) if self._current is not None else None,
                "bm25_generation": self._bm25_generation,
                "bm25_dirty": bool(self._bm25 and self._bm25.dirty),
                "passes": dict(self._passes),
                "embedded_chunks_total": self._embedded_total,
                "sources": sources,
                "delays_s": delays,
                "delay_median_s": statistics.median(delays) if delays else None,
                "metrics_port": self.metrics_port,
                "control_port": self.control_port,
                **counts,
            }

    def _write_status(self) -> None:
        try:
            data = json.dumps(self.status(), ensure_ascii=False, default=str)
            with self._status_mu:
                tmp = self.status_path.with_suffix(".tmp")
                tmp.write_text(data, encoding="utf-8")
                os.replace(tmp, self.status_path)
        except Exception:  # status is best effort, never a reason to stop syncing
            log.exception("could not write %s", self.status_path)

    def _status_line(self) -> str:
        with self._mu:
            last = max((s.get("last", {}).get("finished_at", 0.0) for s in self._sources.values()), default=0.0)
            outcomes = sorted({s["last"]["outcome"] for s in self._sources.values() if "last" in s})
            cur = dict(self._current) if self._current is not None else None
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last)) if last else "none yet"
        doing = ""
        if cur is not None:
            what = "pass" if cur["scope"] == "full" else "batch"
            count = f"{cur['done']}/{cur['total']} done, {cur['to_do']} to do" if cur["total"] is not None else "listing"
            doing = f"; {cur['trigger']} {what} of {cur['source']}: {count}"
        return f"{self.state}{doing}; last sync {when} ({'/'.join(outcomes) or '-'}); queue {self.queue.depth()}"

    def _keepalive_loop(self) -> None:
        wd = self.cfg.watchdog_interval_s or watchdog_interval()
        tick = min(wd, self.cfg.status_interval_s) if wd else self.cfg.status_interval_s
        next_status = 0.0
        while not self._stop.wait(tick):
            alive = self._worker is not None and self._worker.is_alive()
            if wd and alive:
                self.notifier.watchdog()
            if time.monotonic() >= next_status:
                self.notifier.status(self._status_line())
                self._write_status()
                next_status = time.monotonic() + self.cfg.status_interval_s


def run_daemon(settings: Settings) -> int:
    """``ancre daemon``: set up logging from ``settings.daemon``, run a :class:`Daemon` until
    SIGTERM/SIGINT; returns the exit status."""
    from ancre.daemon.logs import setup_logging

    setup_logging(settings.daemon.log_format, settings.daemon.log_level, settings.logging.levels(settings.daemon.log_level))
    return Daemon(settings).run_forever()


__all__ = ["Bm25Rebuilder", "Daemon", "run_daemon", "STATUS_FILE"]
