"""The sync engine's ACL refresh (:class:`AclRefresher`): ACL-only updates of unchanged documents
during a pass (:meth:`AclRefresher.acl_only`) and the rights-only refresh
(:meth:`AclRefresher.refresh`), run by the daemon's rights thread *while* a pass embeds: a
revocation never waits behind content work. Every ACL goes through the process's one ACL writer
(see :mod:`ancre.daemon.sync`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from typing import Any

from ancre.acl.engine import acl_problem
from ancre.connectors.base import Connector, PermissionSweep
from ancre.daemon.sync.acl_reading import AclReader, AclReading
from ancre.daemon.sync.paths import clean_rel_path
from ancre.daemon.sync.report import PassReport
from ancre.errors import SourceUnavailableError
from ancre.index.acl_writer import AclWrite, AclWriter
from ancre.index.state import ItemState, StateDB
from ancre.models import ItemStatus, PassOutcome, PassScope, SourceItem

log = logging.getLogger("ancre.sync")

_LIVE = (ItemStatus.INDEXED, ItemStatus.PENDING)
"""The statuses of rows whose points are in the store."""


class AclRefresher:
    """Writes documents' ACLs without their content: ``state`` holds their rows, ``writer`` (the
    process's one ACL writer) writes every ACL, ``acls`` reads them at the source in its order."""

    def __init__(self, state: StateDB, writer: AclWriter, acls: AclReader) -> None:
        self.state = state
        self.writer = writer
        self.acls = acls

    def acl_only(
        self,
        connector: Connector,
        item: SourceItem,
        prev: ItemState,
        collection: str,
        reading: AclReading,
        rep: PassReport,
        **row: Any,
    ) -> None:
        """An indexed document whose content is unchanged: its ACL (read again if a newer reading
        came first) written when it changed (zero embeddings), its row updated with the ACL
        digest, the ACL problem if any, and ``row`` (new stat fields)."""
        with self.writer.hold():
            reading = self.acls.current(connector, item, reading)
            acl_issue = acl_problem(reading.acl)
            changed = prev.acl_hash != reading.digest
            if changed:
                self.writer.write(item.source, collection, item.doc_id, reading.acl, reading.ticket, digest=False)
                rep.acl_only += 1
            else:
                rep.unchanged += 1
            if changed or row or prev.acl_problem != acl_issue or prev.path != item.path:
                self.state.put(
                    replace(prev, acl_hash=reading.digest, path=item.path, acl_problem=acl_issue, updated_at=time.time(), **row)
                )
            self.writer.observe(item.source, item.doc_id, reading.ticket)
        rep.count_acl_problem(item.path, acl_issue)

    def refresh(
        self,
        connector: Connector,
        paths: Iterable[str] | None = None,
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> PassReport:
        """Re-read the ACL of every ``indexed`` or ``pending`` document of ``connector``'s source
        (``paths`` ``None``), or of those at or below ``paths``, and overwrite the ACL payload of
        the points whose ACL changed — no content read, no embedding. Runs alongside
        the engine's passes (see :mod:`ancre.daemon.sync`): a document being embedded
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
        self.writer.begin_refresh(source)
        wanted = None if paths is None else [p for p in (clean_rel_path(x) for x in paths) if p is not None]
        rows = [
            st for st in self.state.items(source).values()
            if st.status in _LIVE and (wanted is None or any(st.path == p or st.path.startswith(p + "/") for p in wanted))
        ]
        rep.listed = len(rows)
        try:
            if wanted is None and isinstance(connector, PermissionSweep):
                connector.sweep_permissions()  # a full refresh (the ACL sweep) reads them at the source
            for st in rows:
                if should_stop is not None and should_stop():
                    rep.outcome, rep.reason = PassOutcome.INTERRUPTED, "stop requested"
                    break
                self._refresh_one(connector, st, rep)
        except SourceUnavailableError as e:
            rep.outcome, rep.reason = PassOutcome.SUSPECT, f"source unreachable during the ACL refresh: {e}"
        rep.duration_s = time.monotonic() - t0
        log.info("ACLs refreshed", extra={"report": asdict(rep)})
        return rep

    def _refresh_one(self, connector: Connector, st: ItemState, rep: PassReport) -> None:
        """Re-read the ACL of the document of row ``st`` and write it if it changed — unless its
        row left ``indexed``/``pending`` or a newer reading was written meanwhile."""
        item = SourceItem(st.source, st.native_id, st.path, st.size, st.mtime, st.etag)
        reading = self.acls.read(connector, item)
        with self.writer.hold():
            cur = self.state.get(st.source, st.native_id)
            if cur is None or cur.status not in _LIVE:
                return
            if not self.writer.current(cur.source, cur.doc_id, reading.ticket):
                rep.unchanged += 1  # a newer reading (the live check's) was written meanwhile: it stands
                return
            if cur.status == ItemStatus.INDEXED and cur.acl_hash == reading.digest:
                self.writer.observe(cur.source, cur.doc_id, reading.ticket)
                rep.unchanged += 1
                return
            done = self.writer.write(
                cur.source, cur.collection, cur.doc_id, reading.acl, reading.ticket, reason=acl_problem(reading.acl),
            )
            if done is AclWrite.WRITTEN:
                rep.acl_only += 1
