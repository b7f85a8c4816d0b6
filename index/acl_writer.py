"""The one writer of documents' ACLs in a process (docs/ARCHITECTURE.md "Invariants": right now).

Two parts of ancre learn a document's ACL at its source and write it into the index — the
store's payloads and the state DB's digest: the sync engine (passes, and its rights lane's
refreshes, :mod:`ancre.daemon.sync`) and the query core's live rights check
(:mod:`ancre.query.live_acl`). Each reading takes time and they run in different threads, so a
reading taken *before* another may be written *after* it: a live reading of a grant written
after the rights lane recorded a newer revocation would leave the store wider than the source.
:class:`AclWriter` owns the order for both:

- a reader takes a :meth:`~AclWriter.ticket` (a number from one increasing sequence) **before**
  it reads an ACL at the source, and writes with it;
- :meth:`~AclWriter.begin_refresh` marks the start of a rights refresh of a source (its own
  ticket): every reading of that source taken before it is stale from then on — the refresh reads
  every document again;
- a write (or an unchanged reading, :meth:`~AclWriter.observe`) records its ticket as the
  document's latest; a reading older than the latest recorded one, or than the last refresh of
  its source, is **stale** and is not written (:meth:`~AclWriter.current`): the newer reading
  stands;
- all of it under one lock (:meth:`~AclWriter.hold`), held by the sync engine around every store
  write that sets ACLs (upserts included), so the check and the write are one step;
- and one path: :meth:`~AclWriter.write` is the only caller of the store's ``set_acl`` and of the
  state DB's ``set_acl_hash`` in ancre (``tests/unit/test_one_write_path.py``) — the sync
  engine's ACL-only updates and refreshes and the live check's write-backs all go through it.

One writer serves one process: the composition root (:class:`ancre.query.bootstrap.Bootstrap`,
which :class:`ancre.app.runtime.Runtime` is) builds it once for the sync engine and the query
core; neither builds one of its own. A process that runs no sync engine next to a
Qdrant server shared with a daemon elsewhere gets a *read-only* writer: its live check decides
its questions on what it read but never writes (the daemon is the index's one writer; its sweep
catches up).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING

from ancre.index.store import Store
from ancre.models import Acl

if TYPE_CHECKING:
    from ancre.index.state import StateDB


class AclWrite(StrEnum):
    """What :meth:`AclWriter.write` did."""

    WRITTEN = "written"
    """The store's payloads and the state DB's digest now hold the ACL."""
    STALE = "stale"
    """Not written: a newer reading of the document (or a refresh of its source) came first."""
    READ_ONLY = "read_only"
    """Not written: this process is not the index's ACL writer."""


class AclWriter:
    """Writes ACLs into ``store`` (payloads, :meth:`Store.set_acl`) and ``state`` (digest,
    :meth:`StateDB.set_acl_hash`; ``None``: no state DB) in the order their readings started
    (see the module doc). ``read_only``: never writes. Thread-safe."""

    def __init__(self, store: Store, state: StateDB | None, *, read_only: bool = False) -> None:
        self.store = store
        self.state = state
        self.read_only = read_only
        self.lock = threading.RLock()
        """Held around each check-and-write; the sync engine holds it around its ACL-bearing
        store writes (re-entrant: the writer's methods may be called with it held)."""
        self._seq = itertools.count(1)
        self._refresh: dict[str, int] = {}
        self._latest: dict[tuple[str, str], int] = {}

    def ticket(self) -> int:
        """A ticket to take just before reading an ACL at its source (increasing)."""
        with self.lock:
            return next(self._seq)

    def begin_refresh(self, source: str) -> int:
        """A rights refresh of ``source`` starts: readings of it taken before are stale from now
        on. Returns the refresh's own ticket."""
        with self.lock:
            t = next(self._seq)
            self._refresh[source] = t
            return t

    def current(self, source: str, doc_id: str, ticket: int) -> bool:
        """Whether a reading of ``doc_id`` taken at ``ticket`` is still the newest one: no
        refresh of ``source`` started after it, and no newer reading was written or observed
        (this reading itself, recorded, still is: it is not read again)."""
        with self.lock:
            return self._refresh.get(source, 0) < ticket and self._latest.get((source, doc_id), 0) <= ticket

    def observe(self, source: str, doc_id: str, ticket: int) -> None:
        """Record a reading taken at ``ticket`` as the document's latest (written by the caller
        under :meth:`hold`, or found equal to the index's)."""
        with self.lock:
            key = (source, doc_id)
            if self._latest.get(key, 0) < ticket:
                self._latest[key] = ticket

    @contextmanager
    def hold(self) -> Iterator[None]:
        """The writer's lock, for a caller's compound check-and-write."""
        with self.lock:
            yield

    def write(
        self, source: str, collection: str, doc_id: str, acl: Acl, ticket: int, *, reason: str | None = None,
        digest: bool = True,
    ) -> AclWrite:
        """Write ``acl`` (read at ``ticket``) for every point of ``doc_id`` (:meth:`Store.set_acl
        <ancre.index.store.Store.set_acl>`: the one call of it in ancre) and, with ``digest``, for
        an indexed document, its digest with ``reason`` (why it admits nobody, ``None`` otherwise;
        ``digest=False``: the caller writes the document's whole state row next, under
        :meth:`hold`) — unless the reading is stale or the writer read-only. Raises what the store
        or the state DB raise (``StoreError``, ``sqlite3.Error``); the ticket is then not
        recorded."""
        if self.read_only:
            return AclWrite.READ_ONLY
        with self.lock:
            if not self.current(source, doc_id, ticket):
                return AclWrite.STALE
            self.store.set_acl(collection, doc_id, acl)
            if digest and self.state is not None:
                self.state.set_acl_hash(source, doc_id, acl.digest(), acl_problem=reason)
            self.observe(source, doc_id, ticket)
            return AclWrite.WRITTEN

__all__ = ["AclWrite", "AclWriter"]
