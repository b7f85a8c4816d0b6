"""The sync engine (:class:`SyncEngine`): passes over a source — read its listing, plan each item,
write what was planned, purge what vanished (with the mass-deletion guard). It is composed of
parts that are objects with narrow interfaces, each testable alone (:mod:`ancre.daemon.sync` says
how they fit together): planning (:class:`~ancre.daemon.sync.planner.ItemPlanner`, over the pure
:func:`~ancre.daemon.sync.plan.plan_item`), fetching and extracting
(:class:`~ancre.daemon.sync.fetch.Fetcher`), ACL readings in the ACL writer's order
(:class:`~ancre.daemon.sync.acl_reading.AclReader`), writing
(:class:`~ancre.daemon.sync.commit.ChunkWriter`; the rows of documents not indexed,
:class:`~ancre.daemon.sync.records.Recorder`), the ACL refresh
(:class:`~ancre.daemon.sync.acl_refresh.AclRefresher`) and the keyword hooks
(:class:`~ancre.daemon.sync.bm25.KeywordHooks`)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import Any

from ancre.config import Settings
from ancre.connectors.base import Connector, Listing, PermissionSweep
from ancre.daemon.faults import crash_point
from ancre.daemon.sync.acl_reading import AclReader
from ancre.daemon.sync.acl_refresh import AclRefresher
from ancre.daemon.sync.bm25 import KeywordHooks
from ancre.daemon.sync.commit import BATCH_CHUNKS, BATCH_DOCS, ChunkWriter, CommitPipe, Planned
from ancre.daemon.sync.fetch import Extractor, Fetcher
from ancre.daemon.sync.paths import clean_rel_path, items_under
from ancre.daemon.sync.plan import Action, Limits
from ancre.daemon.sync.planner import ItemPlanner, Settle
from ancre.daemon.sync.records import Recorder
from ancre.daemon.sync.report import PassReport, ProgressFn
from ancre.daemon.sync.retries import RetryPolicy
from ancre.errors import ConfigError, DiskFullError, EmbedderError, ExtractionError, SourceUnavailableError, StoreError
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Manager
from ancre.index.disk_space import SpaceGuarded
from ancre.index.embedders import Embedder
from ancre.index.state import ItemState, StateDB
from ancre.index.store import Maintainable, Store
from ancre.ingest.extract import extractor_version
from ancre.models import ItemStatus, PassOutcome, PassScope, SourceItem

log = logging.getLogger("ancre.sync")

StopFn = Callable[[], bool]


def _read_listing(connector: Connector, *, force: bool) -> Listing:
    """The source's listing (and, with ``force``, every permission re-read at a
    :class:`~ancre.connectors.base.PermissionSweep` source). Raises ``SourceUnavailableError``."""
    listing = connector.list_items()
    if force and isinstance(connector, PermissionSweep):
        connector.sweep_permissions()  # its fetch_acl answers from them: re-read them all now
    return listing


class SyncEngine:
    """Runs passes. ``store`` must be opened with ``embedder``; ``bm25`` receives a new generation
    after any pass that changed the index; ``pool`` extracts files (the extraction worker);
    ``acl_writer``: the process's one ACL writer, shared with the query core's live rights check
    (built by the composition root, :class:`~ancre.query.bootstrap.Bootstrap`; raises
    ``ValueError`` when it is read-only: the engine writes the index). ``overlap``: embed and
    write each batch on a thread of its own while the next files are extracted
    (:class:`~ancre.daemon.sync.commit.CommitPipe`); ``False``: one after the other (the
    benchmark's baseline). Passes are serialised by an internal lock."""

    def __init__(
        self, settings: Settings, store: Store, embedder: Embedder, state: StateDB, bm25: Bm25Manager,
        pool: Extractor, *, acl_writer: AclWriter, overlap: bool = True,
    ) -> None:
        if acl_writer.read_only:
            raise ValueError("the sync engine writes the index: its ACL writer must not be read-only")
        self.settings, self.store, self.state, self.overlap = settings, store, state, overlap
        self._lock = threading.RLock()
        self.disk_full: DiskFullError | None = None
        """Why the last pass or batch stopped for want of space (``None`` when it did not): the
        daemon waits until the file system has what it needed (:mod:`ancre.daemon.disk`)."""
        acls = AclReader(acl_writer)
        self.fetcher = Fetcher(pool, settings.chunking, settings.extraction.max_chunks)
        self.planner = ItemPlanner(self.fetcher, acls, store.delete_doc)
        self.writer = ChunkWriter(store, embedder, state, acl_writer, acls)
        self.records = Recorder(store, state)
        self.rights = AclRefresher(state, acl_writer, acls)
        self.keywords = KeywordHooks(store, bm25, in_store=settings.store.bm25 == "qdrant")

    def run_pass(
        self,
        connector: Connector,
        *,
        rebuild_bm25: bool = True,
        force: bool = False,
        progress: ProgressFn | None = None,
        should_stop: StopFn | None = None,
    ) -> PassReport:
        """One full reconciliation of ``connector``'s source.

        ``force`` re-reads every item's content hash (still embedding only what changed) and, for
        a :class:`~ancre.connectors.base.PermissionSweep` connector, every item's permissions
        from the source.
        ``should_stop`` is polled between items (SIGTERM: finish the current item, then stop;
        an interrupted pass purges nothing). Never raises for a bad file or an unreachable root:
        the report says what happened.

        A listing may name ``unreachable`` parts (:class:`~ancre.connectors.base.Listing`):
        subtrees the source could not list. Everything listed is synced, nothing indexed under
        those prefixes is purged, and the outcome is ``partial`` with the prefixes in ``reason``.
        """
        with self._lock:
            t0 = time.monotonic()
            rep = PassReport(source=connector.source_id)
            pass_id = self.state.begin_pass(connector.source_id)
            try:
                if self._room(rep):
                    self._run(connector, rep, force=force, progress=progress, should_stop=should_stop)
                    if rebuild_bm25 and (rep.changed_index or self.keywords.stale()):
                        rep.bm25_generation = self.rebuild_bm25()
            except DiskFullError as e:  # stopped before writing: what was committed stays
                self._no_room(rep, e)
            except BaseException as e:  # recorded, then raised: the pass never stays open
                rep.outcome, rep.reason = PassOutcome.ERROR, f"{type(e).__name__}: {e}"[:500]
                raise
            finally:
                rep.duration_s = time.monotonic() - t0
                self.state.end_pass(pass_id, rep.outcome, rep.to_json())
            log.info("pass done", extra={"report": asdict(rep)})
            return rep

    def _room(self, rep: PassReport) -> bool:
        """Whether the store's file system has room for a pass (its margin, ``[store]
        min_free_mb``); if not, ``rep`` ends as ``disk_full`` before anything is read. A store
        that does not check free space (a Qdrant server) always has room here."""
        self.disk_full = None
        short = self.store.space.shortage(0, "a pass") if isinstance(self.store, SpaceGuarded) else None
        if short is None:
            return True
        self._no_room(rep, short)
        return False

    def _no_room(self, rep: PassReport, e: DiskFullError) -> None:
        """End ``rep`` as ``disk_full`` (nothing purged) and keep ``e`` for the daemon."""
        self.disk_full = e
        rep.outcome, rep.reason = PassOutcome.DISK_FULL, str(e)

    def _run(
        self, connector: Connector, rep: PassReport, *, force: bool, progress: ProgressFn | None,
        should_stop: StopFn | None,
    ) -> None:
        try:
            listing = _read_listing(connector, force=force)
        except SourceUnavailableError as e:
            rep.outcome, rep.reason = PassOutcome.SUSPECT, str(e)
            return
        rep.listed = len(listing.items)
        known = self.state.items(connector.source_id)
        if not self._sync_items(connector, listing.items, known, rep, force=force, progress=progress, should_stop=should_stop):
            return
        seen = {item.native_id for item in listing.items}
        unreachable = listing.unreachable_paths
        kept = tuple(p.strip("/") + "/" for p in unreachable)
        vanished = [
            st for nid, st in known.items()
            if nid not in seen and not st.path.startswith(kept) and "/" not in kept  # "" = the root: keep all
        ]
        self._purge(vanished, len(known), rep)
        if unreachable and rep.outcome == PassOutcome.OK:
            rep.outcome = PassOutcome.PARTIAL
            rep.reason = f"unreachable, left as indexed: {', '.join(unreachable)}"

    def _purge(self, vanished: list[ItemState], indexed_before: int, rep: PassReport) -> None:
        """Delete the points and state rows of ``vanished`` items, unless that is a mass deletion
        (more than ``sync.mass_delete_ratio`` of ``indexed_before``): then nothing is purged and
        the report is ``suspect``."""
        if not vanished:
            return
        cfg = self.settings.sync
        if indexed_before >= cfg.mass_delete_min_items and len(vanished) > cfg.mass_delete_ratio * indexed_before:
            rep.outcome = PassOutcome.SUSPECT
            rep.reason = (
                f"{len(vanished)} of {indexed_before} items vanished in one pass "
                f"(> {cfg.mass_delete_ratio:.0%}): nothing purged"
            )
            return
        for st in vanished:
            self.store.delete_doc(st.collection, st.doc_id)
            crash_point("purge")
            self.state.delete(st.source, st.native_id)
            if st.status in (ItemStatus.INDEXED, ItemStatus.PENDING):
                rep.deleted += 1

    # ------------------------------------------------------------------------------------------
    def sync_paths(
        self,
        connector: Connector,
        paths: Iterable[str],
        *,
        rebuild_bm25: bool = True,
        should_stop: StopFn | None = None,
        progress: ProgressFn | None = None,
    ) -> PassReport:
        """Re-sync only the given relative POSIX paths of ``connector``'s source (event-driven).

        Each path is, in this order: a file the connector lists (``get_item``) → synced like in a
        full pass (new, changed, ACL-only, unchanged, failed); otherwise every known document at
        that path or under ``path/`` (a former folder) is re-checked one by one and purged if the
        connector no longer lists it; and an existing folder's files (see
        :func:`~ancre.daemon.sync.paths.items_under`) are synced. Empty, absolute and ``..``
        paths are ignored.

        Purges obey the same mass-deletion guard as :meth:`run_pass`. When the root can't be
        reached (``SourceUnavailableError``) nothing is synced or purged and the report is
        ``suspect``; when ``should_stop`` turns true, it stops between items and purges nothing
        (``interrupted``). The report (``scope="paths"``) is not recorded in the ``passes`` table.
        ``progress`` is called before each item, as in :meth:`run_pass`.
        """
        wanted = [p for p in dict.fromkeys(clean_rel_path(p) for p in paths) if p is not None]
        with self._lock:
            t0 = time.monotonic()
            rep = PassReport(source=connector.source_id, scope=PassScope.PATHS)
            try:
                if self._room(rep):
                    self._sync_paths(connector, wanted, rep, should_stop=should_stop, progress=progress)
                    if rebuild_bm25 and (rep.changed_index or self.keywords.stale()):
                        rep.bm25_generation = self.rebuild_bm25()
            except DiskFullError as e:
                self._no_room(rep, e)
            finally:
                rep.duration_s = time.monotonic() - t0
            log.info("paths synced", extra={"report": asdict(rep), "paths": len(wanted)})
            return rep

    def _sync_paths(
        self, connector: Connector, paths: list[str], rep: PassReport, *, should_stop: StopFn | None,
        progress: ProgressFn | None = None,
    ) -> None:
        known = self.state.items(connector.source_id)
        try:
            items, vanished = _resolve_paths(connector, paths, known)
        except SourceUnavailableError as e:
            rep.outcome, rep.reason = PassOutcome.SUSPECT, str(e)
            return
        rep.listed = len(items)
        if not self._sync_items(
            connector, list(items.values()), known, rep, force=False, should_stop=should_stop, progress=progress
        ):
            return
        self._purge(list(vanished.values()), len(known), rep)

    # ------------------------------------------------------------------------------------------
    def _limits(self, source_id: str) -> Limits:
        """The limits of ``source_id``'s items (a connector built outside the settings: 50 MB)."""
        try:
            max_bytes = int(self.settings.source(source_id).max_size_mb * 1024 * 1024)
        except ConfigError:
            max_bytes = 50 * 1024 * 1024
        cfg = self.settings.sync
        return Limits(
            max_bytes=max_bytes,
            retry=RetryPolicy(max_attempts=cfg.max_attempts, backoff_s=cfg.retry_backoff_s, extractor=extractor_version()),
        )

    def _sync_items(
        self, connector: Connector, items: Sequence[SourceItem], known: dict[str, ItemState], rep: PassReport, *,
        force: bool, should_stop: StopFn | None, progress: ProgressFn | None = None,
    ) -> bool:
        """Sync ``items`` in order (``known``: state rows by ``native_id``). Documents to embed are
        committed in batches (up to ``BATCH_DOCS`` documents or ``BATCH_CHUNKS`` chunks: one
        embedder call and one store upsert per collection for many small files). Returns
        ``False`` when ``should_stop`` turned true or the source went away (what was planned is
        committed first)."""
        limits = self._limits(connector.source_id)
        batch: list[Planned] = []
        n_chunks = 0
        pipe = CommitPipe(self.writer.commit, connector, rep, overlap=self.overlap)
        try:
            for i, item in enumerate(items):
                if should_stop is not None and should_stop():
                    return _stopped(pipe, batch, rep, PassOutcome.INTERRUPTED, "stop requested")
                if progress is not None:
                    progress(item.path, i, len(items))
                try:
                    planned = self._sync_item(connector, item, known.get(item.native_id), rep, force=force, limits=limits)
                except SourceUnavailableError as e:
                    # the source went away mid-pass: keep what was done, purge nothing, retry later
                    return _stopped(pipe, batch, rep, PassOutcome.SUSPECT, f"source unreachable during the pass: {e}")
                if planned is None:
                    continue
                batch.append(planned)
                n_chunks += len(planned.chunks)
                if len(batch) >= BATCH_DOCS or n_chunks >= BATCH_CHUNKS:
                    pipe.submit(batch)  # embedded and written while the next files are extracted
                    batch, n_chunks = [], 0
            pipe.submit(batch)
            pipe.wait()
            return True
        finally:
            pipe.wait(raise_error=False)

    def _sync_item(
        self, connector: Connector, item: SourceItem, prev: ItemState | None, rep: PassReport, *,
        force: bool, limits: Limits,
    ) -> Planned | None:
        """``item`` planned (:meth:`ItemPlanner.plan <ancre.daemon.sync.planner.ItemPlanner.plan>`):
        a document to embed is returned for the writer, anything else is settled here (``None``).
        An unexpected exception becomes this item's failure (the pass goes on); the index's own
        errors and ``SourceUnavailableError`` are raised."""
        try:
            step = self.planner.plan(connector, item, prev, rep, force=force, limits=limits)
            if isinstance(step, Settle):
                self._settle(connector, item, prev, step, rep)
                return None
            return step
        except (SourceUnavailableError, StoreError, EmbedderError, sqlite3.Error):
            raise  # the source or the index itself is in trouble: the pass stops
        except Exception as e:  # this one item hit a bug: it fails, the pass goes on
            log.exception("sync of %s failed", item.path)
            self.records.record_error(
                item, prev, connector.collection_for(item), None, ExtractionError("error", f"{type(e).__name__}: {e}"[:300]),
                rep, retry=limits.retry, content_hash=None,
            )
            return None

    def _settle(self, connector: Connector, item: SourceItem, prev: ItemState | None, s: Settle, rep: PassReport) -> None:
        """Do what the planner decided for ``item`` (``prev``: its row) when it needs no
        embedding: record a failure or a skip, keep a problem, or write its ACL alone."""
        d, collection = s.decision, connector.collection_for(item)
        if d.action is Action.RECORD:
            assert d.failure is not None  # a RECORD decision carries its failure
            acl_hash = "" if s.reading is None else s.reading.digest  # not read: a link not followed
            self.records.record(item, prev, collection, acl_hash, d.failure, rep, content_hash=s.content_hash)
        elif d.action is Action.KEEP_PROBLEM:
            assert prev is not None and s.reading is not None  # a failed/skipped row, its ACL read
            self.records.keep(item, prev, s.reading.digest, rep, touch=d.touch)
        elif d.action is Action.ACL_ONLY:
            assert prev is not None and s.reading is not None  # an indexed row, its ACL read
            stat: dict[str, Any] = {"size": item.size, "mtime": item.mtime, "etag": item.etag} if d.touch else {}
            self.rights.acl_only(connector, item, prev, collection, s.reading, rep, **stat)
        else:  # pragma: no cover - READ_* and REINDEX are never settled
            raise AssertionError(d.action)

    # ------------------------------------------------------------------------------------------
    def refresh_acls(
        self, connector: Connector, paths: Iterable[str] | None = None, *, should_stop: StopFn | None = None,
    ) -> PassReport:
        """The rights-only refresh of ``connector``'s source (every live document, or those at or
        below ``paths``), run alongside passes: :meth:`AclRefresher.refresh
        <ancre.daemon.sync.acl_refresh.AclRefresher.refresh>`."""
        return self.rights.refresh(connector, paths, should_stop=should_stop)

    def rebuild_bm25(self, should_stop: StopFn | None = None) -> int | None:
        """Rebuild and publish the BM25 snapshot: :meth:`KeywordHooks.rebuild
        <ancre.daemon.sync.bm25.KeywordHooks.rebuild>` (the new generation, ``None`` when stopped)."""
        return self.keywords.rebuild(should_stop)

    def maintain_index(self, should_stop: StopFn | None = None, *, force: bool = False) -> list[object]:
        """Build the store's indexes if it keeps them apart from its writes
        (:class:`~ancre.index.store.Maintainable`: the embedded store's HNSW builds, in a separate
        process, queries going on) and they need it (``force``: now); blocking. Returns one report
        per build. Raises ``StoreError`` when a build fails (the live index is intact)."""
        store = self.store
        if not isinstance(store, Maintainable):
            return []
        return list(store.maintain(force=force, should_stop=should_stop))

    def purge_source(self, source_id: str) -> int:
        """Delete every indexed document of a source from the store and the state (``reindex``).
        Returns the number of documents removed."""
        items = self.state.items(source_id)
        for st in items.values():
            self.store.delete_doc(st.collection, st.doc_id)
        self.state.delete_source(source_id)
        return len(items)


def _stopped(pipe: CommitPipe, batch: list[Planned], rep: PassReport, outcome: PassOutcome, reason: str) -> bool:
    """Commit what was planned, then end the pass as ``outcome`` with ``reason``; returns ``False``."""
    pipe.submit(batch)
    pipe.wait()
    rep.outcome, rep.reason = outcome, reason
    return False


def _resolve_paths(
    connector: Connector, paths: list[str], known: dict[str, ItemState],
) -> tuple[dict[str, SourceItem], dict[str, ItemState]]:
    """``(items to sync, rows vanished)`` by ``native_id`` for the event paths ``paths`` (see
    :meth:`SyncEngine.sync_paths`). Raises ``SourceUnavailableError``."""
    by_path = {st.path: st for st in known.values()}
    items: dict[str, SourceItem] = {}
    vanished: dict[str, ItemState] = {}
    for p in paths:
        item = connector.get_item(p)
        if item is not None:
            items[item.native_id] = item
            continue
        rows = [by_path[p]] if p in by_path else []
        rows += [st for st in known.values() if st.path.startswith(p + "/")]
        for st in rows:
            cur = connector.get_item(st.path)
            if cur is not None:
                items[cur.native_id] = cur
            else:
                vanished[st.native_id] = st
        for sub in items_under(connector, p):
            items[sub.native_id] = sub
    for nid in items:
        vanished.pop(nid, None)
    return items, vanished
