"""What the connector contract suite (tests/contract/) needs from a source: a connector over a
tree the test can change. Each source kind provides one fixture returning a :class:`SourceHarness`
(README "Adding a source")."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from ancre.connectors.base import Connector


class SourceHarness(Protocol):
    """A connector over an initially empty tree, and the means to change that tree behind its back.

    ``name`` arguments are ``/``-separated paths inside the tree, written as given (an NFD name
    stays NFD on the source); :meth:`path` is the relative path the connector reports for one
    (NFC; with the source's own prefix if the tree is a folder of a larger source).
    """

    connector: Connector

    def path(self, name: str) -> str:
        """The connector's relative path (NFC) of the tree's ``name``."""
        ...

    def write(self, name: str, data: bytes) -> None:
        """Create or replace the file ``name`` (parent folders created) with ``data``; its rights
        are the tree's default ones (readable by someone)."""
        ...

    def delete(self, name: str) -> None:
        """Remove the file ``name``."""
        ...

    def change_acl(self, name: str) -> None:
        """Change who may read ``name`` (adds a reader) without touching its content."""
        ...

    def break_acl(self, name: str) -> None:
        """Make the rights of ``name`` impossible to read or understand (the connector must then
        give an ACL nobody satisfies)."""
        ...

    def unreachable(self) -> AbstractContextManager[None]:
        """While entered, the source itself can't be reached (unmounted root, server down)."""
        ...
