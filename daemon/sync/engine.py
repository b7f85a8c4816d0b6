"""The sync engine's passes (:class:`SyncEngine`): read a source's listing, decide per item
(:func:`~ancre.daemon.sync.plan.plan_item`), do what was decided, purge what vanished (with the
mass-deletion guard). Writing is :mod:`~ancre.daemon.sync.commit`, ACL updates
:mod:`~ancre.daemon.sync.acl_refresh`, BM25 :mod:`~ancre.daemon.sync.bm25`, retries
:mod:`~ancre.daemon.sync.retries`; :mod:`ancre.daemon.sync` says how they fit together."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ancre.connectors.base import Connector, Listing, PermissionSweep
from ancre.daemon.faults import crash_point
from ancre.daemon.sync.acl_refresh import AclRefresh
from ancre.daemon.sync.bm25 import Bm25Hooks
from ancre.daemon.sync.commit import BATCH_CHUNKS, BATCH_DOCS, CommitPipe, Planned, Writer
from ancre.daemon.sync.paths import clean_rel_path, items_under
from ancre.daemon.sync.plan import Action, Decision, Limits, plan_item
from ancre.daemon.sync.report import PassReport, ProgressFn
from ancre.daemon.sync.retries import Failure, RetryPolicy, code_of, failure
from ancre.errors import ConfigError, DiskFullError, EmbedderError, ExtractionError, SourceUnavailableError, StoreError
from ancre.index.disk_space import SpaceGuarded
from ancre.index.state import ItemState
from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extractor_version
from ancre.ingest.subject import chunk_header, document_subject
from ancre.models import Acl, Block, Chunk, ItemStatus, PassOutcome, PassScope, ReasonCode, SourceItem, Subject

log = logging.getLogger("ancre.sync")

StopFn = Callable[[], bool]


def _read_listing(connector: Connector, *, force: bool) -> Listing:
    """The source's listing (and, with ``force``, every permission re-read at a
    :class:`~ancre.connectors.base.PermissionSweep` source). Raises ``SourceUnavailableError``."""
    listing = connector.list_items()
    if force and isinstance(connector, PermissionSweep):
        connector.sweep_permissions()  # its fetch_acl answers from them: re-read them all now
    return listing


@dataclass(frozen=True, kw_only=True)
class _Read:
    """The facts read about one item so far: its collection, ACL (with its ticket and digest)."""

    collection: str
    acl: Acl | None = None
    acl_hash: str | None = None
    epoch: int = 0


class SyncEngine(AclRefresh, Writer, Bm25Hooks):
    """Runs passes. ``store`` must be opened with ``embedder``; ``bm25`` receives a new generation
    after any pass that changed the index. Passes are serialised by an internal lock.
    ``acl_writer``: the process's ACL writer, shared with the query core's live rights check
    (default: one of its own over ``store`` and ``state``)."""

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
                    if rebuild_bm25 and (rep.changed_index or self._bm25_stale()):
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
                    if rebuild_bm25 and (rep.changed_index or self._bm25_stale()):
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
        pipe = CommitPipe(self, connector, rep)
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
        """:meth:`_plan_item`, with an unexpected exception turned into this item's failure (the
        pass goes on); the index's own errors and ``SourceUnavailableError`` are raised."""
        try:
            return self._plan_item(connector, item, prev, rep, force=force, limits=limits)
        except (SourceUnavailableError, StoreError, EmbedderError, sqlite3.Error):
            raise  # the source or the index itself is in trouble: the pass stops
        except Exception as e:  # this one item hit a bug: it fails, the pass goes on
            log.exception("sync of %s failed", item.path)
            self._record_error(item, prev, _Read(collection=connector.collection_for(item)), rep, limits,
                               ExtractionError("error", f"{type(e).__name__}: {e}"[:300]), None)
            return None

    def _plan_item(
        self, connector: Connector, item: SourceItem, prev: ItemState | None, rep: PassReport, *,
        force: bool, limits: Limits,
    ) -> Planned | None:
        """Everything up to embedding, as :func:`~ancre.daemon.sync.plan.plan_item` decides: the
        ACL read, then the content; ACL-only updates, unchanged items, size limit, retry policy,
        extraction and chunking are settled here (``None``); a document whose chunks must be
        (re-)embedded is returned for :meth:`_commit`."""
        read = _Read(collection=connector.collection_for(item))

        def decide(*, acl_read: bool, content_hash: str | None = None) -> Decision:
            return plan_item(
                item, prev, collection=read.collection, limits=limits, now=time.time(), force=force,
                acl_read=acl_read, content_hash=content_hash,
            )

        d = decide(acl_read=False)
        if d.action is Action.READ_ACL:
            read = self._read_acl(connector, item, prev, read)
            d = decide(acl_read=True)
        if d.action is not Action.READ_CONTENT:
            self._settle(connector, item, prev, read, d, rep, None)
            return None
        try:
            data = connector.fetch_content(item)
        except OSError as e:
            # Unreadable now: keep what is indexed (it may be a transient error), report it.
            rep.count_problem(item.path, ItemStatus.FAILED, ReasonCode.UNREADABLE.text(str(e)))
            return None
        content_hash = hashlib.sha256(data).hexdigest()
        d = decide(acl_read=True, content_hash=content_hash)
        if d.action is not Action.REINDEX:
            self._settle(connector, item, prev, read, d, rep, content_hash)
            return None
        try:
            crash_point("extract")
            blocks = self.pool.extract(data, item.filename)
            del data  # the bytes are not kept while chunking (peak memory)
            subject = document_subject(blocks, item.path)
            chunks = self._chunks_of(item, blocks, subject)
        except ExtractionError as e:
            self._record_error(item, prev, read, rep, limits, e, content_hash)
            return None
        assert read.acl is not None and read.acl_hash is not None  # REINDEX comes after READ_ACL
        return Planned(
            item=item, prev=prev, collection=read.collection, acl=read.acl, acl_hash=read.acl_hash,
            content_hash=content_hash, chunks=chunks, epoch=read.epoch, subject=subject,
        )

    def _read_acl(self, connector: Connector, item: SourceItem, prev: ItemState | None, read: _Read) -> _Read:
        """``item``'s ACL read with a ticket taken first; a document that moved to another
        collection has its old points deleted."""
        epoch = self._epoch(item.source)
        acl = connector.fetch_acl(item)
        if prev is not None and prev.collection != read.collection:
            self.store.delete_doc(prev.collection, prev.doc_id)
        return replace(read, acl=acl, acl_hash=acl.digest(), epoch=epoch)

    def _settle(
        self, connector: Connector, item: SourceItem, prev: ItemState | None, read: _Read, d: Decision,
        rep: PassReport, content_hash: str | None,
    ) -> None:
        """Do what ``d`` decided for an item that needs no embedding (record, keep, ACL only)."""
        stat: dict[str, Any] = {"size": item.size, "mtime": item.mtime, "etag": item.etag} if d.touch else {}
        if d.action is Action.RECORD:
            assert d.failure is not None  # a RECORD decision carries its failure
            acl_hash = "" if read.acl_hash is None else read.acl_hash  # not read: a link not followed
            self._record_problem(item, prev, read.collection, acl_hash, rep, d.failure, content_hash=content_hash)
        elif d.action is Action.KEEP_PROBLEM:
            assert prev is not None  # a failed/skipped row
            if d.touch:  # touched but identical bytes of a document that failed: same outcome, no new try
                self.state.put(replace(prev, acl_hash=read.acl_hash, path=item.path, **stat))
            rep.count_problem(item.path, prev.status, prev.reason or "")
        elif d.action is Action.ACL_ONLY:
            assert prev is not None and read.acl is not None  # an indexed row, its ACL read
            self._acl_only(connector, item, prev, read.collection, read.acl, read.epoch, rep, **stat)
        else:  # pragma: no cover - READ_* and REINDEX are handled by the caller
            raise AssertionError(d.action)

    def _chunks_of(self, item: SourceItem, blocks: tuple[Block, ...], subject: Subject) -> list[Chunk]:
        """The chunks of ``item``'s extracted ``blocks``, each with its contextual header
        (:func:`~ancre.ingest.subject.chunk_header` of the document's ``subject``). Raises
        :class:`~ancre.errors.ExtractionError` (``empty``: no text; ``too_large``: over
        ``extraction.max_chunks`` chunks)."""
        chunks = [
            replace(c, header=chunk_header(subject, c.heading_path))
            for c in chunk_blocks(item.doc_id, blocks, self.settings.chunking.target_chars, self.settings.chunking.overlap_chars)
        ]
        if not chunks:
            raise ExtractionError("empty", "no text found")
        max_chunks = self.settings.extraction.max_chunks
        if len(chunks) > max_chunks:
            raise ExtractionError("too_large", f"{len(chunks)} chunks > extraction.max_chunks ({max_chunks})")
        return chunks

    def _record_error(
        self, item: SourceItem, prev: ItemState | None, read: _Read, rep: PassReport, limits: Limits,
        error: ExtractionError, content_hash: str | None,
    ) -> None:
        """Record an extraction (or indexing) failure as :func:`~ancre.daemon.sync.retries.failure` says."""
        code, detail = code_of(error.reason, error.detail)
        outcome = failure(code, detail, prev, content_hash, limits.retry, time.time())
        self._record_problem(item, prev, read.collection, read.acl_hash, rep, outcome, content_hash=content_hash)

    def _record_problem(
        self, item: SourceItem, prev: ItemState | None, collection: str, acl_hash: str | None, rep: PassReport,
        outcome: Failure, *, content_hash: str | None,
    ) -> None:
        """Record ``item`` as ``outcome`` says; the points of a document that no longer yields
        valid content are deleted (its old chunks must not answer questions)."""
        if prev is not None and prev.status in (ItemStatus.INDEXED, ItemStatus.PENDING):
            self.store.delete_doc(prev.collection, item.doc_id)
        self.state.put(
            ItemState(
                source=item.source, native_id=item.native_id, path=item.path, doc_id=item.doc_id,
                collection=collection, size=item.size, mtime=item.mtime, etag=item.etag,
                content_hash=content_hash, acl_hash=acl_hash, chunk_count=0,
                status=outcome.status, reason_code=outcome.reason_code, detail=outcome.detail,
                updated_at=time.time(), attempts=outcome.attempts, retry_at=outcome.retry_at,
                extractor=extractor_version(),
            )
        )
        rep.count_problem(item.path, outcome.status, outcome.reason_code.text(outcome.detail))

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
