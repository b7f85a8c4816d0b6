"""The daemon's apscheduler jobs (see :mod:`ancre.daemon.service`). Jobs only *request* work from
the :class:`~ancre.daemon.queue.ChangeQueue`, so a job whose work overruns its interval is merged
into the pending request (and apscheduler runs each job with ``coalesce=True, max_instances=1``):
per source a full reconciliation (events get lost) and an ACL sweep (a permission change often
produces no content event); plus audit-log retention and the delayed retry of a failed task."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler

from ancre.daemon.queue import ChangeQueue
from ancre.settings.daemon import DaemonConfig

log = logging.getLogger("ancre.daemon")

PurgeAudit = Callable[[], list[Path]]
"""Deletes the audit files past retention; returns the deleted paths (given by the composition
root: the audit log belongs to the query side)."""


def start_scheduler(
    cfg: DaemonConfig, sources: Iterable[str], queue: ChangeQueue, purge_audit: PurgeAudit | None
) -> BackgroundScheduler:
    """Start a UTC :class:`BackgroundScheduler` with, per source, a reconciliation every
    ``cfg.reconcile_interval_s`` and an ACL sweep every ``cfg.acl_sweep_interval_s`` seconds (0:
    none), and the audit purge every ``cfg.audit_purge_interval_s`` seconds (first run 5 s after
    start) when ``purge_audit`` is given."""
    sched = BackgroundScheduler(
        timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
    )
    for sid in sources:
        if cfg.reconcile_interval_s > 0:
            sched.add_job(
                queue.request_full, "interval", seconds=cfg.reconcile_interval_s,
                args=[sid, "periodic"], id=f"reconcile:{sid}",
            )
        if cfg.acl_sweep_interval_s > 0:
            sched.add_job(
                queue.request_acl, "interval", seconds=cfg.acl_sweep_interval_s,
                args=[sid, "acl_sweep"], id=f"acl_sweep:{sid}",
            )
    if purge_audit is not None and cfg.audit_purge_interval_s > 0:
        sched.add_job(
            _purge, "interval", seconds=cfg.audit_purge_interval_s, id="audit_retention", args=[purge_audit],
            next_run_time=datetime.now(UTC) + timedelta(seconds=5),
        )
    sched.start()
    return sched


def _purge(purge_audit: PurgeAudit) -> None:
    removed = purge_audit()
    if removed:
        log.info("audit retention: %d file(s) deleted", len(removed), extra={"files": [p.name for p in removed]})


def retry_later(sched: BackgroundScheduler, queue: ChangeQueue, source: str, delay_s: float) -> None:
    """Queue a full pass of ``source`` (trigger ``retry``) in ``delay_s`` seconds (one pending
    retry per source)."""
    sched.add_job(
        queue.request_full, "date", run_date=datetime.now(UTC) + timedelta(seconds=delay_s),
        args=[source, "retry"], id=f"retry:{source}", replace_existing=True,
    )


__all__ = ["PurgeAudit", "retry_later", "start_scheduler"]
