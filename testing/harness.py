"""What the source contract (:mod:`ancre.testing.contract`) needs from a source under test: a
connector over a tree the test can change behind its back.

A source kind provides one *harness* per test (the ``harness`` fixture of its test class): a
:class:`SourceHarness` for the listing, content, live rights and change feed contracts, an
:class:`AclHarness` (which can also change and break one file's rights) for the ACL contract.
docs/ARCHITECTURE.md "Adding a source" walks through one.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from ancre.connectors.base import Connector


@runtime_checkable
class SourceHarness(Protocol):
    """A connector over an initially empty tree, and the means to change that tree behind its back.

    ``name`` arguments are ``/``-separated paths inside the tree, written as given (an NFD name
    stays NFD on the source); :meth:`path` is the relative path the connector reports for one
    (NFC; with the source's own prefix if the tree is a folder of a larger source). Every file
    written is readable by someone (the tree's default rights).
    """

    connector: Connector
    """The connector under test (replaced by :meth:`reopen`)."""

    def path(self, name: str) -> str:
        """The connector's relative path (NFC) of the tree's ``name``."""
        ...

    def write(self, name: str, data: bytes) -> None:
        """Create or replace the file ``name`` (parent folders created) with ``data``."""
        ...

    def delete(self, name: str) -> None:
        """Remove the file ``name``."""
        ...

    def unreachable(self) -> AbstractContextManager[None]:
        """While entered, the source itself can't be reached (unmounted root, server down)."""
        ...

    def reopen(self) -> Connector:
        """Close :attr:`connector` and build a new one of the same source, as a restarted process
        does — after removing every file the connector keeps of its own (a cache below ancre's
        data directory, such as SharePoint's drive snapshots; nothing for a source that keeps
        none). Returns it (it is :attr:`connector` from then on)."""
        ...


@runtime_checkable
class AclHarness(SourceHarness, Protocol):
    """A :class:`SourceHarness` that can also change who may read one file."""

    def change_acl(self, name: str) -> None:
        """Change who may read ``name`` (add a reader) without touching its content."""
        ...

    def break_acl(self, name: str) -> None:
        """Make the rights of ``name`` impossible to read or understand (the connector must then
        give an ACL nobody satisfies)."""
        ...


__all__ = ["AclHarness", "SourceHarness"]
