"""The one ``Connector`` protocol every source implements (folder, SMB, SharePoint)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ancre.acl.explain import AclTrace
from ancre.models import Acl, SourceItem


@dataclass(frozen=True)
class ChangeEvent:
    """A change reported by a source's watcher (watchdog, SMB2 CHANGE_NOTIFY, Graph delta).

    ``path`` is the relative POSIX path (NFC) that changed (file or folder), or ``None`` when the
    watcher lost track (overflow, STATUS_NOTIFY_ENUM_DIR, reconnect): a full reconciliation is
    then needed. ``kind``: ``created`` / ``modified`` / ``deleted`` / ``moved`` / ``acl`` /
    ``rescan``; for ``moved``, ``dest_path`` is the new path (``None`` when moved out of the tree).
    An ``acl`` event without a path (an ACL manifest edit) means every document's rights may
    have changed: the daemon re-reads them all in its rights lane, no rescan.
    """

    source: str
    path: str | None
    kind: str
    dest_path: str | None = None


ChangeCallback = Callable[[ChangeEvent], None]


@runtime_checkable
class Connector(Protocol):
    """A source of documents.

    ``list_items`` yields every indexable item (ignore rules, include/exclude globs and the max
    size already applied) and raises :class:`~ancre.errors.SourceUnavailableError` when the root
    can't be listed — never an empty listing for an unreachable root. Content and ACL are fetched
    lazily, item by item.
    """

    source_id: str
    collection: str

    def list_items(self) -> Iterator[SourceItem]:
        """Every indexable item of the source. Raises ``SourceUnavailableError``."""
        ...

    def fetch_content(self, item: SourceItem) -> bytes:
        """The item's bytes. Raises ``OSError`` when this item can't be read (reported, the pass
        goes on) and ``SourceUnavailableError`` when the source itself is unreachable (the pass
        stops as suspect and purges nothing)."""
        ...

    def fetch_acl(self, item: SourceItem) -> Acl:
        """The item's read ACL. Never raises for an unreadable or malformed ACL: returns
        ``Acl.nobody(reason)``. Raises ``SourceUnavailableError`` only when the source itself is
        unreachable, so that an outage does not revoke everyone's rights."""
        ...

    def location(self, item: SourceItem) -> str:
        """Where a user finds the item's folder: UNC ``\\\\SRV\\Partage\\Dossier\\`` or a URL."""
        ...

    def collection_for(self, item: SourceItem) -> str:
        """The Qdrant collection (``documents`` / ``documentation``) this item feeds."""
        ...

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The *current* read ACL of each relative path, read from the source now (no cache of
        the connector's own), as :meth:`fetch_acl` computes it for a sync — used by the query
        core to check rights live before a document is shown (:mod:`ancre.query.live_acl`).

        Returns ``{path: Acl}`` with the paths as given; a path that no longer exists (deleted,
        renamed) is left out of the mapping. An unreadable or malformed ACL is
        ``Acl.nobody(reason)``. Raises :class:`~ancre.errors.SourceUnavailableError` when the
        source itself can't be reached (the caller decides: fail closed or the stored ACL).
        Thread-safe: the query core calls it from several threads with disjoint batches."""
        ...

    def get_item(self, path: str) -> SourceItem | None:
        """The current listing entry for one relative path, ``None`` if it does not exist or is not
        indexable (ignored name, excluded). Raises ``SourceUnavailableError`` when the root itself
        can't be reached (so that an event never turns an outage into deletions)."""
        ...


@runtime_checkable
class WatchableConnector(Connector, Protocol):
    """A connector that can push changes (optional capability)."""

    def watch(self, on_change: ChangeCallback, stop: threading.Event) -> None:
        """Block, calling ``on_change`` for every change until ``stop`` is set. Emits a
        ``ChangeEvent(path=None, kind="rescan")`` whenever events may have been lost."""
        ...


@runtime_checkable
class AclExplainable(Protocol):
    """A connector that can say why a path is readable or not, for ``ancre acl explain``
    (optional capability, checked with ``isinstance``)."""

    def explain_path(self, path: str) -> str:
        """``path`` as the relative POSIX path (NFC, ``/``-separated, no ``.``/``..``) sync gives
        that file: ``path`` may be relative to the source root, a UNC path or URL under the source's
        ``unc_root``, or a path the source alone knows how to read (a folder source: an absolute
        local path under its root). Raises :class:`~ancre.acl.explain.PathOutsideSourceError` for
        a path outside the source (see :func:`ancre.acl.explain.canonical_path`)."""
        ...

    def explain_acl(self, path: str) -> AclTrace:
        """The rights on ``path`` (as :meth:`explain_path` returns it; ``""`` = the root) as the
        source states them now — the ACEs that apply and where each is written, or the principals
        the source grants, plus share-level permissions — computed as :meth:`Connector.fetch_acl`
        computes them for a sync. Unreadable rights are a trace with ``unreadable`` set, not an
        error. Raises :class:`~ancre.errors.SourceUnavailableError` when the source can't be
        reached, :class:`~ancre.errors.DirectoryError` when the directory can't be read."""
        ...
