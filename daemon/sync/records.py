"""The sync engine's rows of documents that are not indexed (:class:`Recorder`): a failure or a
skip recorded as :mod:`~ancre.daemon.sync.retries` says (the document's old points dropped: they
must not answer questions), an unchanged problem counted again."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ancre.daemon.sync.report import PassReport
from ancre.daemon.sync.retries import Failure, RetryPolicy, code_of, failure
from ancre.errors import ExtractionError
from ancre.index.state import ItemState, StateDB
from ancre.index.store import Store
from ancre.ingest.extract import extractor_version
from ancre.models import ItemStatus, SourceItem


class Recorder:
    """Writes the state rows of failed and skipped documents into ``state`` and drops their points
    from ``store``; ``clock``: epoch seconds (the retry backoff counts from it)."""

    def __init__(self, store: Store, state: StateDB, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.state = state
        self.clock = clock

    def record(
        self, item: SourceItem, prev: ItemState | None, collection: str, acl_hash: str | None, outcome: Failure,
        rep: PassReport, *, content_hash: str | None,
    ) -> None:
        """Record ``item`` as ``outcome`` says (``prev``: its row so far; ``acl_hash``: its ACL's
        digest, ``None`` or ``""`` when it was not read) and count it in ``rep``; the points of a
        document that no longer yields valid content are deleted."""
        if prev is not None and prev.status in (ItemStatus.INDEXED, ItemStatus.PENDING):
            self.store.delete_doc(prev.collection, item.doc_id)
        self.state.put(
            ItemState(
                source=item.source, native_id=item.native_id, path=item.path, doc_id=item.doc_id,
                collection=collection, size=item.size, mtime=item.mtime, etag=item.etag,
                content_hash=content_hash, acl_hash=acl_hash, chunk_count=0,
                status=outcome.status, reason_code=outcome.reason_code, detail=outcome.detail,
                updated_at=self.clock(), attempts=outcome.attempts, retry_at=outcome.retry_at,
                extractor=extractor_version(),
            )
        )
        rep.count_problem(item.path, outcome.status, outcome.reason_code.text(outcome.detail))

    def record_error(
        self, item: SourceItem, prev: ItemState | None, collection: str, acl_hash: str | None, error: ExtractionError,
        rep: PassReport, *, retry: RetryPolicy, content_hash: str | None,
    ) -> None:
        """Record an extraction (or indexing) failure as :func:`~ancre.daemon.sync.retries.failure`
        says under the retry policy ``retry``."""
        code, detail = code_of(error.reason, error.detail)
        outcome = failure(code, detail, prev, content_hash, retry, self.clock())
        self.record(item, prev, collection, acl_hash, outcome, rep, content_hash=content_hash)

    def keep(self, item: SourceItem, prev: ItemState, acl_hash: str | None, rep: PassReport, *, touch: bool) -> None:
        """An unchanged ``failed``/``skipped`` document not due for a retry: counted again with its
        recorded reason; with ``touch`` (touched, identical bytes), its row gets ``item``'s new
        size, mtime and etag, its path and ``acl_hash`` — the same outcome, no new try."""
        if touch:
            self.state.put(
                replace(prev, acl_hash=acl_hash, path=item.path, size=item.size, mtime=item.mtime, etag=item.etag)
            )
        rep.count_problem(item.path, prev.status, prev.reason or "")


__all__ = ["Recorder"]
