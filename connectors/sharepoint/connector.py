"""SharePoint Online connector: document libraries read through Microsoft Graph ``driveItem``
delta, permissions through Graph ``/permissions`` (batched) and SharePoint REST role
assignments (docs/SHAREPOINT.md).

**Listing.** One source = one tenant. Per site (``sites``, or every site), per document library
(drive) matching ``libraries`` / ``libraries_exclude``, the connector caches a *snapshot* of the
drive — every item's name, parent, kind, size, ``quickXorHash``, permissions and labels — with the
``deltaLink`` it was last brought to, in a store of its own (:mod:`ancre.connectors.sharepoint.snapshot`). A listing
asks Graph only for the delta since that link (``@odata.nextLink`` pages followed by the Graph
client), applies it (an item seen twice takes its last occurrence; ``deleted`` items — maybe
without a name — and what was under a deleted folder are dropped) and lists the whole snapshot:
when nothing changed, no request is made per item. A ``410`` (``resyncRequired``…) restarts the
drive from an empty delta (full enumeration); what is not seen again vanishes from the listing,
and the sync engine purges it under its mass-deletion guard.

**Identity and paths.** An item *is* its drive id + item id: ``native_id`` is
``<drive id>/<item id>`` (the sync engine's key, the store's ``doc_id``), the live check reads rights
by it (:meth:`SharePointConnector.read_acls_by_id`), and content is downloaded by it, never by URL
(``#``, ``%``, leading spaces and long paths are no problem). The path shown is
``<site server-relative URL>/<library>/<folders>/<file>`` (``sites/Projets/Documents/x.docx``,
``teams/Projets/Documents/x.docx``, a subsite ``sites/A/Projets/Documents/x.docx``; the root
site's libraries start at ``<library>``), NFC: two sites never share a path. ``etag`` is the
``quickXorHash``: content that did not change is neither downloaded nor re-embedded. Folders are
not documents; a package (a OneNote notebook: "Package resource type") is listed with ``skip``
set (status ``skipped: unsupported: OneNote notebook``) and what is under it is not listed; a
delta entry with no ``file``/``folder``/``package``/``deleted`` facet is not taken for a file.

**Rights.** See :mod:`ancre.connectors.sharepoint.permissions`: an item's ACL is its own Graph
permission list (effective permissions, inheritance included; ``inheritedFrom`` is not read). The
permissions of an item are read when it is new, moved, marked by delta as sharing-changed
(``sharing_delta``), when its library's role assignments changed, and again at every pass while a
read failed (counted in :attr:`SharePointConnector.permission_failures`; the item is readable by
nobody meanwhile, with the reason in ``ancre status``); a folder's change re-reads every item
below it. :meth:`SharePointConnector.sweep_permissions` re-reads them all (Graph misses some
sharing changes); :meth:`read_acls` reads live, for the query-time check. A site whose
SharePoint REST refuses the app (401/403) can't have its site groups resolved: documents only its
groups read are ``Acl.nobody`` with that reason (``ancre status``, ``ancre check``).

**Labels.** With ``exclude_labels``, new and changed files get their sensitivity labels
(``extractSensitivityLabels``); a file carrying one of them, or whose label can't be read
(``423`` for double-key encryption), is listed with ``skip`` set (status ``skipped``, its points
dropped).

**Change feed.** The connector is a :class:`~ancre.connectors.base.ChangeFeed`: the daemon calls
:meth:`SharePointConnector.changes` every ``delta_interval_s`` with the
:class:`~ancre.connectors.sharepoint.delta.DeltaCursor` (drive id → ``deltaLink``) the previous
call returned, which the engine keeps. Each library's round asks Graph for the delta since the
cursor's link — the snapshot is a cache that answers only a link it handed out itself; without
it (its file deleted, restored, another install's) the tree is read again and the delta since the
cursor still says what changed — applies it and reports what it changed; a ``410`` is a
``rescan`` event, and so is a deletion since the cursor that no remaining snapshot can place.
The permission sweep rides on the same calls: when ``permission_sweep_interval_s`` has elapsed,
the round also re-reads every permission and reports the files whose rights changed as ``acl``
events (one capability, one schedule).
The events are the snapshot's differences: a change a listing pass or ``get_item`` applied
first is not reported again (that pass synced it).

**Modules.** :mod:`~ancre.connectors.sharepoint.discovery` (sites, libraries),
:mod:`~ancre.connectors.sharepoint.snapshot` (the snapshot and its store),
:mod:`~ancre.connectors.sharepoint.delta` (applying a delta, the cursor, the events),
:mod:`~ancre.connectors.sharepoint.reads` (batched item reads),
:mod:`~ancre.connectors.sharepoint.labels`, :mod:`~ancre.connectors.sharepoint.library` (REST
role assignments, unique scopes, the sweep), :mod:`~ancre.connectors.sharepoint.check`; this
module holds the connector over them.

**Faults.** A site (or library) answering 401/403/404 is left out with its reason in
an ``unreachable`` part of the listing (nothing under it is purged; the rest syncs);
Graph unreachable raises :class:`~ancre.errors.SourceUnavailableError` (the pass stops as
``suspect`` and revokes nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ancre.acl.explain import AclTrace
from ancre.connectors.base import ChangeBatch, ChangeEvent, CollectionFromConfig, Listing, SourceCheck, Unreachable
from ancre.connectors.folder import is_ignored, path_selected
from ancre.connectors.sharepoint.cache import DriveCache
from ancre.connectors.sharepoint.check import check_source
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.connectors.sharepoint.delta import (
    LIBRARY_CHANGED,
    PREFER_ALWAYS,
    PREFER_SHARING,
    DeltaCursor,
    DriveDelta,
    apply_delta,
    delta_events,
)
from ancre.connectors.sharepoint.discovery import REFUSED, discover, refusal, resolve_sites, site_ref, site_segment
from ancre.connectors.sharepoint.graph import GraphClient, GraphError, ResyncRequired
from ancre.connectors.sharepoint.item_rights import ItemRights
from ancre.connectors.sharepoint.labels import LabelReader, label_skip
from ancre.connectors.sharepoint.library import RestFactory, read_library, sweep_drive
from ancre.connectors.sharepoint.permissions import Grant
from ancre.connectors.sharepoint.reads import read_permissions
from ancre.connectors.sharepoint.snapshot import Drive, DriveSnapshotStore
from ancre.errors import AncreError, SourceUnavailableError
from ancre.models import Acl, ChangeKind, SourceItem, nfc

log = logging.getLogger("ancre.sharepoint")

ONENOTE = "unsupported: OneNote notebook"
"""``skip`` reason of a OneNote notebook (a driveItem with ``package.type = "oneNote"``)."""


class SharePointConnector(CollectionFromConfig[SharePointSourceConfig]):
    """A :class:`~ancre.connectors.base.Connector` over a SharePoint Online tenant (module doc).
    Also a ``ChangeFeed`` (:meth:`changes`: a delta round every ``delta_interval_s``, a
    permission sweep every ``permission_sweep_interval_s``; its cursor, :class:`DeltaCursor`, the
    engine keeps), ``PermissionSweep`` (``sweep_permissions``: a forced pass
    re-reads every permission), ``AclsByNativeId`` (the live check reads by drive id + item id),
    ``SubtreeListing`` and ``Closeable``.
    Thread-safe: one lock guards the snapshots."""

    cursor_type = DeltaCursor

    def __init__(
        self,
        cfg: SharePointSourceConfig,
        *,
        graph: GraphClient,
        rest: RestFactory | None,
        snapshots: DriveSnapshotStore,
        ignore: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``snapshots``: where the drive snapshots and delta links are kept (closed by
        :meth:`close`); ``clock``: seconds, monotonic (when a permission sweep is due);
        ``rest``: ``site URL -> SharePointRest`` (``None``: no role assignments, items
        inheriting from a library are readable by nobody)."""
        self.cfg = cfg
        self.source_id = cfg.id
        self.collection = cfg.collection
        self.graph = graph
        self.rest = rest
        self.ignore = ignore
        self.unreachable_reasons: dict[str, str] = {}
        """Relative path prefix (``<site>`` or ``<site>/<library>``) left out of the last
        listing → why (``403 accessDenied: …``)."""
        self.cache = DriveCache(cfg.id, snapshots)
        """The libraries' snapshots (a cache of the tree, kept in ``snapshots``)."""
        self.rights = ItemRights(cfg, graph=graph, rest=rest, cache=self.cache)
        """The rights side: permissions mapped, read live, swept."""
        self._lock = self.cache.lock
        self._label_reader = LabelReader(graph)
        self._clock = clock
        self._last_sweep: float | None = None
        self.permission_failures = 0
        """Items whose permissions could not be read at the last pass (read again at the next)."""

    # ------------------------------------------------------------------------------- discovery
    def _discover(self) -> list[Drive]:
        """The libraries to read now (:func:`~ancre.connectors.sharepoint.discovery.discover`);
        refusals go to :attr:`unreachable_reasons`. Raises ``SourceUnavailableError`` /
        ``GraphError``."""
        drives, refused = discover(self.graph, self.cfg)
        self.unreachable_reasons = refused
        return drives

    # ------------------------------------------------------------------------------------ delta
    def _prefer(self) -> tuple[str, ...]:
        return PREFER_ALWAYS + (PREFER_SHARING if self.cfg.sharing_delta else ())

    def _refresh_drive(self, drive: Drive, start: str | None) -> DriveDelta:
        """Apply the delta since the link ``start`` (``None``: a full enumeration; a 410 gives one
        too), read what must be read, save. Returns the ids whose listing or rights may have
        changed (for the change feed's events) and whether Graph asked for a resync."""
        full = start is None
        resynced = False
        try:
            page = self.graph.delta(drive.drive_id, start, prefer=self._prefer())
        except ResyncRequired as e:
            log.warning("delta of %s/%s: %s, full enumeration", drive.site_seg, drive.name, e)
            page = self.graph.delta(drive.drive_id, None, prefer=self._prefer())
            full = resynced = True
        if drive.list_id is None:
            listed = self.graph.get(f"/drives/{drive.drive_id}/list", params={"$select": "id"})
            drive.list_id = str(listed.get("id") or "") or None
        touched = self._apply(drive, page.items, full=full)
        self.cache.changed()
        library = read_library(self.rest, drive)  # one REST call per library and pass, never per item
        if library != drive.library:
            first = drive.library is None
            drive.library = library
            touched.add(LIBRARY_CHANGED)
            if not first and not full:
                # every item inheriting from the library lists its role assignments: read them again
                sweep_drive(self.graph, self.rest, drive)
        self.permission_failures += sum(1 for e in drive.items.values() if isinstance(e.perms, str))
        if touched or page.delta_link != drive.delta_link:
            drive.delta_link = page.delta_link
            self.cache.save(drive)
        return DriveDelta(drive, frozenset(touched), resynced)

    def _feed_drive(self, drive: Drive, cursor: DeltaCursor | None) -> DriveDelta:
        """One library's round of the change feed, resumed from the link the engine's ``cursor``
        holds for it — never from the snapshot's own: the snapshot answers only a cursor it
        :meth:`~ancre.connectors.sharepoint.snapshot.Drive.serves`. A library the cursor does not
        name (no cursor yet: the baseline; a library new since) is brought up to date from its
        snapshot; a cursor the snapshot does not serve (the connector's own files lost, restored
        or another install's) resumes through :meth:`_resume_unserved`."""
        link = cursor.links.get(drive.drive_id) if cursor is not None else None
        if link is None:
            dd = self._refresh_drive(drive, drive.delta_link)
        elif drive.serves(link):
            dd = self._refresh_drive(drive, link)
        else:
            dd = self._resume_unserved(drive, link)
        if drive.hand_out():
            self.cache.save(drive)
        return dd

    def _resume_unserved(self, drive: Drive, link: str) -> DriveDelta:
        """The round of a library whose snapshot does not serve the engine's ``link``: the tree is
        read again from Graph (a full enumeration), then the delta since ``link`` — what changed
        since the engine's cursor — is applied to it and reported at the items' current paths
        (a deletion or move after the enumeration at its path before). An item deleted between
        ``link`` and the enumeration has no path left to report: the round then asks for a rescan,
        saying so (the full pass purges it); a ``410`` on ``link`` too."""
        log.warning("source %s: %s: the snapshot does not serve the engine's cursor (lost, restored or another "
                    "install's): the library is read again, changes taken from the cursor", self.source_id, drive.prefix)
        drive.items, drive.delta_link, drive.root, drive.served = {}, None, None, []
        self._refresh_drive(drive, None)
        before = {iid: drive.path(iid) for iid in drive.items}
        try:
            page = self.graph.delta(drive.drive_id, link, prefer=self._prefer())
        except ResyncRequired as e:
            return DriveDelta(drive, frozenset(), resynced=True, reason=f"{drive.prefix}: the engine's cursor expired ({e})")
        seen = {str(it.get("id")) for it in page.items}
        gone = {str(it.get("id")) for it in page.items if it.get("deleted") is not None}
        touched = (self._apply(drive, page.items, full=False) | seen) - {drive.root or ""}
        drive.delta_link = page.delta_link
        self.cache.changed()
        self.cache.save(drive)
        unplaced = sorted(i for i in gone if before.get(i) is None)
        if unplaced:
            why = (f"{drive.prefix}: {len(unplaced)} item(s) deleted since the engine's cursor, whose paths only the lost "
                   "snapshot knew: a full pass purges them")
            return DriveDelta(drive, frozenset(), resynced=True, reason=why)
        return DriveDelta(drive, frozenset(touched), before=before)

    # ------------------------------------------------------------------------- reads in batch


    def _apply(self, drive: Drive, raw_items: Sequence[Mapping[str, Any]], *, full: bool) -> set[str]:
        """Apply a delta answer (:func:`~ancre.connectors.sharepoint.delta.apply_delta`), then
        read the permissions (and, with ``exclude_labels``, the labels) it says must be read.
        Returns the touched item ids."""
        applied = apply_delta(drive, raw_items, full=full)
        read_permissions(self.graph, drive, sorted(applied.perm_read))
        if self.cfg.exclude_labels:
            self._label_reader.read(drive, [i for i, e in drive.items.items() if e.kind == "file" and e.labels is None])
        return applied.touched

    # ---------------------------------------------------------------------------------- listing
    def _item(self, drive: Drive, iid: str) -> SourceItem | None:
        e = drive.items.get(iid)
        if e is None or e.kind not in ("file", "package"):
            return None
        path = drive.path(iid)
        if path is None or is_ignored(e.name, self.ignore) or not path_selected(path, self.cfg.include, self.cfg.exclude):
            return None
        if e.kind == "package":
            why = ONENOTE if (e.package or "").casefold() == "onenote" else f"unsupported: {e.package or 'package'}"
            return SourceItem(self.source_id, f"{drive.drive_id}/{iid}", path, e.size, e.mtime, e.qxh, skip=why)
        skip = label_skip(self.cfg.exclude_labels, e)
        return SourceItem(self.source_id, f"{drive.drive_id}/{iid}", path, e.size, e.mtime, e.qxh, skip=skip)


    def refresh(self) -> list[DriveDelta]:
        """Apply every library's delta since its snapshot (see the module doc): a listing's
        round. Raises ``SourceUnavailableError``."""
        return self._round(lambda d: self._refresh_drive(d, d.delta_link))[1]

    def _round(self, step: Callable[[Drive], DriveDelta]) -> tuple[list[Drive], list[DriveDelta]]:
        """``step`` on every library to read now; a library refusing the app (401/403/404) is left
        out with its reason (:attr:`unreachable_reasons`). Returns the libraries discovered and
        the rounds of those that answered. Raises ``SourceUnavailableError``."""
        with self._lock:
            drives = [self.cache.adopt(d) for d in self._discover()]
            self.permission_failures = 0
            out = []
            unreachable = dict(self.unreachable_reasons)
            for d in drives:
                try:
                    out.append(step(d))
                except GraphError as e:
                    if e.status not in REFUSED:
                        raise SourceUnavailableError(f"source {self.source_id}: {d.prefix}: {e}") from e
                    unreachable[d.prefix] = refusal(e)
            for prefix, why in sorted(unreachable.items()):
                log.warning("source %s: %s skipped (nothing under it purged): %s", self.source_id, prefix, why)
            self.unreachable_reasons = unreachable
            self.cache.listed = [d.drive_id for d in drives if d.prefix not in unreachable]
            return drives, out

    def list_items(self) -> Listing:
        """Every file of every selected library (module doc), after applying the deltas.
        Raises ``SourceUnavailableError`` when Graph can't be reached."""
        try:
            self.refresh()
        except GraphError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
        with self._lock:
            out = []
            for drive_id in self.cache.listed:
                d = self.cache.drives[drive_id]
                out += [it for it in (self._item(d, i) for i in d.items) if it is not None]
            refused = tuple(Unreachable(p, why) for p, why in sorted(self.unreachable_reasons.items()))
        return Listing(tuple(sorted(out, key=lambda it: it.path)), refused)

    def get_item(self, path: str) -> SourceItem | None:
        """The current entry at ``path``: the delta of its library is applied first (one request
        when nothing changed), ``None`` if there is no such file. Raises
        ``SourceUnavailableError`` when Graph can't be reached."""
        rel = nfc(path.strip("/"))
        with self._lock:
            self.cache.load_saved()
            drive = next((d for d in self.cache.drives.values() if rel.startswith(d.prefix + "/")), None)
            try:
                if drive is None or drive.drive_id not in self.cache.listed:
                    self.refresh()
                else:
                    self._refresh_drive(drive, drive.delta_link)
            except GraphError as e:
                if e.status in REFUSED:
                    return None
                raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
            hit = self.cache.find(rel)
            return self._item(*hit) if hit is not None else None

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The files below the folder ``prefix`` in the snapshot."""
        pre = nfc(prefix.strip("/")) + "/"
        with self._lock:
            self.cache.load_saved()
            out = []
            for d in self.cache.drives.values():
                for iid in d.items:
                    it = self._item(d, iid)
                    if it is not None and it.path.startswith(pre):
                        out.append(it)
            return out

    # ---------------------------------------------------------------------------------- content
    def fetch_content(self, item: SourceItem) -> bytes:
        """The file's bytes by drive id + item id. ``OSError`` when this file can't be read (gone,
        refused); ``SourceUnavailableError`` when Graph can't be reached."""
        if item.skip is not None:
            raise OSError(f"{item.path}: {item.skip}: not read")
        drive_id, _, iid = item.native_id.partition("/")
        try:
            return self.graph.download(drive_id, iid)
        except GraphError as e:
            raise OSError(f"{item.path}: {e.status} {e.code}: {e.message}") from e

    # ---------------------------------------------------------------------------------- rights
    def explain(self, item: SourceItem) -> tuple[Acl, tuple[Grant, ...]]:
        """The item's ACL and the grants behind it (which permission, link or group decided):
        :meth:`~ancre.connectors.sharepoint.item_rights.ItemRights.explain`."""
        return self.rights.explain(item)

    def explain_path(self, path: str) -> str:
        """``ancre acl explain``'s path (``AclExplainable``): a relative path
        (``Direction/Documents/x.docx``) or a web URL under one of the libraries
        (``https://…/sites/Direction/Documents/x.docx``) → the relative path sync gives the file.
        Raises ``ValueError`` for a URL under no known library."""
        from urllib.parse import unquote

        p = path.strip()
        if "://" not in p:
            return nfc(p.strip("/"))
        with self._lock:
            self.cache.load_saved()
            for d in self.cache.drives.values():
                base = unquote(d.url).rstrip("/") + "/"
                if unquote(p).startswith(base):
                    return nfc(f"{d.prefix}/{unquote(p)[len(base):]}".strip("/"))
        raise ValueError(f"{path}: not under a library of source {self.source_id}")

    def explain_acl(self, path: str) -> AclTrace:
        """``AclExplainable.explain_acl``: the rights on ``path`` read live (as
        :meth:`read_acls`), as an ``ancre.acl.explain.AclTrace`` in its ``grants`` form; the
        permission, link or role assignment behind each principal is in :meth:`explain`.
        Raises ``SourceUnavailableError``."""
        item = self.get_item(path)
        acl = self.read_acls([path]).get(path) if item is not None else None
        if item is None or acl is None:
            return AclTrace(self.source_id, path, unreadable="not a file of this source", indexable=False)
        via: dict[str, str] = {}
        for g in self.explain(item)[1]:
            via.setdefault(g.principal, g.via)
        return AclTrace(self.source_id, path, grants=acl, indexable=item.skip is None, grant_via=via)

    def fetch_acl(self, item: SourceItem) -> Acl:
        """The item's read ACL from the permissions read at the last delta or sweep. Never
        raises for unreadable permissions (``Acl.nobody``)."""
        return self.rights.explain(item)[0]

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each path: its permissions read from Graph now (20 items per
        ``$batch``). A path not in the snapshot, or whose item Graph no longer has (404), is left
        out. Raises ``SourceUnavailableError``. The query-time check reads by id instead
        (:meth:`read_acls_by_id`): a path names what is there now, an id what was indexed."""
        return self.rights.read_acls(paths)

    def read_acls_by_id(self, native_ids: Sequence[str]) -> Mapping[str, Acl]:
        """``AclsByNativeId``: the current ACL of each item by its ``<drive id>/<item id>``
        (:meth:`~ancre.connectors.sharepoint.item_rights.ItemRights.read_acls_by_id`). Raises
        ``SourceUnavailableError``."""
        return self.rights.read_acls_by_id(native_ids)

    def sweep_permissions(self) -> list[str]:
        """Re-read every item's permissions and every library's role assignments (Graph misses
        some sharing changes): the unique scopes only when SharePoint REST says which items have
        them. Returns the paths of the files whose ACL changed (for ``SyncEngine.refresh_acls``).
        Raises ``SourceUnavailableError``."""
        return self.rights.sweep()

    def location(self, item: SourceItem) -> str:
        """The web URL of the item's folder (the library's for a file at its root)."""
        hit = self.cache.locate(item.native_id)
        if hit is None:
            return ""
        d, iid = hit
        with self._lock:
            e = d.items[iid]
            parent = d.items.get(e.parent or "")
            if parent is not None and parent.url:
                return parent.url.rstrip("/") + "/"
            return d.url.rstrip("/") + "/"

    # ----------------------------------------------------------------------------- change feed
    @property
    def poll_interval_s(self) -> float:
        """``ChangeFeed``: seconds between two delta rounds (``delta_interval_s``)."""
        return float(self.cfg.delta_interval_s)

    def changes(self, cursor: DeltaCursor | None) -> ChangeBatch[DeltaCursor]:
        """``ChangeFeed``: one delta round of every library as change events, and the drives'
        delta links as the next cursor. Each library resumes from the link ``cursor`` holds for
        it (:meth:`_feed_drive`): the snapshot kept in ``sharepoint.sqlite3`` is a cache of the
        tree, never where the feed resumes — deleted, the round reads the tree again and still
        reports what changed since ``cursor``. ``cursor`` ``None``: the baseline (the snapshots
        are brought up to date, no event). Otherwise ``modified`` for new, changed and re-shared
        files, ``deleted`` for files gone (by their last known path), ``acl`` for a folder whose
        sharing changed (its path covers what is under it), ``acl`` without a path when a
        library's role assignments changed, and ``rescan`` (with its ``reason``) when Graph
        answered ``410 Gone`` ("driveItem: delta": resync) or what changed since ``cursor`` can't
        be placed — what vanished is purged by the full pass it brings. A library refusing the
        app keeps its link in the next cursor. When ``permission_sweep_interval_s`` has elapsed
        since the last sweep (or since the first call), the round also sweeps every permission
        (:meth:`sweep_permissions`): ``acl`` for each file whose rights changed; a failed sweep is
        logged and tried again at the next call. Raises ``SourceUnavailableError`` when Graph
        can't be reached (the engine keeps the old cursor)."""
        with self._lock:
            self.cache.load_saved()
            before = {d.drive_id: {i: d.path(i) for i in d.items} for d in self.cache.drives.values()}
            try:
                drives, deltas = self._round(lambda d: self._feed_drive(d, cursor))
            except GraphError as e:
                raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
            events = [] if cursor is None else [ev for dd in deltas for ev in delta_events(self.source_id, dd, before)]
            events += self._sweep_if_due()
            kept = cursor.links if cursor is not None else {}
            links = {d.drive_id: kept[d.drive_id] for d in drives if d.drive_id in kept}  # refused: resumed later
            links.update({dd.drive.drive_id: dd.drive.delta_link for dd in deltas if dd.drive.delta_link})
        return ChangeBatch(tuple(events), DeltaCursor(links=links))

    def _sweep_if_due(self) -> list[ChangeEvent]:
        """``acl`` events of a permission sweep when one is due (see :meth:`changes`), else ``[]``."""
        interval = self.cfg.permission_sweep_interval_s
        now = self._clock()
        if self._last_sweep is None:
            self._last_sweep = now
        if interval <= 0 or now - self._last_sweep < interval:
            return []
        try:
            changed = self.sweep_permissions()
        except (AncreError, OSError) as e:
            log.warning("permission sweep of %s failed (tried again at the next delta round): %s", self.source_id, e)
            return []
        self._last_sweep = now
        return [ChangeEvent(self.source_id, p, ChangeKind.ACL) for p in changed]


    def check(self) -> SourceCheck:
        """``ancre check`` (:func:`~ancre.connectors.sharepoint.check.check_source`): a token,
        the sites and their libraries, one library's role assignments. Never raises."""
        return check_source(self.cfg, self.graph, self.rest)

    def close(self) -> None:
        """Close the Graph client and the snapshot store; idempotent."""
        self.graph.close()
        self.cache.close()


__all__ = ["SharePointConnector", "resolve_sites", "site_ref", "site_segment"]
