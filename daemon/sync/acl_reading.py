"""The sync engine's ACL readings (:class:`AclReader`): an ACL read at its source, in the order of
the process's one ACL writer (:class:`~ancre.index.acl_writer.AclWriter`) — a ticket taken
before the source is read, the reading read again when a newer one (a rights refresh, the live
check's) came first. Shared by the engine's planner, writer and ACL refresh; writes nothing."""

from __future__ import annotations

from dataclasses import dataclass

from ancre.connectors.base import Connector
from ancre.index.acl_writer import AclWriter
from ancre.models import Acl, SourceItem


@dataclass(frozen=True)
class AclReading:
    """An ACL read at its source (``acl``, its :meth:`~ancre.models.Acl.digest` ``digest``) and the
    ticket taken just before it was read (:meth:`AclWriter.ticket
    <ancre.index.acl_writer.AclWriter.ticket>`)."""

    acl: Acl
    ticket: int
    digest: str

    @classmethod
    def of(cls, acl: Acl, ticket: int) -> AclReading:
        """The reading of ``acl`` taken at ``ticket``."""
        return cls(acl, ticket, acl.digest())


class AclReader:
    """Reads documents' ACLs at their source for the sync engine, each reading with its ticket
    from ``writer`` (the process's ACL writer, whose order the readings follow)."""

    def __init__(self, writer: AclWriter) -> None:
        self.writer = writer

    def read(self, connector: Connector, item: SourceItem) -> AclReading:
        """``item``'s ACL read at the source, a ticket taken first. Raises what
        ``connector.fetch_acl`` raises (``SourceUnavailableError``)."""
        ticket = self.writer.ticket()
        return AclReading.of(connector.fetch_acl(item), ticket)

    def current(self, connector: Connector, item: SourceItem, reading: AclReading) -> AclReading:
        """``reading`` if it is still the newest of ``item``'s document
        (:meth:`AclWriter.current <ancre.index.acl_writer.AclWriter.current>`: no refresh of its
        source started since, no newer reading recorded), else the ACL read again now. Called
        with the writer's lock held, so that the check and the write that follows are one step."""
        if self.writer.current(item.source, item.doc_id, reading.ticket):
            return reading
        return self.read(connector, item)


__all__ = ["AclReader", "AclReading"]
