"""Event sources of the daemon (see :mod:`ancre.daemon.service`): a connector that pushes its own
changes (:class:`~ancre.connectors.base.WatchableConnector`, e.g. SMB CHANGE_NOTIFY) gets a
:class:`~ancre.daemon.watch.ConnectorWatcher`; a local folder gets watchdog
(:class:`~ancre.daemon.watch.FolderWatcher`); any other source is reconciled periodically only."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ancre.config import SourceConfig
from ancre.connectors.base import ChangeCallback, ChangeEvent, Connector, LocalTree, WatchableConnector
from ancre.daemon.queue import ChangeQueue
from ancre.daemon.sync import clean_rel_path
from ancre.daemon.watch import ConnectorWatcher, FolderWatcher

log = logging.getLogger("ancre.daemon")

Watcher = FolderWatcher | ConnectorWatcher


def start_watchers(
    sources: Sequence[SourceConfig],
    connectors: Mapping[str, Connector],
    on_event: ChangeCallback,
    ignore: tuple[str, ...],
) -> list[Watcher]:
    """Start one watcher per source whose ``watch`` is not ``off`` and that has an event
    source; returns the started watchers (the caller stops them)."""
    watchers: list[Watcher] = []
    for src in sources:
        conn = connectors.get(src.id)
        if conn is None or src.watch == "off":
            continue
        w: Watcher
        if isinstance(conn, WatchableConnector):
            w = ConnectorWatcher(conn, on_event)
        elif isinstance(conn, LocalTree):
            w = FolderWatcher(
                src.id, conn.root, mode=src.watch, poll_interval_s=src.poll_interval_s,
                on_change=on_event, ignore=ignore, acl_manifest=conn.acl_manifest,
            )
        else:
            log.info("source %s has no event source; periodic reconciliation only", src.id)
            continue
        w.start()
        watchers.append(w)
    return watchers


def clean_event(ev: ChangeEvent) -> ChangeEvent | None:
    """``ev`` with its paths normalised to source-relative form (:func:`clean_rel_path`);
    ``None`` for an event outside the source (dropped)."""
    if ev.path is None:
        return ev
    path = clean_rel_path(ev.path)
    if path is None:
        log.debug("ignored event outside the source: %r", ev)
        return None
    dest = clean_rel_path(ev.dest_path) if ev.dest_path else None
    return ChangeEvent(ev.source, path, ev.kind, dest)


def feed(queue: ChangeQueue, ev: ChangeEvent) -> None:
    """Queue a cleaned event (see :func:`clean_event`)."""
    cleaned = clean_event(ev)
    if cleaned is not None:
        queue.add_event(cleaned)


__all__ = ["Watcher", "clean_event", "feed", "start_watchers"]
