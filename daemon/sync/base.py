"""What every part of the sync engine shares: its components, its locks and the ACL-reading order
(:class:`EngineBase`)."""

from __future__ import annotations

import threading

from ancre.config import Settings
from ancre.connectors.base import Connector
from ancre.errors import DiskFullError
from ancre.index.acl_writer import AclWriter
from ancre.index.bm25 import Bm25Manager
from ancre.index.embedders import Embedder
from ancre.index.state import StateDB
from ancre.index.store import Store
from ancre.ingest.worker import ExtractionPool
from ancre.models import Acl, SourceItem


class EngineBase:
    """The components of a :class:`~ancre.daemon.sync.SyncEngine`. ``store`` must be opened with
    ``embedder``; ``acl_writer``: the process's ACL writer, shared with the query core's live
    rights check (default: one of its own over ``store`` and ``state``)."""

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
        are extracted (:class:`~ancre.daemon.sync.commit.CommitPipe`); ``False``: one after the
        other (the benchmark's baseline)."""
        self.overlap = overlap
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.state = state
        self.bm25 = bm25
        self.pool = pool
        self._lock = threading.RLock()
        self.acl = acl_writer if acl_writer is not None else AclWriter(store, state)
        """The ACL writer owning the order of every ACL written (see :mod:`ancre.daemon.sync`)."""
        self._acl_mu = self.acl.lock
        self.disk_full: DiskFullError | None = None
        """Why the last pass or batch stopped for want of space (``None`` when it did not): the
        daemon waits until the file system has what it needed (:mod:`ancre.daemon.disk`)."""
        """Held around every store write that sets ACLs (upserts, ``set_acl``)."""

    def _epoch(self, source: str) -> int:
        """A ticket for an ACL about to be read at ``source``."""
        return self.acl.ticket()

    def _current_acl(self, connector: Connector, item: SourceItem, acl: Acl, epoch: int) -> tuple[Acl, int]:
        """``(acl, epoch)`` if that reading (ticket ``epoch``) is still the newest
        (:meth:`AclWriter.current <ancre.index.acl_writer.AclWriter.current>`), else the ACL
        re-read now with its new ticket. Called with ``_acl_mu`` held."""
        if self.acl.current(item.source, item.doc_id, epoch):
            return acl, epoch
        ticket = self.acl.ticket()
        return connector.fetch_acl(item), ticket
