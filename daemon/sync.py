"""The sync engine (docs/ARCHITECTURE.md "Data flow of indexing"): diff a source's listing against the state DB and bring
the store in line — content change → re-embed; ACL-only change → payload update with zero
embeddings; vanished → points deleted; mass-deletion guard; BM25 rebuilt after any change.

Crash safety: before the store is touched for a document its state row is set to ``pending``;
the row becomes ``indexed`` only after the store confirmed. A pass interrupted anywhere is
reconciled by the next one: pending rows are re-done (point ids are deterministic, so upserts are
idempotent) or purged if their file vanished. Documents to embed are written in batches (up to
32 documents / 128 chunks; a document with more chunks goes alone, embedded and upserted 128
chunks at a time, so memory stays bounded whatever its size), each batch embedded and written on
a thread of its own while the next files are extracted (:class:`_CommitPipe`, one batch in
flight): every row of a batch is ``pending`` before its first upsert. A document's points always have ``chunk_index`` below the
chunk count of its state row (pending rows record the larger of the old and new counts).

No poison pill: a document whose extraction times out or crashes, or whose indexing died half-way
(a ``pending`` row found again), is tried at most ``sync.max_attempts`` times per version, with
``sync.retry_backoff_s`` doubling between failed tries; it then stays ``failed`` with its reason
until its content changes (or a new extractor version, ``--force``). Failures that are properties
of the file (corrupt, encrypted, too large…) are not retried at all until then.

Three entry points: :meth:`SyncEngine.run_pass` (a full reconciliation),
:meth:`SyncEngine.sync_paths` (only the paths an event named, for the daemon) and
:meth:`SyncEngine.refresh_acls` (rights only, run by the daemon's rights thread *while* a pass
embeds: a revocation never waits behind content work). Passes and path syncs are serialised; a
refresh runs alongside them. Every ACL written to the store (upserts included) goes through the
process's one ACL writer (:class:`~ancre.index.acl_writer.AclWriter`, shared with the query core's
live rights check): each reading takes a ticket before it is read at the source, writes happen
under the writer's lock, and a document whose reading is older than the latest refresh of its
source or than another recorded reading (the live check's) has its ACL re-read before it is
written — so an ACL read before a revocation is never written after it. Test-only crash
points (:mod:`ancre.daemon.faults`) mark the places a ``kill -9`` is simulated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ancre.acl.engine import acl_problem
from ancre.config import Settings
from ancre.connectors.base import Connector, LocalTree, PermissionSweep, SubtreeListing
from ancre.daemon.faults import crash_point
from ancre.errors import ConfigError, EmbedderError, ExtractionError, SourceUnavailableError, StoreError
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Entry, Bm25Index, Bm25Manager
from ancre.index.embedders import Embedder
from ancre.index.state import ItemState, StateDB
from ancre.index.store import KeywordStore, Maintainable, PointWrite, Store
from ancre.ingest.chunking import chunk_blocks
from ancre.ingest.extract import extractor_version
from ancre.ingest.worker import ExtractionPool
from ancre.models import COLLECTIONS, Acl, Block, Chunk, ChunkPayload, ItemStatus, PassOutcome, PassScope, SourceItem, nfc

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("ancre.sync")

SKIP_REASONS = frozenset({"encrypted", "empty", "too_large", "unsupported", "no_text_layer"})
"""Extraction outcomes recorded as status ``skipped`` (a property of the file, not an error);
every other extraction error is ``failed``."""

RETRYABLE_REASONS = frozenset({"timeout", "crashed", "error"})
"""Failures that may be transient (a busy machine, a worker killed by the OOM killer, a bug hit
by a rare path): retried with backoff up to ``sync.max_attempts`` times per version."""


def skip_reason_key(reason: str | None) -> str:
    """The group a skipped document is counted under in ``ancre status``: the reason code
    (``no_text_layer``, ``empty``, ``encrypted``, ``too_large``…) without the per-file detail
    (page counts, sizes); for ``unsupported``, the code with its detail, so that
    ``unsupported: legacy .doc (…)`` and each unsupported extension are counted apart.
    ``"unsupported: extension '.png'"`` → itself; ``"no_text_layer: 3 of 3 pages…"`` →
    ``"no_text_layer"``; ``None`` → ``"(none)"``."""
    if not reason:
        return "(none)"
    code, _, detail = reason.partition(":")
    code = code.strip()
    if code == "unsupported" and detail.strip():
        return f"{code}: {detail.strip()}"
    return code


@dataclass
class PassReport:
    """Outcome of one pass over one source. Counts are documents unless named ``chunks``."""

    source: str
    outcome: PassOutcome = PassOutcome.OK
    """``ok``; ``partial`` (full pass done except under subtrees the connector reported
    unreachable, e.g. dead DFS links: nothing purged under them, ``reason`` names them);
    ``suspect`` (root unreachable or mass deletion: nothing purged); ``interrupted`` (stop
    requested: nothing purged); ``error`` (an exception stopped the pass — store or embedder
    down —; ``reason`` says which; what was committed stays)."""
    scope: PassScope = PassScope.FULL
    """``full`` (:meth:`SyncEngine.run_pass`), ``paths`` (:meth:`SyncEngine.sync_paths`) or ``acl``
    (:meth:`SyncEngine.refresh_acls`)."""
    reason: str | None = None
    listed: int = 0
    new: int = 0
    changed: int = 0
    acl_only: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0
    skipped: int = 0
    acl_unreadable: int = 0
    """Documents listed in this pass whose ACL could not be read, parsed or understood
    (:func:`~ancre.acl.engine.acl_problem`): indexed, but readable by nobody until it can."""
    embedded_chunks: int = 0
    bm25_generation: int | None = None
    duration_s: float = 0.0
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    """``(path, status, reason)`` for every failed or skipped item, and ``(path,
    "acl_unreadable", reason)`` for every document counted in ``acl_unreadable``."""

    @property
    def changed_index(self) -> bool:
        """Whether the store was modified by this pass."""
        return bool(self.new or self.changed or self.acl_only or self.deleted)

    def to_json(self) -> str:
        """JSON summary (for the state DB and ``--json`` output)."""
        return json.dumps(asdict(self), ensure_ascii=False)


ProgressFn = Callable[[str, int, int], None]
"""``progress(path, done, total)`` callback for progress bars."""

_BATCH_DOCS = 32
_BATCH_CHUNKS = 128
"""Documents to embed are written in batches of at most this many documents or chunks; one
embedder call and one upsert never hold more than ``_BATCH_CHUNKS`` chunks."""


@dataclass(frozen=True, kw_only=True)
class _Planned:
    """A document whose content was extracted and chunked, waiting to be embedded and written."""

    item: SourceItem
    prev: ItemState | None
    collection: str
    acl: Acl
    acl_hash: str
    content_hash: str
    chunks: list[Chunk]
    epoch: int
    """The ticket taken before ``acl`` was read (:meth:`AclWriter.ticket <ancre.index.acl_writer.AclWriter.ticket>`)."""


class SyncEngine:
    """Runs passes. ``store`` must be opened with ``embedder``; ``bm25`` receives a new generation
    after any pass that changed the index. Passes are serialised by an internal lock.
    ``acl_writer``: the process's ACL writer, shared with the query core's live rights check
    (default: one of its own over ``store`` and ``state``)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        embedder: Embedder,
        state: StateDB,
        bm25: Bm25Manager,
        pool: ExtractionPool,
        *,
        acl_writer: AclWriter | None = None,
        overlap: bool = True,
    ) -> None:
        """``overlap``: embed and write each batch on a thread of its own while the next files
        are extracted (:class:`_CommitPipe`); ``False``: one after the other (the benchmark's
        baseline)."""
        self.overlap = overlap
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.state = state
        self.bm25 = bm25
        self.pool = pool
        self._lock = threading.RLock()
        self.acl = acl_writer if acl_writer is not None else AclWriter(store, state)
        """The ACL writer owning the order of every ACL written (see the module doc)."""
        self._acl_mu = self.acl.lock
        """Held around every store write that sets ACLs (upserts, ``set_acl``)."""

    def _epoch(self, source: str) -> int:
        """A ticket for an ACL about to be read at ``source``."""
        return self.acl.ticket()

    def _acl_only(
        self,
        connector: Connector,
        item: SourceItem,
        prev: ItemState,
        collection: str,
        acl: Acl,
        epoch: int,
        rep: PassReport,
        **row: object,
    ) -> None:
        """An indexed document whose content is unchanged: its ACL (re-read if a rights refresh
        started since ``epoch``) written to the store when it changed (zero embeddings), its row
        updated with the ACL digest, the ACL problem if any, and ``row`` (new stat fields)."""
        with self._acl_mu:
            acl, epoch = self._current_acl(connector, item, acl, epoch)
            acl_hash = acl.digest()
            acl_issue = acl_problem(acl)
            changed = prev.acl_hash != acl_hash
            if changed:
                self.store.set_acl(collection, item.doc_id, acl)
                rep.acl_only += 1
            else:
                rep.unchanged += 1
            if changed or row or prev.reason != acl_issue or prev.path != item.path:
                self.state.put(
                    _replace(prev, acl_hash=acl_hash, path=item.path, reason=acl_issue, updated_at=time.time(), **row)
                )
            self.acl.observe(item.source, item.doc_id, epoch)
        self._count_acl_problem(rep, item.path, acl_issue)

    def _current_acl(self, connector: Connector, item: SourceItem, acl: Acl, epoch: int) -> tuple[Acl, int]:
        """``(acl, epoch)`` if that reading (ticket ``epoch``) is still the newest
        (:meth:`AclWriter.current <ancre.index.acl_writer.AclWriter.current>`), else the ACL
        re-read now with its new ticket. Called with ``_acl_mu`` held."""
        if self.acl.current(item.source, item.doc_id, epoch):
            return acl, epoch
        ticket = self.acl.ticket()
        return connector.fetch_acl(item), ticket

    # ------------------------------------------------------------------------------------------
    def run_pass(
        self,
        connector: Connector,
        *,
        rebuild_bm25: bool = True,
        force: bool = False,
        progress: ProgressFn | None = None,
        should_stop: Callable[[], bool] | None = None,
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
                self._run(connector, rep, force=force, progress=progress, should_stop=should_stop)
                if rebuild_bm25 and (rep.changed_index or self._bm25_stale()):
                    rep.bm25_generation = self.rebuild_bm25()
            except BaseException as e:  # recorded, then raised: the pass never stays open
                rep.outcome, rep.reason = PassOutcome.ERROR, f"{type(e).__name__}: {e}"[:500]
                raise
            finally:
                rep.duration_s = time.monotonic() - t0
                self.state.end_pass(pass_id, rep.outcome, rep.to_json())
            log.info("pass done", extra={"report": asdict(rep)})
            return rep

    def _run(
        self,
        connector: Connector,
        rep: PassReport,
        *,
        force: bool,
        progress: ProgressFn | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        try:
            listed = connector.list_items()
            if force and isinstance(connector, PermissionSweep):
                connector.sweep_permissions()  # its fetch_acl answers from them: re-read them all now
        except SourceUnavailableError as e:
            rep.outcome, rep.reason = PassOutcome.SUSPECT, str(e)
            return
        listing, unreachable = listed.items, listed.unreachable_paths
        rep.listed = len(listing)
        known = self.state.items(connector.source_id)
        if not self._sync_items(connector, listing, known, rep, force=force, progress=progress, should_stop=should_stop):
            return
        seen = {item.native_id for item in listing}
        kept = tuple(p.strip("/") + "/" for p in unreachable)
        vanished = [
            st for nid, st in known.items()
            if nid not in seen and not st.path.startswith(kept) and "/" not in kept  # "" = the root: keep all
        ]
        self._purge(vanished, len(known), rep)
        if unreachable and rep.outcome == PassOutcome.OK:
            rep.outcome = PassOutcome.PARTIAL
            rep.reason = f"unreachable, left as indexed: {', '.join(unreachable)}"

    def _bm25_stale(self) -> bool:
        """Whether the published BM25 snapshot is missing or unusable (another tokenizer version,
        damaged files), so that even a pass that changed nothing rebuilds it. Reads the snapshot
        from disk with a fresh manager: the in-memory copy may hide a damaged current file. An
        empty store needs no snapshot."""
        if Bm25Manager(self.bm25.index_dir).is_current():
            return False
        return any(self.store.count(c) for c in COLLECTIONS)

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
        should_stop: Callable[[], bool] | None = None,
        progress: ProgressFn | None = None,
    ) -> PassReport:
        """Re-sync only the given relative POSIX paths of ``connector``'s source (event-driven).

        Each path is, in this order: a file the connector lists (``get_item``) → synced like in a
        full pass (new, changed, ACL-only, unchanged, failed); otherwise every known document at
        that path or under ``path/`` (a former folder) is re-checked one by one and purged if the
        connector no longer lists it; and an existing folder's files (see :func:`_items_under`)
        are synced. Empty, absolute and ``..`` paths are ignored.

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
                self._sync_paths(connector, wanted, rep, should_stop=should_stop, progress=progress)
                if rebuild_bm25 and (rep.changed_index or self._bm25_stale()):
                    rep.bm25_generation = self.rebuild_bm25()
            finally:
                rep.duration_s = time.monotonic() - t0
            log.info("paths synced", extra={"report": asdict(rep), "paths": len(wanted)})
            return rep

    def _sync_paths(
        self,
        connector: Connector,
        paths: list[str],
        rep: PassReport,
        *,
        should_stop: Callable[[], bool] | None,
        progress: ProgressFn | None = None,
    ) -> None:
        known = self.state.items(connector.source_id)
        by_path = {st.path: st for st in known.values()}
        items: dict[str, SourceItem] = {}
        vanished: dict[str, ItemState] = {}
        try:
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
                for sub in _items_under(connector, p):
                    items[sub.native_id] = sub
        except SourceUnavailableError as e:
            rep.outcome, rep.reason = PassOutcome.SUSPECT, str(e)
            return
        rep.listed = len(items)
        for nid in items:
            vanished.pop(nid, None)
        if not self._sync_items(
            connector, list(items.values()), known, rep, force=False, should_stop=should_stop, progress=progress
        ):
            return
        self._purge(list(vanished.values()), len(known), rep)

    def _max_bytes(self, source_id: str) -> int:
        try:
            return int(self.settings.source(source_id).max_size_mb * 1024 * 1024)
        except ConfigError:  # a connector built outside the settings: the default 50 MB
            return 50 * 1024 * 1024

    # ------------------------------------------------------------------------------------------
    def _sync_items(
        self,
        connector: Connector,
        items: Sequence[SourceItem],
        known: dict[str, ItemState],
        rep: PassReport,
        *,
        force: bool,
        should_stop: Callable[[], bool] | None,
        progress: ProgressFn | None = None,
    ) -> bool:
        """Sync ``items`` in order (``known``: state rows by ``native_id``). Documents to embed are
        committed in batches (up to ``_BATCH_DOCS`` documents or ``_BATCH_CHUNKS`` chunks: one
        embedder call and one store upsert per collection for many small files). Returns
        ``False`` when ``should_stop`` turned true (what was planned is committed first)."""
        max_bytes = self._max_bytes(connector.source_id)
        batch: list[_Planned] = []
        n_chunks = 0
        pipe = _CommitPipe(self, connector, rep)
        try:
            for i, item in enumerate(items):
                if should_stop is not None and should_stop():
                    pipe.submit(batch)
                    pipe.wait()
                    rep.outcome, rep.reason = PassOutcome.INTERRUPTED, "stop requested"
                    return False
                if progress is not None:
                    progress(item.path, i, len(items))
                prev = known.get(item.native_id)
                try:
                    planned = self._plan_item(connector, item, prev, rep, force=force, max_bytes=max_bytes)
                except SourceUnavailableError as e:
                    # the source went away mid-pass: keep what was done, purge nothing, retry later
                    pipe.submit(batch)
                    pipe.wait()
                    rep.outcome, rep.reason = PassOutcome.SUSPECT, f"source unreachable during the pass: {e}"
                    return False
                except (StoreError, EmbedderError, sqlite3.Error):
                    raise  # the index itself is in trouble: stop the pass (recorded as "error")
                except Exception as e:  # this one item hit a bug: it fails, the pass goes on
                    log.exception("sync of %s failed", item.path)
                    self._record_failure(
                        item, prev, connector.collection_for(item), None, rep,
                        ExtractionError("error", f"{type(e).__name__}: {e}"[:300]), None,
                    )
                    continue
                if planned is None:
                    continue
                batch.append(planned)
                n_chunks += len(planned.chunks)
                if len(batch) >= _BATCH_DOCS or n_chunks >= _BATCH_CHUNKS:
                    pipe.submit(batch)  # embedded and written while the next files are extracted
                    batch, n_chunks = [], 0
            pipe.submit(batch)
            pipe.wait()
            return True
        finally:
            pipe.wait(raise_error=False)

    def _plan_item(
        self,
        connector: Connector,
        item: SourceItem,
        prev: ItemState | None,
        rep: PassReport,
        *,
        force: bool,
        max_bytes: int,
    ) -> _Planned | None:
        """Everything up to embedding: ACL-only updates, unchanged items, size limit, content
        hash, retry policy, extraction and chunking are settled here (``None``); a document whose
        chunks must be (re-)embedded is returned for :meth:`_commit`."""
        collection = connector.collection_for(item)
        if item.skip is not None:  # a link not followed: reported, never read (its old points go)
            self._record_problem(item, prev, collection, "", rep, ItemStatus.SKIPPED, item.skip, drop=True)
            return None
        epoch = self._epoch(item.source)
        acl = connector.fetch_acl(item)
        acl_hash = acl.digest()
        same_stat = (
            prev is not None
            and prev.size == item.size
            and prev.mtime == item.mtime
            and prev.etag == item.etag
            and prev.collection == collection
            and prev.path == item.path  # a rename keeps id, size and mtime: payload must follow
        )
        if prev is not None and prev.collection != collection:
            self.store.delete_doc(prev.collection, prev.doc_id)

        if item.size > max_bytes:
            self._record_problem(
                item, prev, collection, acl_hash, rep, ItemStatus.SKIPPED,
                f"too_large: {item.size / 2**20:.1f} MiB > sources.{item.source}.max_size_mb ({max_bytes / 2**20:g})",
                drop=True,
            )
            return None

        if same_stat and not force and prev is not None:
            if prev.status in (ItemStatus.FAILED, ItemStatus.SKIPPED) and not self._may_retry(prev):
                self._count_problem(rep, item.path, prev.status, prev.reason or "")
                return None
            if prev.status == ItemStatus.INDEXED:
                self._acl_only(connector, item, prev, collection, acl, epoch, rep)
                return None
            # pending: a previous pass died half-way → redo below (or give up, see below)

        try:
            data = connector.fetch_content(item)
        except OSError as e:
            # Unreadable now: keep what is indexed (it may be a transient error), report it.
            self._count_problem(rep, item.path, ItemStatus.FAILED, f"unreadable: {e}")
            return None
        content_hash = hashlib.sha256(data).hexdigest()

        if (
            prev is not None
            and prev.status == ItemStatus.INDEXED
            and prev.content_hash == content_hash
            and prev.collection == collection
            and prev.path == item.path
        ):
            # touched but identical bytes: no re-embedding
            self._acl_only(
                connector, item, prev, collection, acl, epoch, rep, size=item.size, mtime=item.mtime, etag=item.etag
            )
            return None
        same_version = prev is not None and prev.content_hash == content_hash
        if (
            same_version and prev is not None and not force
            and prev.status in (ItemStatus.FAILED, ItemStatus.SKIPPED) and not self._may_retry(prev)
        ):
            # touched but identical bytes of a document that failed: same outcome, no new try
            self.state.put(_replace(prev, size=item.size, mtime=item.mtime, etag=item.etag, acl_hash=acl_hash, path=item.path))
            self._count_problem(rep, item.path, prev.status, prev.reason or "")
            return None
        if (
            same_version and prev is not None and prev.status == ItemStatus.PENDING
            and prev.attempts >= self.settings.sync.max_attempts
        ):
            # indexing this version died half-way max_attempts times (the process was killed): a poison pill
            self._record_problem(
                item, prev, collection, acl_hash, rep, ItemStatus.FAILED,
                f"crashed: indexing stopped half-way {prev.attempts} times (the process died); "
                "tried again when the file changes",
                drop=True, content_hash=content_hash, attempts=prev.attempts,
            )
            return None

        try:
            crash_point("extract")
            blocks = self.pool.extract(data, item.filename)
            del data  # the bytes are not kept while chunking (peak memory)
            chunks = self._chunks_of(item, blocks)
        except ExtractionError as e:
            self._record_failure(item, prev, collection, acl_hash, rep, e, content_hash)
            return None

        return _Planned(
            item=item, prev=prev, collection=collection, acl=acl, acl_hash=acl_hash, content_hash=content_hash,
            chunks=chunks, epoch=epoch,
        )

    def _chunks_of(self, item: SourceItem, blocks: tuple[Block, ...]) -> list[Chunk]:
        """The chunks of ``item``'s extracted ``blocks``. Raises
        :class:`~ancre.errors.ExtractionError` (``empty``: no text; ``too_large``: over
        ``extraction.max_chunks`` chunks)."""
        chunks = chunk_blocks(item.doc_id, blocks, self.settings.chunking.target_chars, self.settings.chunking.overlap_chars)
        if not chunks:
            raise ExtractionError("empty", "no text found")
        max_chunks = self.settings.extraction.max_chunks
        if len(chunks) > max_chunks:
            raise ExtractionError("too_large", f"{len(chunks)} chunks > extraction.max_chunks ({max_chunks})")
        return chunks

    def _may_retry(self, prev: ItemState) -> bool:
        """Whether a ``failed``/``skipped`` row of an unchanged document is tried again now:
        another extractor version than the one that failed, or a transient failure (see
        :data:`RETRYABLE_REASONS`) with tries left whose backoff has expired."""
        if prev.extractor != extractor_version():
            return True
        reason = (prev.reason or "").split(":", 1)[0]
        return (
            prev.status == ItemStatus.FAILED
            and reason in RETRYABLE_REASONS
            and prev.attempts < self.settings.sync.max_attempts
            and time.time() >= (prev.retry_at or 0.0)
        )

    def _record_failure(
        self, item: SourceItem, prev: ItemState | None, collection: str, acl_hash: str | None,
        rep: PassReport, error: ExtractionError, content_hash: str | None,
    ) -> None:
        """Record an extraction (or indexing) failure: ``skipped`` for :data:`SKIP_REASONS`, else
        ``failed``; a transient failure counts one more try of this version and, with tries left,
        gets a ``retry_at`` (``sync.retry_backoff_s`` doubled per try)."""
        status = ItemStatus.SKIPPED if error.reason in SKIP_REASONS else ItemStatus.FAILED
        reason = error.reason if not error.detail else f"{error.reason}: {error.detail}"
        attempts, retry_at = 0, None
        if error.reason in RETRYABLE_REASONS:
            same = prev is not None and content_hash is not None and prev.content_hash == content_hash
            attempts = (prev.attempts if same and prev is not None else 0) + 1
            cfg = self.settings.sync
            if attempts < cfg.max_attempts:
                retry_at = time.time() + cfg.retry_backoff_s * 2 ** (attempts - 1)
                reason += f" (try {attempts} of {cfg.max_attempts})"
            else:
                attempts = max(attempts, cfg.max_attempts)
                reason += f" (gave up after {attempts} tries; tried again when the file changes)"
        self._record_problem(
            item, prev, collection, acl_hash, rep, status, reason, drop=True, content_hash=content_hash,
            attempts=attempts, retry_at=retry_at,
        )

    def _commit(self, connector: Connector, batch: list[_Planned], rep: PassReport) -> None:
        """Embed and write a batch of planned documents.

        Order (crash safety): every document's row becomes ``pending`` (with the larger of its old
        and new chunk counts, and one more try counted when it was already ``pending``: a previous
        try died half-way) → chunks embedded and upserted ``_BATCH_CHUNKS`` at a time (one
        embedder call, one upsert per collection each) → each document's chunks beyond its new
        count deleted (only when it had more: a document's points always have ``chunk_index``
        below its recorded count) → each row ``indexed``. When an exception (store or embedder
        down) stops it, the pending rows get their former try count back: that is not the
        document's fault.
        """
        if not batch:
            return
        pending: list[ItemState] = []
        for p in batch:
            it = p.item
            retried = p.prev is not None and p.prev.status == ItemStatus.PENDING and p.prev.content_hash == p.content_hash
            tries = (p.prev.attempts if retried and p.prev is not None else 0) + 1
            row = ItemState(
                source=it.source, native_id=it.native_id, path=it.path, doc_id=it.doc_id, collection=p.collection,
                size=it.size, mtime=it.mtime, etag=it.etag, content_hash=p.content_hash, acl_hash=None,
                chunk_count=max(len(p.chunks), p.prev.chunk_count if p.prev else 0), status=ItemStatus.PENDING,
                reason=None, updated_at=time.time(), attempts=tries,
            )
            self.state.put(row)
            pending.append(row)
        try:
            batch = self._write_chunks(connector, batch, rep)
        except BaseException:
            for row in pending:
                self.state.put(_replace(row, attempts=row.attempts - 1))
            raise
        crash_point("after_upsert")
        now = time.time()
        with self._acl_mu:  # a rights refresh since the last slice: the rows get the re-read ACL
            for p in self._refreshed(connector, batch):
                it = p.item
                if p.prev is not None and p.prev.chunk_count > len(p.chunks):
                    self.store.delete_doc(p.collection, it.doc_id, from_chunk_index=len(p.chunks))
                acl_issue = acl_problem(p.acl)
                self.state.put(
                    ItemState(
                        source=it.source, native_id=it.native_id, path=it.path, doc_id=it.doc_id,
                        collection=p.collection, size=it.size, mtime=it.mtime, etag=it.etag,
                        content_hash=p.content_hash, acl_hash=p.acl_hash, chunk_count=len(p.chunks),
                        status=ItemStatus.INDEXED, reason=acl_issue, updated_at=now,
                    )
                )
                self._count_acl_problem(rep, it.path, acl_issue)
                if p.prev is None or p.prev.status != ItemStatus.INDEXED:
                    rep.new += 1
                else:
                    rep.changed += 1

    def _refreshed(self, connector: Connector, batch: list[_Planned]) -> list[_Planned]:
        """``batch`` with the ACL of each document re-read when a rights refresh of its source
        started since it was read (``_acl_mu`` held); the points already written for a document
        whose ACL changed get the new one (:meth:`Store.set_acl`), so no point keeps an ACL read
        before a revocation."""
        out: list[_Planned] = []
        for p in batch:
            acl, ticket = self._current_acl(connector, p.item, p.acl, p.epoch)
            if ticket == p.epoch:
                out.append(p)
                continue
            fresh = _replace_planned(p, acl=acl, acl_hash=acl.digest(), epoch=ticket)
            if fresh.acl_hash != p.acl_hash:
                self.store.set_acl(p.collection, p.item.doc_id, acl)
                self.acl.observe(p.item.source, p.item.doc_id, ticket)
            out.append(fresh)
        return out

    def _write_chunks(self, connector: Connector, batch: list[_Planned], rep: PassReport) -> list[_Planned]:
        """Embed and upsert the chunks of ``batch``, ``_BATCH_CHUNKS`` at a time. Embedding runs
        unlocked; each slice is written under ``_acl_mu`` with the documents' ACLs re-read if a
        rights refresh started meanwhile (:meth:`_refreshed`). Returns ``batch`` with those ACLs."""
        now = time.time()
        current = {p.item.doc_id: p for p in batch}
        work = [(p.item.doc_id, c) for p in batch for c in p.chunks]
        locations = {p.item.doc_id: connector.location(p.item) for p in batch}
        for start in range(0, len(work), _BATCH_CHUNKS):
            part = work[start : start + _BATCH_CHUNKS]
            vectors = self.embedder.embed_documents([c.text for _, c in part])
            rep.embedded_chunks += len(vectors)
            with self._acl_mu:
                for p in self._refreshed(connector, [current[d] for d in dict.fromkeys(d for d, _ in part)]):
                    current[p.item.doc_id] = p
                self._upsert_slice(part, vectors, current, locations, now)
                for d in dict.fromkeys(d for d, _ in part):
                    self.acl.observe(current[d].item.source, d, current[d].epoch)
        return [current[p.item.doc_id] for p in batch]

    def _upsert_slice(
        self,
        part: list[tuple[str, Chunk]],
        vectors: np.ndarray,
        current: dict[str, _Planned],
        locations: dict[str, str],
        now: float,
    ) -> None:
        """One upsert per collection of the chunks ``part`` (``(doc_id, chunk)``) with their
        ``vectors`` (``(len(part), d)`` float32), each with its document's current ACL."""
        by_collection: dict[str, list[PointWrite]] = {}
        for (doc_id, c), vector in zip(part, vectors, strict=True):
            p = current[doc_id]
            it, acl = p.item, p.acl
            by_collection.setdefault(p.collection, []).append(
                PointWrite(
                    c.point_id,
                    vector,
                    ChunkPayload(
                        source=it.source, doc_id=it.doc_id, path=it.path, filename=it.filename,
                        location=locations[doc_id], chunk_index=c.chunk_index, text=c.text,
                        acl_allow=tuple(sorted(acl.allow)), acl_deny=tuple(sorted(acl.deny)),
                        acl_grants=acl.grants_payload(),
                        content_hash=p.content_hash, indexed_at=now, heading_path=c.heading_path,
                        collection=p.collection, ocr=c.ocr, modified_at=it.mtime,
                    ),
                )
            )
        for collection, points in by_collection.items():
            self.store.upsert(collection, points)

    def _record_problem(
        self,
        item: SourceItem,
        prev: ItemState | None,
        collection: str,
        acl_hash: str | None,
        rep: PassReport,
        status: ItemStatus,
        reason: str,
        *,
        drop: bool,
        content_hash: str | None = None,
        attempts: int = 0,
        retry_at: float | None = None,
    ) -> None:
        if drop and prev is not None and prev.status in (ItemStatus.INDEXED, ItemStatus.PENDING):
            # the file no longer yields valid content: its old chunks must not answer questions
            self.store.delete_doc(prev.collection, item.doc_id)
        self.state.put(
            ItemState(
                source=item.source, native_id=item.native_id, path=item.path, doc_id=item.doc_id,
                collection=collection, size=item.size, mtime=item.mtime, etag=item.etag,
                content_hash=content_hash, acl_hash=acl_hash, chunk_count=0, status=status, reason=reason,
                updated_at=time.time(), attempts=attempts, retry_at=retry_at, extractor=extractor_version(),
            )
        )
        self._count_problem(rep, item.path, status, reason)

    @staticmethod
    def _count_acl_problem(rep: PassReport, path: str, issue: str | None) -> None:
        if issue is not None:
            rep.acl_unreadable += 1
            rep.problems.append((path, "acl_unreadable", issue))

    @staticmethod
    def _count_problem(rep: PassReport, path: str, status: ItemStatus, reason: str) -> None:
        if status == ItemStatus.SKIPPED:
            rep.skipped += 1
        else:
            rep.failed += 1
        rep.problems.append((path, status, reason))

    # ------------------------------------------------------------------------------------------
    def refresh_acls(
        self,
        connector: Connector,
        paths: Iterable[str] | None = None,
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> PassReport:
        """Re-read the ACL of every ``indexed`` or ``pending`` document of ``connector``'s source
        (``paths`` ``None``), or of those at or below ``paths``, and overwrite the ACL payload of
        the points whose ACL changed — no content read, no embedding. Runs alongside
        :meth:`run_pass`/:meth:`sync_paths` (see the module doc): a document being embedded
        meanwhile gets the re-read ACL when it is written.

        A full refresh (``paths`` ``None``: the daemon's ACL sweep, a manifest edit) of a
        :class:`~ancre.connectors.base.PermissionSweep` connector re-reads every permission at the
        source first (its ``fetch_acl`` answers from those read earlier).

        Returns a report with ``scope = "acl"`` (``acl_only``: documents whose rights changed;
        ``unchanged``); ``suspect`` when the source can't be reached (no right is changed from
        then on: an outage never revokes or grants). Not recorded in the ``passes`` table.
        """
        t0 = time.monotonic()
        source = connector.source_id
        rep = PassReport(source=source, scope=PassScope.ACL)
        self.acl.begin_refresh(source)
        wanted = None if paths is None else [p for p in (clean_rel_path(x) for x in paths) if p is not None]
        rows = [
            st for st in self.state.items(source).values()
            if st.status in (ItemStatus.INDEXED, ItemStatus.PENDING)
            and (wanted is None or any(st.path == p or st.path.startswith(p + "/") for p in wanted))
        ]
        rep.listed = len(rows)
        try:
            if wanted is None and isinstance(connector, PermissionSweep):
                connector.sweep_permissions()  # a full refresh (the ACL sweep) reads them at the source
            for st in rows:
                if should_stop is not None and should_stop():
                    rep.outcome, rep.reason = PassOutcome.INTERRUPTED, "stop requested"
                    break
                item = SourceItem(st.source, st.native_id, st.path, st.size, st.mtime, st.etag)
                ticket = self.acl.ticket()
                acl = connector.fetch_acl(item)
                acl_hash = acl.digest()
                with self._acl_mu:
                    cur = self.state.get(st.source, st.native_id)
                    if cur is None or cur.status not in (ItemStatus.INDEXED, ItemStatus.PENDING):
                        continue
                    if not self.acl.current(cur.source, cur.doc_id, ticket):
                        rep.unchanged += 1  # a newer reading (the live check's) was written meanwhile: it stands
                        continue
                    if cur.status == ItemStatus.INDEXED and cur.acl_hash == acl_hash:
                        self.acl.observe(cur.source, cur.doc_id, ticket)
                        rep.unchanged += 1
                        continue
                    self.store.set_acl(cur.collection, cur.doc_id, acl)
                    if cur.status == ItemStatus.INDEXED:
                        self.state.set_acl_hash(cur.source, cur.doc_id, acl_hash, reason=acl_problem(acl))
                    self.acl.observe(cur.source, cur.doc_id, ticket)
                    rep.acl_only += 1
        except SourceUnavailableError as e:
            rep.outcome, rep.reason = PassOutcome.SUSPECT, f"source unreachable during the ACL refresh: {e}"
        rep.duration_s = time.monotonic() - t0
        log.info("ACLs refreshed", extra={"report": asdict(rep)})
        return rep

    # ------------------------------------------------------------------------------------------
    def rebuild_bm25(self, should_stop: Callable[[], bool] | None = None) -> int | None:
        """Rebuild the BM25 index from the store (the truth) and publish it; returns the new
        generation number, or ``None`` when ``should_stop`` turned true while reading the store
        (nothing published). Safe to call while another thread writes the store (reads are
        concurrent; the snapshot is as of the scroll). Raises ``OSError``/``StoreError``."""
        entries: list[Bm25Entry] = []
        store = self.store
        if self.settings.store.bm25 == "qdrant" and isinstance(store, KeywordStore) and store.keywords_ready:
            crash_point("bm25_publish")  # BM25 lives in the store: an empty snapshot
            return self.bm25.publish(Bm25Index.empty())
        for coll in COLLECTIONS:
            for p in self.store.scroll(coll):
                pl = p.payload
                entries.append(
                    Bm25Entry(p.id, coll, pl.text, pl.filename, pl.acl_allow, pl.acl_deny, pl.acl_grants)
                )
                if should_stop is not None and len(entries) % 1024 == 0 and should_stop():
                    return None
        index = Bm25Index.build(entries)
        crash_point("bm25_publish")
        return self.bm25.publish(index)

    def maintain_index(self, should_stop: Callable[[], bool] | None = None, *, force: bool = False) -> list[object]:
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


class _CommitPipe:
    """Embeds and writes one batch (:meth:`SyncEngine._commit`) on a thread of its own while the
    caller plans the next one (extraction in the worker process, chunking): the extraction of
    the next files overlaps the embedding of the previous ones. At most one batch is in flight
    (:meth:`submit` waits for the previous one), so memory stays that of two batches. The batch's
    counts go to a report of its own, added to the pass's report when it is done; an error
    (store or embedder down) is raised by the next :meth:`submit` or :meth:`wait`."""

    def __init__(self, engine: SyncEngine, connector: Connector, rep: PassReport) -> None:
        self._engine, self._connector, self._rep = engine, connector, rep
        self._thread: threading.Thread | None = None
        self._part: PassReport | None = None
        self._error: BaseException | None = None

    def submit(self, batch: list[_Planned]) -> None:
        """Wait for the batch in flight, then start embedding and writing ``batch`` (if any; in
        the caller's thread when the engine does not overlap)."""
        self.wait()
        if not batch:
            return
        if not self._engine.overlap:
            self._engine._commit(self._connector, batch, self._rep)
            return
        part = PassReport(source=self._rep.source, scope=self._rep.scope)

        def run() -> None:
            try:
                self._engine._commit(self._connector, batch, part)
            except BaseException as exc:  # noqa: BLE001 - everything is re-raised in the caller's thread
                self._error = exc

        self._part = part
        self._thread = threading.Thread(target=run, name="sync-commit", daemon=True)
        self._thread.start()

    def wait(self, *, raise_error: bool = True) -> None:
        """Wait for the batch in flight and add its counts to the pass's report; raise its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._part is not None:
            part, self._part = self._part, None
            rep = self._rep
            rep.new += part.new
            rep.changed += part.changed
            rep.embedded_chunks += part.embedded_chunks
            rep.acl_unreadable += part.acl_unreadable
            rep.problems.extend(part.problems)
        if self._error is not None and raise_error:
            error, self._error = self._error, None
            raise error


def clean_rel_path(path: str) -> str | None:
    """``path`` as a relative POSIX path in NFC without leading or trailing ``/`` (always read
    relative to the source root); ``None`` when it is empty or has an empty, ``.`` or ``..``
    segment (which could point outside the source)."""
    rel = nfc(path).strip("/")
    if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
        return None
    return rel


def _items_under(connector: Connector, prefix: str) -> list[SourceItem]:
    """The indexable items below the folder ``prefix`` (empty if it is not an existing folder).

    A :class:`~ancre.connectors.base.SubtreeListing` connector lists it itself; a
    :class:`~ancre.connectors.base.LocalTree` one is walked below ``root/prefix`` with each file checked by ``get_item``
    (ignore and include/exclude rules apply). Any other connector returns nothing here: its
    watcher reports files one by one and the periodic reconciliation finds the rest.
    """
    if isinstance(connector, SubtreeListing):
        return list(connector.list_under(prefix))
    if not isinstance(connector, LocalTree):
        return []
    root = connector.root
    base = root / prefix
    if base.is_symlink() or not base.is_dir():
        return []
    out: list[SourceItem] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            item = connector.get_item(rel)
            if item is not None:
                out.append(item)
    return out


def _replace_planned(p: _Planned, **kw: Any) -> _Planned:
    from dataclasses import replace

    return replace(p, **kw)


def _replace(st: ItemState, **kw: Any) -> ItemState:
    from dataclasses import replace

    return replace(st, **kw)


__all__ = ["SKIP_REASONS", "Acl", "PassReport", "SyncEngine", "skip_reason_key"]
