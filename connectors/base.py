"""The one ``Connector`` protocol every source implements (folder, SMB, SharePoint)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from ancre.models import Acl, SourceItem


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
        """The item's bytes. Raises ``SourceUnavailableError`` (or ``OSError``) on failure."""
        ...

    def fetch_acl(self, item: SourceItem) -> Acl:
        """The item's read ACL. Never raises for an unreadable ACL: returns ``Acl.nobody(reason)``."""
        ...

    def location(self, item: SourceItem) -> str:
        """Where a user finds the item's folder: UNC ``\\\\SRV\\Partage\\Dossier\\`` or a URL."""
        ...

    def collection_for(self, item: SourceItem) -> str:
        """The Qdrant collection (``documents`` / ``documentation``) this item feeds."""
        ...
