"""What the daemon reports about its work: the running pass or batch and its live progress, the
last pass of each source, pass counts by trigger, event-to-searchable delays, and the two outward
forms of all that — the status dict (``<data_dir>/daemon-status.json``, the control socket's
``/status``) and the one-line systemd ``STATUS=``. See :mod:`ancre.daemon.service`."""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from collections import Counter, deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ancre.daemon.metrics import DaemonMetrics
from ancre.daemon.sync import PassReport, skip_reason_key
from ancre.index.state import StateDB
from ancre.models import ItemStatus, PassOutcome, PassScope

log = logging.getLogger("ancre.daemon")

STATUS_FILE = "daemon-status.json"
PROGRESS_EVERY_S = 1.0
"""During a pass, the status file and ``STATUS=`` are refreshed at most this often."""


class ProgressBook:
    """Thread-safe record of the daemon's work (the worker, the rights lane and the BM25 thread
    write; the status readers read). Times are ``time.time()`` seconds unless named monotonic.
    ``metrics`` mirrors every record in Prometheus form."""

    def __init__(self, metrics: DaemonMetrics, bm25_generation: int = 0) -> None:
        self.metrics = metrics
        self._mu = threading.Lock()
        self._passes: Counter[str] = Counter()
        self._embedded_total = 0
        self._sources: dict[str, dict[str, Any]] = {}
        self._reports: dict[str, tuple[float, PassReport]] = {}
        self._delays: deque[float] = deque(maxlen=1000)
        self._counts: dict[str, Any] | None = None
        self._counts_epoch = 0
        """Bumped by every :meth:`record`: counts read from the state DB before a bump are stale."""
        self._bm25_generation = bm25_generation
        self._current: dict[str, Any] | None = None
        self._progress_pushed = 0.0

    # ------------------------------------------------------------------ the running task
    def begin(self, source: str, trigger: str, scope: PassScope) -> None:
        """A pass (``scope`` ``full``) or batch (``paths``) of ``source`` starts."""
        with self._mu:
            self._current = {
                "source": source, "trigger": trigger, "scope": scope, "started_at": time.time(),
                "done": 0, "total": None, "to_do": None, "path": None,
            }
            self._progress_pushed = time.monotonic()

    def progress(self, path: str, done: int, total: int) -> bool:
        """The engine's ``progress`` callback: ``done`` of ``total`` items behind, ``path`` next.
        Returns whether the outward status is due for a refresh (:data:`PROGRESS_EVERY_S`)."""
        with self._mu:
            cur = self._current
            if cur is None:
                return False
            cur.update(done=done, total=total, to_do=total - done, path=path)
            source = cur["source"]
        self.metrics.progress(source, done, total)
        return self.due()

    def due(self) -> bool:
        """Whether :data:`PROGRESS_EVERY_S` passed since the last outward refresh (and mark it
        done when so)."""
        now = time.monotonic()
        with self._mu:
            if now - self._progress_pushed < PROGRESS_EVERY_S:
                return False
            self._progress_pushed = now
            return True

    def end(self, source: str) -> None:
        """The running task of ``source`` ended (whatever its outcome)."""
        with self._mu:
            self._current = None
        self.metrics.progress(source, 0, 0)

    def current(self) -> dict[str, Any] | None:
        """A copy of the running task's progress (``None`` when none runs)."""
        with self._mu:
            return dict(self._current) if self._current is not None else None

    # ------------------------------------------------------------------ finished work
    def record(self, rep: PassReport, trigger: str, started_at: float | None = None) -> None:
        """A pass, batch or ACL refresh finished; ``started_at``: when it began (full passes keep
        their whole report for :meth:`full_reports`)."""
        now = time.time()
        summary = {**asdict(rep), "trigger": trigger, "finished_at": now}
        summary["problems"] = summary["problems"][:20]
        with self._mu:
            self._passes[trigger] += 1
            self._embedded_total += rep.embedded_chunks
            src = self._sources.setdefault(rep.source, {})
            src["last"] = summary
            if rep.scope == PassScope.FULL:
                src["last_full"] = summary
                self._reports[rep.source] = (started_at if started_at is not None else now - rep.duration_s, rep)
            elif rep.scope == PassScope.ACL:
                src["last_acl"] = summary
            if rep.outcome == PassOutcome.OK:
                src["last_ok_at"] = now
            self._counts = None
            self._counts_epoch += 1
        self.metrics.record(rep, trigger, now)
        # a full disk is said once, by the daemon's wait for space (ancre.daemon.disk)
        quiet = (PassOutcome.OK, PassOutcome.INTERRUPTED, PassOutcome.DISK_FULL)
        level = logging.INFO if rep.outcome in quiet else logging.WARNING
        log.log(
            level, "%s %s of %s: %s",
            trigger, {PassScope.FULL: "pass", PassScope.ACL: "ACL refresh"}.get(rep.scope, "batch"), rep.source, rep.outcome,
            extra={"trigger": trigger, "outcome": rep.outcome, "reason": rep.reason, "embedded_chunks": rep.embedded_chunks,
                   "reused_chunks": rep.reused_chunks},
        )

    def full_reports(self, since: float) -> dict[str, PassReport]:
        """The last full-pass report of each source whose pass started at or after ``since``."""
        with self._mu:
            return {s: rep for s, (t, rep) in self._reports.items() if t >= since}

    def published(self, generation: int, seconds: float, first_event_times: list[float]) -> None:
        """A BM25 generation was published after ``seconds``; the events it makes searchable."""
        with self._mu:
            self._bm25_generation = generation
        self.metrics.bm25_generation.set(generation)
        self.metrics.bm25_rebuild.observe(seconds)
        self.observe_delays(first_event_times)

    def observe_delays(self, first_event_times: list[float]) -> None:
        """Events (monotonic times of their first notification) are searchable now."""
        now = time.monotonic()
        with self._mu:
            for t in first_event_times:
                d = max(0.0, now - t)
                self._delays.append(d)
                self.metrics.delay.observe(d)

    def watch_modes(self, sources: list[str]) -> None:
        """Every source starts with watch mode ``off`` (the watchers report their own)."""
        with self._mu:
            self._sources = {sid: {"watch": "off"} for sid in sources}

    # ------------------------------------------------------------------ outward forms
    def doc_counts(self, state: StateDB) -> dict[str, Any]:
        """``{"documents": {source: {status: n}}, "chunks": {source: n}}``, cached until the next
        :meth:`record`. Counts read while a task was being recorded are returned to this caller
        but never cached: a status thread that read the state DB just before a purge must not
        keep showing the purged rows until the next task (issue 46: ``{'indexed': 10}`` after a
        folder moved out)."""
        with self._mu:
            if self._counts is not None:
                return self._counts
            epoch = self._counts_epoch
        items = state.all_items()
        docs: dict[str, dict[str, int]] = {}
        chunks: dict[str, int] = {}
        for it in items:
            d = docs.setdefault(it.source, {})
            d[it.status] = d.get(it.status, 0) + 1
            chunks[it.source] = chunks.get(it.source, 0) + (it.chunk_count if it.status == ItemStatus.INDEXED else 0)
        self.metrics.refresh_state(items)
        counts = {"documents": docs, "chunks": chunks}
        with self._mu:
            if self._counts_epoch == epoch:
                self._counts = counts
        return counts

    def snapshot(self, watch_modes: dict[str, str]) -> dict[str, Any]:
        """The bookkept part of the daemon status (see :meth:`Daemon.status
        <ancre.daemon.service.Daemon.status>`); ``watch_modes``: source → effective watch mode."""
        with self._mu:
            sources = {sid: dict(s) for sid, s in self._sources.items()}
            for sid, mode in watch_modes.items():
                sources.setdefault(sid, {})["watch"] = mode
            delays = list(self._delays)
            return {
                "current": dict(self._current) if self._current is not None else None,
                "bm25_generation": self._bm25_generation,
                "passes": dict(self._passes),
                "embedded_chunks_total": self._embedded_total,
                "sources": sources,
                "delays_s": delays,
                "delay_median_s": statistics.median(delays) if delays else None,
            }

    def status_line(self, state: str, queue_depth: int) -> str:
        """systemd ``STATUS=``: state, the running task's progress, last sync time and outcomes,
        queue depth."""
        with self._mu:
            last = max((s.get("last", {}).get("finished_at", 0.0) for s in self._sources.values()), default=0.0)
            outcomes = sorted({s["last"]["outcome"] for s in self._sources.values() if "last" in s})
            cur = dict(self._current) if self._current is not None else None
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last)) if last else "none yet"
        doing = ""
        if cur is not None:
            what = "pass" if cur["scope"] == PassScope.FULL else "batch"
            count = f"{cur['done']}/{cur['total']} done, {cur['to_do']} to do" if cur["total"] is not None else "listing"
            doing = f"; {cur['trigger']} {what} of {cur['source']}: {count}"
        return f"{state}{doing}; last sync {when} ({'/'.join(outcomes) or '-'}); queue {queue_depth}"


def index_status(state: StateDB, bm25_generation: int) -> dict[str, Any]:
    """The index status of ``ancre status --json`` (JSON-able): ``counts`` (``source``, ``status``,
    ``n``), ``chunks`` per source, ``bm25_generation``, ``acl_unreadable`` per source, the last 20
    ``passes`` (``source``, ``started_at``, ``finished_at``, ``outcome``), ``problems`` (failed,
    skipped and pending documents, and indexed ones whose ACL could not be read) and ``skipped``
    counts by reason. Passes whose process died are closed as crashed first."""
    state.close_stale_passes()  # a pass whose process died shows as crashed, not running
    items = state.all_items()
    passes = state.last_passes(20)
    counts: dict[tuple[str, str], int] = {}
    chunks: dict[str, int] = {}
    skipped: dict[tuple[str, str], int] = {}
    for it in items:
        counts[(it.source, it.status)] = counts.get((it.source, it.status), 0) + 1
        chunks[it.source] = chunks.get(it.source, 0) + it.chunk_count * (it.status == ItemStatus.INDEXED)
        if it.status == ItemStatus.SKIPPED:
            key = (it.source, skip_reason_key(it.reason_code, it.detail))
            skipped[key] = skipped.get(key, 0) + 1
    # (source, path, status, problem, reason): failed/skipped/pending documents, and indexed ones
    # whose ACL could not be read (their row's acl_problem; readable by nobody)
    problems = [
        (i.source, i.path, i.status, i.status if i.status != ItemStatus.INDEXED else "acl_unreadable", i.reason)
        for i in items
        if i.status in (ItemStatus.FAILED, ItemStatus.SKIPPED, ItemStatus.PENDING)
        or (i.status == ItemStatus.INDEXED and i.acl_problem)
    ]
    acl_unreadable: dict[str, int] = {}
    for p in problems:
        if p[3] == "acl_unreadable":
            acl_unreadable[p[0]] = acl_unreadable.get(p[0], 0) + 1
    return {
        "counts": [{"source": s, "status": st, "n": n} for (s, st), n in sorted(counts.items())],
        "chunks": chunks, "bm25_generation": bm25_generation, "acl_unreadable": acl_unreadable,
        "passes": [{"source": p[0], "started_at": p[1], "finished_at": p[2], "outcome": p[3]} for p in passes],
        "problems": [
            {"source": p[0], "path": p[1], "status": p[2], "problem": p[3], "reason": p[4]} for p in problems
        ],
        "skipped": [{"source": s, "reason": r, "n": n} for (s, r), n in sorted(skipped.items())],
    }


class StatusFile:
    """``<data_dir>/daemon-status.json``, replaced atomically (best effort: a failure is logged,
    never raised)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mu = threading.Lock()

    def write(self, status: dict[str, Any]) -> None:
        """Write ``status`` (JSON-able; non-JSON values as ``str``)."""
        try:
            data = json.dumps(status, ensure_ascii=False, default=str)
            with self._mu:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(data, encoding="utf-8")
                os.replace(tmp, self.path)
        except Exception:  # status is best effort, never a reason to stop syncing
            log.exception("could not write %s", self.path)


__all__ = ["PROGRESS_EVERY_S", "STATUS_FILE", "ProgressBook", "StatusFile", "index_status"]
