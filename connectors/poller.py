"""Change detection for a source that pushes nothing: :class:`SnapshotDiffPoller` makes any
:class:`~ancre.connectors.base.Connector` a :class:`~ancre.connectors.base.ChangeFeed` by
listing it and diffing the listing against the previous one (docs/ARCHITECTURE.md "Change
detection").

Its cursor (:class:`SnapshotCursor`, kept by the engine) is the last listing: ``{path: version}``
with the version the sync engine compares (native id, size, mtime, etag, skip reason), and the
parts that could not be listed. :func:`diff_listings` turns two listings into ``created`` /
``modified`` / ``deleted`` events (a move is a deletion plus a creation); what lay under a part
that is unreachable now gives no event and stays in the cursor as it was, so an outage of one
part is never a deletion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from ancre.connectors.base import ChangeBatch, ChangeEvent, Connector, Listing
from ancre.models import ChangeKind, SourceItem


class Version(NamedTuple):
    """What tells the sync engine an item may have changed (a JSON array in the cursor)."""

    native_id: str
    size: int
    mtime: float
    etag: str | None
    skip: str | None

    @classmethod
    def of(cls, item: SourceItem) -> Version:
        """The version of a listed ``item``."""
        return cls(item.native_id, item.size, item.mtime, item.etag, item.skip)


class SnapshotCursor(BaseModel):
    """A :class:`SnapshotDiffPoller`'s cursor: ``items``, ``{relative path: Version}`` of the
    last listing (plus what was kept under unreachable parts), and ``unreachable``, the relative
    folder paths that listing left out (``""`` = everything)."""

    model_config = ConfigDict(frozen=True)

    items: dict[str, Version]
    unreachable: tuple[str, ...] = ()


def under(path: str, parts: tuple[str, ...]) -> bool:
    """Whether the relative POSIX ``path`` is one of the folders ``parts`` or below one (``""``:
    the whole source)."""
    return any(p in ("", path) or path.startswith(p.rstrip("/") + "/") for p in parts)


def diff_listings(
    source: str, before: Mapping[str, Version], after: Mapping[str, Version], unreachable: tuple[str, ...]
) -> tuple[tuple[ChangeEvent, ...], dict[str, Version]]:
    """The events that turn listing ``before`` into listing ``after`` of ``source``, and the
    snapshot to keep: ``after`` plus the entries of ``before`` under an ``unreachable`` part
    that ``after`` lacks (no event for those). Events: ``created`` for a new path, ``modified``
    for a path whose version changed, ``deleted`` for a path gone from a reachable part; sorted
    by path."""
    events: list[ChangeEvent] = []
    kept = dict(after)
    for path, version in before.items():
        if path in after:
            if after[path] != version:
                events.append(ChangeEvent(source, path, ChangeKind.MODIFIED))
        elif under(path, unreachable):
            kept[path] = version
        else:
            events.append(ChangeEvent(source, path, ChangeKind.DELETED))
    events += [ChangeEvent(source, p, ChangeKind.CREATED) for p in after if p not in before]
    events.sort(key=lambda e: (e.path or "", e.kind))
    return tuple(events), kept


class SnapshotDiffPoller:
    """A :class:`~ancre.connectors.base.ChangeFeed` over ``connector``'s listing, called every
    ``poll_interval_s`` seconds (> 0) by the daemon (see the module doc)."""

    cursor_type = SnapshotCursor

    def __init__(self, connector: Connector, poll_interval_s: float) -> None:
        self.connector = connector
        self.source_id = connector.source_id
        self._interval = poll_interval_s

    @property
    def poll_interval_s(self) -> float:
        """Seconds between two listings."""
        return self._interval

    def changes(self, cursor: SnapshotCursor | None) -> ChangeBatch[SnapshotCursor]:
        """List the source and diff it with ``cursor`` (:func:`diff_listings`); ``None``: the
        listing is the baseline, no event. Raises
        :class:`~ancre.errors.SourceUnavailableError` (from ``list_items``) when the source
        can't be listed: no event, the caller keeps its cursor."""
        listing: Listing = self.connector.list_items()
        after = {i.path: Version.of(i) for i in listing.items}
        unreachable = listing.unreachable_paths
        if cursor is None:
            return ChangeBatch((), SnapshotCursor(items=after, unreachable=unreachable))
        events, kept = diff_listings(self.source_id, cursor.items, after, unreachable)
        return ChangeBatch(events, SnapshotCursor(items=kept, unreachable=unreachable))


__all__ = ["SnapshotCursor", "SnapshotDiffPoller", "Version", "diff_listings", "under"]
