"""The sync engine's writing (:class:`ChunkWriter`): documents to embed are written in batches (up
to 32 documents / 128 chunks; a document with more chunks goes alone, embedded and upserted 128
chunks at a time, so memory stays bounded whatever its size), each batch embedded and written on a
thread of its own while the next files are extracted (:class:`CommitPipe`, one batch in flight). A
changed document's passages that kept their exact text keep their stored vector
(:meth:`ChunkWriter._vectors`): only the new or edited passages are embedded; a copy of an indexed
file embeds nothing.

Crash safety: every row of a batch is ``pending`` before its first upsert, and becomes ``indexed``
only after the store confirmed; a document's points always have ``chunk_index`` below the chunk
count of its state row (pending rows record the larger of the old and new counts).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ancre.acl.engine import acl_problem
from ancre.connectors.base import Connector
from ancre.daemon.faults import crash_point
from ancre.daemon.sync.acl_reading import AclReader, AclReading
from ancre.daemon.sync.report import PassReport
from ancre.index.acl_writer import AclWriter
from ancre.index.embedders import Embedder
from ancre.index.state import ItemState, StateDB
from ancre.index.store import PointWrite, Store
from ancre.models import CHUNK_FORMAT, Chunk, ChunkPayload, ItemStatus, SourceItem, Subject

BATCH_DOCS = 32
BATCH_CHUNKS = 128
"""Documents to embed are written in batches of at most this many documents or chunks; one
embedder call and one upsert never hold more than ``BATCH_CHUNKS`` chunks."""


@dataclass(frozen=True, kw_only=True)
class Planned:
    """A document whose content was extracted and chunked, waiting to be embedded and written."""

    item: SourceItem
    prev: ItemState | None
    collection: str
    reading: AclReading
    """Its ACL, with the ticket taken before it was read."""
    content_hash: str
    chunks: list[Chunk]
    subject: Subject | None = None
    """Whose document it is (:func:`~ancre.ingest.subject.document_subject`), stored on every chunk."""


Commit = Callable[[Connector, list[Planned], PassReport], None]
"""``commit(connector, batch, rep)``: :meth:`ChunkWriter.commit`."""


def _pending_row(p: Planned) -> ItemState:
    """The ``pending`` row of ``p`` written before the store is touched: the larger of its old
    and new chunk counts, one more try counted when it was already ``pending`` (a previous try
    died half-way)."""
    it = p.item
    retried = p.prev is not None and p.prev.status == ItemStatus.PENDING and p.prev.content_hash == p.content_hash
    tries = (p.prev.attempts if retried and p.prev is not None else 0) + 1
    return ItemState(
        source=it.source, native_id=it.native_id, path=it.path, doc_id=it.doc_id, collection=p.collection,
        size=it.size, mtime=it.mtime, etag=it.etag, content_hash=p.content_hash, acl_hash=None,
        chunk_count=max(len(p.chunks), p.prev.chunk_count if p.prev else 0), status=ItemStatus.PENDING,
        updated_at=time.time(), attempts=tries,
    )


class ChunkWriter:
    """Embeds planned documents with ``embedder`` and writes them to ``store`` and their rows to
    ``state`` (:meth:`commit`). Every point's ACL is written under the lock of ``writer``, the
    process's one ACL writer, with the documents' ACLs read again through ``acls`` when a newer
    reading came first; a changed ACL of points already written goes through ``writer``."""

    def __init__(self, store: Store, embedder: Embedder, state: StateDB, writer: AclWriter, acls: AclReader) -> None:
        self.store = store
        self.embedder = embedder
        self.state = state
        self.writer = writer
        self.acls = acls

    def commit(self, connector: Connector, batch: list[Planned], rep: PassReport) -> None:
        """Embed and write a batch of planned documents.

        Order (crash safety): every document's row becomes ``pending`` (:func:`_pending_row`) →
        chunks embedded and upserted ``BATCH_CHUNKS`` at a time (one embedder call, one upsert
        per collection each) → each document's chunks beyond its new count deleted (only when it
        had more: a document's points always have ``chunk_index`` below its recorded count) →
        each row ``indexed``. When an exception (store or embedder down) stops it, the pending
        rows get their former try count back: that is not the document's fault.
        """
        if not batch:
            return
        pending: list[ItemState] = []
        for p in batch:
            row = _pending_row(p)
            self.state.put(row)
            pending.append(row)
        try:
            batch = self._write_chunks(connector, batch, rep)
        except BaseException:
            for row in pending:
                self.state.put(replace(row, attempts=row.attempts - 1))
            raise
        crash_point("after_upsert")
        with self.writer.hold():  # a rights refresh since the last slice: the rows get the re-read ACL
            self._mark_indexed(self._refreshed(connector, batch), rep, time.time())

    def _mark_indexed(self, batch: list[Planned], rep: PassReport, now: float) -> None:
        """Each document of ``batch`` (written) trimmed to its new chunk count, its row
        ``indexed`` with its ACL problem if any, counted as new or changed."""
        for p in batch:
            it = p.item
            if p.prev is not None and p.prev.chunk_count > len(p.chunks):
                self.store.delete_doc(p.collection, it.doc_id, from_chunk_index=len(p.chunks))
            acl_issue = acl_problem(p.reading.acl)
            self.state.put(
                ItemState(
                    source=it.source, native_id=it.native_id, path=it.path, doc_id=it.doc_id,
                    collection=p.collection, size=it.size, mtime=it.mtime, etag=it.etag,
                    content_hash=p.content_hash, acl_hash=p.reading.digest, chunk_count=len(p.chunks),
                    status=ItemStatus.INDEXED, acl_problem=acl_issue, updated_at=now, chunking=CHUNK_FORMAT,
                )
            )
            rep.count_acl_problem(it.path, acl_issue)
            if p.prev is None or p.prev.status != ItemStatus.INDEXED:
                rep.new += 1
            else:
                rep.changed += 1

    def _refreshed(self, connector: Connector, batch: list[Planned]) -> list[Planned]:
        """``batch`` with the ACL of each document read again when a newer reading (a rights
        refresh of its source) came first (the writer's lock held); the points already written
        for a document whose ACL changed get the new one through the ACL writer, so no point
        keeps an ACL read before a revocation. Its row is written next (``pending``, then
        ``indexed``), so the writer leaves the digest to it."""
        out: list[Planned] = []
        for p in batch:
            reading = self.acls.current(connector, p.item, p.reading)
            if reading is p.reading:
                out.append(p)
                continue
            if reading.digest != p.reading.digest:
                self.writer.write(p.item.source, p.collection, p.item.doc_id, reading.acl, reading.ticket, digest=False)
            out.append(replace(p, reading=reading))
        return out

    def _write_chunks(self, connector: Connector, batch: list[Planned], rep: PassReport) -> list[Planned]:
        """Embed and upsert the chunks of ``batch``, ``BATCH_CHUNKS`` at a time. Embedding runs
        unlocked; each slice is written under the ACL writer's lock with the documents' ACLs
        re-read if a rights refresh started meanwhile (:meth:`_refreshed`). Returns ``batch``
        with those ACLs."""
        now = time.time()
        current = {p.item.doc_id: p for p in batch}
        work = [(p.item.doc_id, c) for p in batch for c in p.chunks]
        locations = {p.item.doc_id: connector.location(p.item) for p in batch}
        last_slice = {doc_id: i // BATCH_CHUNKS for i, (doc_id, _) in enumerate(work)}
        stored: dict[str, dict[str, np.ndarray]] = {}
        for start in range(0, len(work), BATCH_CHUNKS):
            part = work[start : start + BATCH_CHUNKS]
            vectors = self._vectors(part, current, stored, rep)
            for d in [d for d in stored if last_slice[d] == start // BATCH_CHUNKS]:
                del stored[d]  # memory: one document's former vectors at most beyond this slice
            with self.writer.hold():
                for p in self._refreshed(connector, [current[d] for d in dict.fromkeys(d for d, _ in part)]):
                    current[p.item.doc_id] = p
                self._upsert_slice(part, vectors, current, locations, now)
                for d in dict.fromkeys(d for d, _ in part):
                    self.writer.observe(current[d].item.source, d, current[d].reading.ticket)
        return [current[p.item.doc_id] for p in batch]

    def _vectors(
        self,
        part: list[tuple[str, Chunk]],
        current: dict[str, Planned],
        stored: dict[str, dict[str, np.ndarray]],
        rep: PassReport,
    ) -> np.ndarray:
        """``(len(part), d)`` float32 vectors of the chunks ``part`` (``(doc_id, chunk)``). A chunk
        whose text is already stored for its document, or for an indexed copy of its file (same
        content hash: :meth:`~ancre.index.state.StateDB.indexed_copy`), keeps that vector
        (:meth:`~ancre.index.store.Store.vectors_of`, keyed by what was embedded: the chunk's
        header and text, :attr:`~ancre.models.Chunk.embedded`; read once per document into ``stored``): a
        one-paragraph edit of a long document embeds that paragraph's chunks, not the document,
        and a copy embeds nothing. The other texts are embedded, each distinct text once. Counted
        in ``rep.embedded_chunks`` (texts embedded) and ``rep.reused_chunks``. A vector is always
        the one of the same text by the same embedder (the store is tied to one), so the result
        equals embedding every text."""
        for doc_id in dict.fromkeys(d for d, _ in part):
            if doc_id not in stored:
                stored[doc_id] = self._stored_vectors(current[doc_id])
        found: dict[str, np.ndarray] = {}
        for doc_id, c in part:
            old = stored[doc_id].get(c.embedded)
            if old is not None:
                found[c.embedded] = old
        texts = [c.embedded for _, c in part]
        todo = [t for t in dict.fromkeys(texts) if t not in found]
        if todo:
            found.update(zip(todo, self.embedder.embed_documents(todo), strict=True))
        rep.embedded_chunks += len(todo)
        rep.reused_chunks += len(texts) - len(todo)
        return np.stack([found[t] for t in texts])

    def _stored_vectors(self, p: Planned) -> dict[str, np.ndarray]:
        """Text → stored vector for ``p``'s document: its own points, else those of an indexed
        copy of its file (``{}`` when neither has any)."""
        prev = p.prev
        if prev is not None and prev.chunk_count > 0:
            own = self.store.vectors_of(prev.collection, p.item.doc_id)
            if own:
                return own
        copy = self.state.indexed_copy(p.content_hash, p.item.doc_id)
        return self.store.vectors_of(copy.collection, copy.doc_id) if copy is not None else {}

    def _upsert_slice(
        self,
        part: list[tuple[str, Chunk]],
        vectors: np.ndarray,
        current: dict[str, Planned],
        locations: dict[str, str],
        now: float,
    ) -> None:
        """One upsert per collection of the chunks ``part`` (``(doc_id, chunk)``) with their
        ``vectors`` (``(len(part), d)`` float32), each with its document's current ACL."""
        by_collection: dict[str, list[PointWrite]] = {}
        for (doc_id, c), vector in zip(part, vectors, strict=True):
            p = current[doc_id]
            it, acl = p.item, p.reading.acl
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
                        collection=p.collection, ocr=c.ocr, modified_at=it.mtime, subject=p.subject,
                        header=c.header,
                    ),
                )
            )
        for collection, points in by_collection.items():
            self.store.upsert(collection, points)


class CommitPipe:
    """Embeds and writes one batch (``commit``: :meth:`ChunkWriter.commit`) on a thread of its own
    while the caller plans the next one (extraction in the worker process, chunking): the extraction of
    the next files overlaps the embedding of the previous ones. At most one batch is in flight
    (:meth:`submit` waits for the previous one), so memory stays that of two batches. The batch's
    counts go to a report of its own, added to the pass's report when it is done; an error
    (store or embedder down) is raised by the next :meth:`submit` or :meth:`wait`. ``overlap``
    ``False``: each batch in the caller's thread, one after the other (the benchmark's baseline)."""

    def __init__(self, commit: Commit, connector: Connector, rep: PassReport, *, overlap: bool = True) -> None:
        self._commit, self._connector, self._rep, self._overlap = commit, connector, rep, overlap
        self._thread: threading.Thread | None = None
        self._part: PassReport | None = None
        self._error: BaseException | None = None

    def submit(self, batch: list[Planned]) -> None:
        """Wait for the batch in flight, then start embedding and writing ``batch`` (if any; in
        the caller's thread when the engine does not overlap)."""
        self.wait()
        if not batch:
            return
        if not self._overlap:
            self._commit(self._connector, batch, self._rep)
            return
        part = PassReport(source=self._rep.source, scope=self._rep.scope)

        def run() -> None:
            try:
                self._commit(self._connector, batch, part)
            except BaseException as exc:  # everything is re-raised in the caller's thread
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
            self._rep.add(part)
        if self._error is not None and raise_error:
            error, self._error = self._error, None
            raise error
