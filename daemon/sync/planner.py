"""The sync engine's planning (:class:`ItemPlanner`): what to do with one listed item, reading
only what the decision needs. It asks the pure :func:`~ancre.daemon.sync.plan.plan_item` up to
three times, handing it each fact as it is read — the ACL (with its ticket,
:class:`~ancre.daemon.sync.acl_reading.AclReader`), then the bytes' SHA-256, then the extracted
chunks (:class:`~ancre.daemon.sync.fetch.Fetcher`) — and returns either a document to embed
(:class:`~ancre.daemon.sync.commit.Planned`) or what to settle without embedding
(:class:`Settle`). It writes nothing to the state DB; the one store write it makes is dropping the
points a document left in the collection it moved out of."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ancre.connectors.base import Connector
from ancre.daemon.sync.acl_reading import AclReader, AclReading
from ancre.daemon.sync.commit import Planned
from ancre.daemon.sync.fetch import Fetcher
from ancre.daemon.sync.plan import Action, Decision, Limits, plan_item
from ancre.daemon.sync.report import PassReport
from ancre.daemon.sync.retries import code_of, failure
from ancre.errors import ExtractionError
from ancre.index.state import ItemState
from ancre.models import ItemStatus, ReasonCode, SourceItem

DropPoints = Callable[[str, str], None]
"""``drop(collection, doc_id)``: delete a document's points (:meth:`Store.delete_doc
<ancre.index.store.Store.delete_doc>`)."""


@dataclass(frozen=True)
class Settle:
    """What to do with an item that needs no embedding — :func:`~ancre.daemon.sync.plan.plan_item`'s
    ``decision`` (``record``, ``keep_problem`` or ``acl_only``) — with what was read for it: its
    ACL (``None`` when the item was not read: a link not followed) and its bytes' SHA-256."""

    decision: Decision
    reading: AclReading | None = None
    content_hash: str | None = None


class ItemPlanner:
    """Plans listed items (see the module doc) with ``fetcher`` (bytes, extraction, chunks),
    ``acls`` (ACL readings in the ACL writer's order) and ``drop`` (a moved document's old points);
    ``clock``: epoch seconds, for retry backoffs."""

    def __init__(
        self, fetcher: Fetcher, acls: AclReader, drop: DropPoints, *, clock: Callable[[], float] = time.time,
    ) -> None:
        self.fetcher = fetcher
        self.acls = acls
        self.drop = drop
        self.clock = clock

    def plan(
        self, connector: Connector, item: SourceItem, prev: ItemState | None, rep: PassReport, *,
        force: bool, limits: Limits,
    ) -> Planned | Settle | None:
        """What to do with ``item`` (``prev``: its state row, ``None`` when never seen): a
        document to embed, an item to settle, or ``None`` when its bytes can't be read now (it is
        counted ``failed`` in ``rep`` and what is indexed stays: it may be transient). An
        extraction failure is a :class:`Settle` recording it (:func:`~ancre.daemon.sync.retries.failure`).
        ``force``: settle nothing on the item's stat. Raises what the connector raises
        (``SourceUnavailableError``)."""
        collection = connector.collection_for(item)

        def decide(reading: AclReading | None, content_hash: str | None = None) -> Decision:
            return plan_item(
                item, prev, collection=collection, limits=limits, now=self.clock(), force=force,
                acl_read=reading is not None, content_hash=content_hash,
            )

        d = decide(None)
        if d.action is not Action.READ_ACL:
            return Settle(d)
        reading = self.acls.read(connector, item)
        if prev is not None and prev.collection != collection:
            self.drop(prev.collection, prev.doc_id)
        d = decide(reading)
        if d.action is not Action.READ_CONTENT:
            return Settle(d, reading)
        try:
            data, content_hash = self.fetcher.fetch(connector, item)
        except OSError as e:
            rep.count_problem(item.path, ItemStatus.FAILED, ReasonCode.UNREADABLE.text(str(e)))
            return None
        d = decide(reading, content_hash)
        if d.action is not Action.REINDEX:
            return Settle(d, reading, content_hash)
        try:
            blocks = self.fetcher.extract(item, data)
            del data  # the bytes are not kept while chunking (peak memory)
            doc = self.fetcher.chunk(item, blocks)
        except ExtractionError as e:
            code, detail = code_of(e.reason, e.detail)
            failed = failure(code, detail, prev, content_hash, limits.retry, self.clock())
            return Settle(Decision(action=Action.RECORD, failure=failed), reading, content_hash)
        return Planned(
            item=item, prev=prev, collection=collection, reading=reading, content_hash=content_hash,
            chunks=doc.chunks, subject=doc.subject,
        )


__all__ = ["DropPoints", "ItemPlanner", "Settle"]
