"""Graph ``driveItem: delta`` applied to a SharePoint drive snapshot, and what a delta round
reports as change events.

:func:`apply_delta` takes the items of one delta answer (``@odata.nextLink`` pages already
followed by the Graph client): an item seen twice takes its last occurrence; ``deleted`` items —
maybe without a name — and what was under a deleted folder are dropped; a ``root`` facet marks
the library's root; an entry with no ``file``/``folder``/``package``/``deleted`` facet is not
taken for a file ("driveItem resource type"). It says which items changed and whose permissions
must be read. :class:`DeltaCursor` is the change feed's cursor (drive id → ``deltaLink``),
:func:`delta_events` a round's events.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ancre.connectors.base import ChangeEvent
from ancre.connectors.sharepoint.snapshot import Drive, Entry
from ancre.models import ChangeKind, nfc

log = logging.getLogger("ancre.sharepoint")

PREFER_SHARING = ("deltashowsharingchanges", "hierarchicalsharing", "deltatraversepermissiongaps")
"""``Prefer`` values of a delta that reports sharing changes (``sharing_delta``)."""
PREFER_ALWAYS = ("deltashowremovedasdeleted",)
"""``Prefer`` values of every delta request."""
SHARED_CHANGED = "@microsoft.graph.sharedChanged"
"""Annotation of an item whose sharing changed (with ``deltashowsharingchanges``)."""
LIBRARY_CHANGED = ""
"""Marker in a round's touched ids: the library's role assignments changed."""


class DeltaCursor(BaseModel):
    """The SharePoint change feed's cursor (persisted by the engine): ``links``, drive id → the
    ``@odata.deltaLink`` the drive's last delta round ended on ("driveItem: delta")."""

    model_config = ConfigDict(frozen=True)

    links: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class DriveDelta:
    """What one library's delta round did: ``touched``, the item ids whose listing or rights may
    have changed (:data:`LIBRARY_CHANGED` among them when the library's role assignments did),
    and ``resynced``, whether the round's events can't be told and a full pass must reconcile
    (Graph answered ``410 Gone`` and the drive was enumerated again, or what changed since the
    engine's cursor can't be placed: ``reason`` says which). ``before``: item id → path before
    the round, when the round itself knows it (a snapshot rebuilt from Graph); ``None``: the
    caller's."""

    drive: Drive
    touched: frozenset[str]
    resynced: bool = False
    reason: str = ""
    before: Mapping[str, str | None] | None = None


@dataclass
class Applied:
    """What :func:`apply_delta` found: ``touched`` (ids whose listing or rights may have
    changed) and ``perm_read`` (ids whose permissions must be read now)."""

    touched: set[str] = field(default_factory=set)
    perm_read: set[str] = field(default_factory=set)
    perm_roots: set[str] = field(default_factory=set)
    """Folders whose sharing changed or that moved: every item below has its permissions read."""


def epoch(iso: str | None) -> float:
    """An ISO 8601 date-time as epoch seconds; ``0.0`` when missing or unreadable."""
    if not iso:
        return 0.0
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


def item_kind(it: Mapping[str, Any]) -> str | None:
    """What a driveItem is by its facets ("driveItem resource type"; a package has neither
    ``file`` nor ``folder``): ``package`` / ``folder`` / ``file``, ``None`` without any."""
    if it.get("package") is not None:
        return "package"
    if it.get("folder") is not None:
        return "folder"
    if it.get("file") is not None:
        return "file"
    return None


def entry_of(drive: Drive, iid: str, it: Mapping[str, Any], prev: Entry | None) -> Entry | None:
    """The snapshot entry of delta item ``it`` (``prev``: its previous entry, whose name, parent,
    kind and package fill what a delta entry may omit); ``None`` for an item with no facet."""
    kind = item_kind(it) or (prev.kind if prev is not None else None)
    if kind is None:
        log.warning("delta of %s: item %s has no file, folder or package facet: left out", drive.prefix, iid)
        return None
    parent = (it.get("parentReference") or {}).get("id")
    hashes = (it.get("file") or {}).get("hashes") or {}
    return Entry(
        name=nfc(str(it.get("name") or (prev.name if prev else iid))),
        parent=str(parent) if parent else (prev.parent if prev else drive.root),
        kind=kind, size=int(it.get("size") or 0),
        qxh=hashes.get("quickXorHash") or hashes.get("sha256Hash") or it.get("cTag") or it.get("eTag"),
        mtime=epoch(it.get("lastModifiedDateTime")), url=str(it.get("webUrl") or ""),
        ctag=str(it.get("cTag") or it.get("eTag") or "") or None,
        package=str((it.get("package") or {}).get("type") or "") or (prev.package if prev else None),
    )


def _apply_one(drive: Drive, items: dict[str, Entry], prev: Entry | None, iid: str, it: Mapping[str, Any],
               full: bool, acc: Applied) -> None:
    """Apply one (last) delta occurrence of item ``iid`` to ``items``, noting it in ``acc``."""
    if it.get("deleted") is not None:
        if items.pop(iid, None) is not None:
            acc.touched.add(iid)
        return
    if it.get("root") is not None:
        drive.root = iid
        items[iid] = Entry("", None, "root", url=str(it.get("webUrl") or drive.url))
        return
    e = entry_of(drive, iid, it, prev)
    if e is None:
        return
    moved = prev is not None and (prev.parent != e.parent or prev.name != e.name)
    reparented = moved and prev is not None and prev.parent != e.parent
    shared = str(it.get(SHARED_CHANGED, "")).lower() == "true"
    if prev is not None and not full:
        e.perms = prev.perms
        e.labels = prev.labels if (prev.qxh, prev.ctag) == (e.qxh, e.ctag) else None
    if prev is None or full or not isinstance(e.perms, list) or shared or reparented:
        acc.perm_read.add(iid)
    if e.kind != "file" and (shared or reparented):
        acc.perm_roots.add(iid)
    if prev is None or moved or shared or prev.qxh != e.qxh or prev.size != e.size:
        acc.touched.add(iid)
    items[iid] = e


def apply_delta(drive: Drive, raw_items: Sequence[Mapping[str, Any]], *, full: bool) -> Applied:
    """Apply the delta items ``raw_items`` to ``drive``'s snapshot (``full``: a full
    enumeration — what it does not list is gone, every permission is read again). Returns
    what changed and whose permissions must be read (the caller reads them): new, moved,
    re-shared items, everything below a re-shared or moved folder, and every item whose
    permissions were never read or failed to be."""
    latest: dict[str, Mapping[str, Any]] = {}
    for it in raw_items:  # an item seen twice takes its last occurrence
        latest.pop(str(it.get("id")), None)
        latest[str(it.get("id"))] = it
    old = drive.items
    items: dict[str, Entry] = {} if full else dict(old)
    acc = Applied()
    for iid, it in latest.items():
        _apply_one(drive, items, old.get(iid), iid, it, full, acc)
    drive.items = items
    for iid in [i for i in items if not drive.attached(i)]:  # under a deleted folder: gone too
        del items[iid]
        acc.touched.add(iid)
    for iid, e in items.items():
        if acc.perm_roots and any(a in acc.perm_roots for a in drive.ancestors(iid)):
            acc.perm_read.add(iid)
            acc.touched.add(iid)
        elif iid not in acc.perm_read and e.kind != "root" and not isinstance(e.perms, list):
            acc.perm_read.add(iid)  # a read that failed (or never happened) is tried again at every pass
            acc.touched.add(iid)
    acc.perm_read = {i for i in acc.perm_read if i in items and items[i].kind != "root"}
    return acc


def delta_events(source_id: str, dd: DriveDelta, before: Mapping[str, Mapping[str, str | None]]) -> list[ChangeEvent]:
    """The change events of one library's delta round: ``rescan`` after a resync; ``acl``
    without a path when the library's role assignments changed; per touched item ``deleted``
    at its old path when it moved or went, ``modified`` at its path for a file, ``acl`` for a
    folder or package (its path covers what is under it). ``before``: drive id → item id →
    path before the round."""
    if dd.resynced:
        why = dd.reason or f"{dd.drive.prefix}: Graph asked for a resync (410): the library was enumerated again"
        return [ChangeEvent(source_id, None, ChangeKind.RESCAN, reason=why)]
    d, out = dd.drive, []
    old = dd.before if dd.before is not None else before.get(d.drive_id, {})
    if LIBRARY_CHANGED in dd.touched and old:
        out.append(ChangeEvent(source_id, None, ChangeKind.ACL))  # every inheriting item's rights
    for iid in sorted(dd.touched - {LIBRARY_CHANGED}):
        e = d.items.get(iid)
        new_path = d.path(iid) if e is not None else None
        old_path = old.get(iid)
        if old_path and old_path != new_path:
            out.append(ChangeEvent(source_id, old_path, ChangeKind.DELETED))
        if new_path is not None:
            kind = ChangeKind.ACL if e and e.kind != "file" else ChangeKind.MODIFIED
            out.append(ChangeEvent(source_id, new_path, kind))
    return out


__all__ = [
    "LIBRARY_CHANGED", "PREFER_ALWAYS", "PREFER_SHARING", "SHARED_CHANGED", "Applied", "DeltaCursor", "DriveDelta",
    "apply_delta", "delta_events", "entry_of", "epoch", "item_kind",
]
