"""Event sources of the daemon (see :mod:`ancre.daemon.service`), by capability, first match wins:
a connector that pushes its own changes (:class:`~ancre.connectors.base.WatchableConnector`, e.g.
SMB CHANGE_NOTIFY) gets a :class:`~ancre.daemon.watch.ConnectorWatcher`; a
:class:`~ancre.connectors.base.ChangeFeed` (e.g. Graph delta) a
:class:`~ancre.daemon.watch.FeedRunner`; a local folder (:class:`~ancre.connectors.base.LocalTree`)
watchdog (:class:`~ancre.daemon.watch.FolderWatcher`); any other source a
:class:`~ancre.daemon.watch.FeedRunner` over a
:class:`~ancre.connectors.poller.SnapshotDiffPoller` (a listing every ``poll_interval_s``,
diffed with the last one). ``watch = "off"``: none (periodic reconciliation only)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ancre.config import SourceConfig
from ancre.connectors.base import ChangeCallback, ChangeEvent, ChangeFeed, Connector, LocalTree, WatchableConnector
from ancre.connectors.poller import SnapshotDiffPoller
from ancre.daemon.queue import ChangeQueue
from ancre.daemon.sync import clean_rel_path
from ancre.daemon.watch import ConnectorWatcher, FeedRunner, FolderWatcher
from ancre.index.cursors import CursorStore

log = logging.getLogger("ancre.daemon")

Watcher = FolderWatcher | ConnectorWatcher | FeedRunner


def make_watcher(
    src: SourceConfig, conn: Connector, on_event: ChangeCallback, ignore: tuple[str, ...], cursors: CursorStore
) -> Watcher:
    """The (not started) event source of ``conn`` by its capabilities, in the order of the
    module doc: push, change feed, local tree, snapshot-diff poller."""
    if isinstance(conn, WatchableConnector):
        return ConnectorWatcher(conn, on_event)
    if isinstance(conn, ChangeFeed):
        return FeedRunner(src.id, conn, cursors, on_event)
    if isinstance(conn, LocalTree):
        return FolderWatcher(
            src.id, conn.root, mode=src.watch, poll_interval_s=src.poll_interval_s,
            on_change=on_event, ignore=ignore, acl_manifest=conn.acl_manifest,
        )
    return FeedRunner(src.id, SnapshotDiffPoller(conn, src.poll_interval_s), cursors, on_event, mode="poll")


def start_watchers(
    sources: Sequence[SourceConfig],
    connectors: Mapping[str, Connector],
    on_event: ChangeCallback,
    ignore: tuple[str, ...],
    cursors: CursorStore,
) -> list[Watcher]:
    """Start one event source per source whose ``watch`` is not ``off`` (:func:`make_watcher`);
    ``cursors`` keeps the change feeds' cursors (those of sources no longer in ``sources`` are
    dropped). Returns the started watchers (the caller stops them)."""
    configured = {src.id for src in sources}
    for gone in set(cursors.sources()) - configured:
        log.info("source %s is no longer configured: its change-feed cursor is dropped", gone)
        cursors.delete(gone)
    watchers: list[Watcher] = []
    for src in sources:
        conn = connectors.get(src.id)
        if conn is None:
            continue
        if src.watch == "off":
            log.info("source %s: watch = off; periodic reconciliation only", src.id)
            continue
        w = make_watcher(src, conn, on_event, ignore, cursors)
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


__all__ = ["Watcher", "clean_event", "feed", "make_watcher", "start_watchers"]
