"""SharePoint Online connector: document libraries read through Microsoft Graph ``driveItem``
delta, permissions through Graph ``/permissions`` (batched) and SharePoint REST role
assignments (README "SharePoint").

**Listing.** One source = one tenant. Per site (``sites``, or every site), per document library
(drive) matching ``libraries`` / ``libraries_exclude``, the connector keeps a *snapshot* of the
drive — every item's name, parent, kind, size, ``quickXorHash``, permissions and labels — and the
drive's ``deltaLink``, both in a store of its own (:mod:`ancre.connectors.sharepoint.snapshot`). A pass
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

**Faults.** A site (or library) answering 401/403/404 is left out with its reason in
an ``unreachable`` part of the listing (nothing under it is purged; the rest syncs);
Graph unreachable raises :class:`~ancre.errors.SourceUnavailableError` (the pass stops as
``suspect`` and revokes nothing).
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ancre.acl.explain import AclTrace
from ancre.connectors.base import ChangeBatch, ChangeEvent, CollectionFromConfig, Listing, SourceCheck, Unreachable
from ancre.connectors.folder import is_ignored, path_selected
from ancre.connectors.sharepoint.auth import SecretCredential
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.connectors.sharepoint.graph import BatchRequest, GraphClient, GraphError, ResyncRequired
from ancre.connectors.sharepoint.permissions import Grant, Mapped, item_acl
from ancre.connectors.sharepoint.rest import RestError
from ancre.connectors.sharepoint.snapshot import Drive, DriveSnapshotStore, Entry
from ancre.errors import AncreError, ConfigError, SourceUnavailableError
from ancre.models import Acl, ChangeKind, SourceItem, nfc

log = logging.getLogger("ancre.sharepoint")

PREFER_SHARING = ("deltashowsharingchanges", "hierarchicalsharing", "deltatraversepermissiongaps")
PREFER_ALWAYS = ("deltashowremovedasdeleted",)
SHARED_CHANGED = "@microsoft.graph.sharedChanged"
_REFUSED = (401, 403, 404)
"""Statuses of a site or library that refuses us (or is gone): skipped with a reason."""
LIBRARY_CHANGED = ""
"""Marker in a refresh's touched ids: the library's role assignments changed."""
_PERM_FIELDS = ("id", "roles", "link", "grantedToV2", "grantedToIdentitiesV2", "expirationDateTime")
ONENOTE = "unsupported: OneNote notebook"
"""``skip`` reason of a OneNote notebook (a driveItem with ``package.type = "oneNote"``)."""

RestFactory = Callable[[str], Any]
"""``site URL -> SharePointRest`` (its ``role_assignments(list_id)``)."""


def _epoch(iso: str | None) -> float:
    if not iso:
        return 0.0
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


def site_segment(url: str) -> str:
    """How a site starts its items' paths: its server-relative URL without the leading ``/``
    (``https://h/sites/Direction`` → ``sites/Direction``, ``…/teams/Projets`` →
    ``teams/Projets``, a subsite ``…/sites/A/Projets`` → ``sites/A/Projets``), percent-decoded,
    NFC; ``""`` for the root site."""
    from urllib.parse import unquote

    return nfc(unquote(urlsplit(url).path).strip("/"))


def site_ref(url: str) -> str:
    """The Graph path of a site URL: ``https://h/sites/X`` → ``/sites/h:/sites/X``."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return f"/sites/{parts.hostname}:{quote(path)}" if path else f"/sites/{parts.hostname}"


def resolve_sites(graph: Any, urls: Sequence[str]) -> list[tuple[str, str]]:
    """``(Graph site id, web URL)`` of each site URL (every site of the tenant when ``urls`` is
    empty); sites that refuse us (401/403/404) are left out. Raises ``GraphError`` /
    ``SourceUnavailableError`` otherwise."""
    out: list[tuple[str, str]] = []
    if not urls:
        return [(str(s["id"]), str(s.get("webUrl", ""))) for s in graph.pages("/sites", params={"search": "*"})]
    for url in urls:
        try:
            site = graph.get(site_ref(url))
        except GraphError as e:
            if e.status in _REFUSED:
                continue
            raise
        out.append((str(site["id"]), str(site.get("webUrl") or url)))
    return out


def _dump_assignment(ra: Any) -> dict[str, Any]:
    return {
        "principal_id": int(ra.principal_id), "principal_type": int(ra.principal_type),
        "login_name": str(ra.login_name or ""), "title": str(ra.title or ""),
        "roles": [[str(r.name), int(r.base_permissions_low), int(getattr(r, "base_permissions_high", 0) or 0)] for r in ra.roles],
    }


class DeltaCursor(BaseModel):
    """The SharePoint change feed's cursor (persisted by the engine): ``links``, drive id → the
    ``@odata.deltaLink`` the drive's last delta round ended on ("driveItem: delta")."""

    model_config = ConfigDict(frozen=True)

    links: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class DriveDelta:
    """What one library's delta round did: ``touched``, the item ids whose listing or rights may
    have changed (:data:`LIBRARY_CHANGED` among them when the library's role assignments did),
    and ``resynced``, whether Graph answered ``410 Gone`` (the drive was enumerated again)."""

    drive: Drive
    touched: frozenset[str]
    resynced: bool = False


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
        self.snapshots = snapshots
        self.ignore = ignore
        self.unreachable_reasons: dict[str, str] = {}
        """Relative path prefix (``<site>`` or ``<site>/<library>``) left out of the last
        listing → why (``403 accessDenied: …``)."""
        self._drives: dict[str, Drive] = {}
        self._lock = threading.RLock()
        self._upn: dict[str, str | None] = {}
        self._labels: dict[str, str] | None = None
        self._listed: list[str] = []
        self._paths: dict[str, tuple[str, str]] | None = None
        self._loaded = False
        self._clock = clock
        self._last_sweep: float | None = None
        self.permission_failures = 0
        """Items whose permissions could not be read at the last pass (read again at the next)."""

    # ------------------------------------------------------------------------------- discovery
    def _sites(self) -> list[tuple[str, dict[str, Any] | str]]:
        """``(site segment, site JSON or refusal reason)`` for every configured site."""
        out: list[tuple[str, dict[str, Any] | str]] = []
        if not self.cfg.sites:
            for site in self.graph.pages("/sites", params={"search": "*"}):
                out.append((site_segment(str(site.get("webUrl", ""))), site))
            return out
        for url in self.cfg.sites:
            try:
                out.append((site_segment(url), self.graph.get(site_ref(url))))
            except GraphError as e:
                if e.status not in _REFUSED:
                    raise
                out.append((site_segment(url), f"{e.status} {e.code}: {e.message}"))
        return out

    def _library_selected(self, name: str) -> bool:
        low = name.casefold()
        if self.cfg.libraries and not any(fnmatch.fnmatchcase(low, p.casefold()) for p in self.cfg.libraries):
            return False
        return not any(fnmatch.fnmatchcase(low, p.casefold()) for p in self.cfg.libraries_exclude)

    def _discover(self) -> list[Drive]:
        """The libraries to read now (sites and drives listed again each pass); refusals go to
        :attr:`unreachable`. Raises ``SourceUnavailableError`` when Graph can't be reached or
        no site at all answers."""
        drives: list[Drive] = []
        refused: dict[str, str] = {}
        sites = self._sites()
        for seg, site in sites:
            if isinstance(site, str):
                refused[seg] = site
                continue
            try:
                for d in self.graph.pages(f"/sites/{site['id']}/drives"):
                    library = d.get("driveType", "documentLibrary") == "documentLibrary"
                    if not library or not self._library_selected(str(d.get("name", ""))):
                        continue
                    drives.append(Drive(
                        str(site["id"]), str(site.get("webUrl", "")), seg, str(d["id"]), str(d.get("name", "")),
                        str(d.get("webUrl", "")),
                    ))
            except GraphError as e:
                if e.status not in _REFUSED:
                    raise
                refused[seg] = f"{e.status} {e.code}: {e.message}"
        if sites and len(refused) == len(sites):
            raise SourceUnavailableError(
                f"source {self.source_id}: no site could be read ({'; '.join(f'{k}: {v}' for k, v in refused.items())})"
            )
        self.unreachable_reasons = refused
        return drives

    # -------------------------------------------------------------------------------- snapshot
    def _load(self, drive: Drive) -> Drive:
        """``drive`` with the snapshot kept for it (the one in memory, else the store's)."""
        have = self._drives.get(drive.drive_id)
        if have is not None:
            return have
        raw = self.snapshots.load(self.source_id, drive.drive_id)
        if raw:
            drive.restore(raw)
        self._drives[drive.drive_id] = drive
        self._paths = None
        return drive

    def _save(self, drive: Drive) -> None:
        self.snapshots.save(self.source_id, drive.drive_id, drive.dumps())

    def _load_saved(self, *, again: bool = False) -> None:
        """Every drive snapshot of this source kept in the store (a connector that has not
        listed yet — the query side's — finds items by path through them). ``again``: re-read
        them (another process — the daemon — may have applied deltas since), except the drives
        this connector refreshed itself."""
        if self._loaded and not again:
            return
        self._loaded = True
        self._paths = None
        for drive_id in self.snapshots.drive_ids(self.source_id):
            if drive_id in self._drives and (not again or drive_id in self._listed):
                continue
            self._drives.pop(drive_id, None)
            raw = self.snapshots.load(self.source_id, drive_id)
            if raw:
                self._drives[drive_id] = Drive.loads(drive_id, raw)

    # ------------------------------------------------------------------------------------ delta
    def _prefer(self) -> tuple[str, ...]:
        return PREFER_ALWAYS + (PREFER_SHARING if self.cfg.sharing_delta else ())

    def _refresh_drive(self, drive: Drive) -> DriveDelta:
        """Apply the delta since the drive's link (or a full enumeration after a 410 or on the
        first pass), read what must be read, save. Returns the ids whose listing or rights may
        have changed (for the change feed's events) and whether Graph asked for a resync."""
        full = drive.delta_link is None
        resynced = False
        try:
            page = self.graph.delta(drive.drive_id, drive.delta_link, prefer=self._prefer())
        except ResyncRequired as e:
            log.warning("delta of %s/%s: %s, full enumeration", drive.site_seg, drive.name, e)
            page = self.graph.delta(drive.drive_id, None, prefer=self._prefer())
            full = resynced = True
        if drive.list_id is None:
            listed = self.graph.get(f"/drives/{drive.drive_id}/list", params={"$select": "id"})
            drive.list_id = str(listed.get("id") or "") or None
        touched = self._apply(drive, page.items, full=full)
        self._paths = None
        library = self._read_library(drive)  # one REST call per library and pass, never per item
        if library != drive.library:
            first = drive.library is None
            drive.library = library
            touched.add(LIBRARY_CHANGED)
            if not first and not full:
                # every item inheriting from the library lists its role assignments: read them again
                self._sweep_drive(drive)
        self.permission_failures += sum(1 for e in drive.items.values() if isinstance(e.perms, str))
        if touched or page.delta_link != drive.delta_link:
            drive.delta_link = page.delta_link
            self._save(drive)
        return DriveDelta(drive, frozenset(touched), resynced)

    def _apply(self, drive: Drive, raw_items: Sequence[Mapping[str, Any]], *, full: bool) -> set[str]:
        latest: dict[str, Mapping[str, Any]] = {}
        for it in raw_items:  # an item seen twice takes its last occurrence
            latest.pop(str(it.get("id")), None)
            latest[str(it.get("id"))] = it
        old = drive.items
        items: dict[str, Entry] = {} if full else dict(old)
        perm_read: set[str] = set()
        perm_roots: set[str] = set()
        touched: set[str] = set()
        for iid, it in latest.items():
            if it.get("deleted") is not None:
                if items.pop(iid, None) is not None:
                    touched.add(iid)
                continue
            if it.get("root") is not None:
                drive.root = iid
                items[iid] = Entry("", None, "root", url=str(it.get("webUrl") or drive.url))
                continue
            prev = old.get(iid)
            kind = _kind(it) or (prev.kind if prev is not None else None)
            if kind is None:
                # no file/folder/package facet (driveItem resource: facets say what an item is):
                # not known to be a file, so not listed as one
                log.warning("delta of %s: item %s has no file, folder or package facet: left out", drive.prefix, iid)
                continue
            parent = (it.get("parentReference") or {}).get("id")
            hashes = (it.get("file") or {}).get("hashes") or {}
            e = Entry(
                name=nfc(str(it.get("name") or (prev.name if prev else iid))),
                parent=str(parent) if parent else (prev.parent if prev else drive.root),
                kind=kind, size=int(it.get("size") or 0),
                qxh=hashes.get("quickXorHash") or hashes.get("sha256Hash") or it.get("cTag") or it.get("eTag"),
                mtime=_epoch(it.get("lastModifiedDateTime")), url=str(it.get("webUrl") or ""),
                ctag=str(it.get("cTag") or it.get("eTag") or "") or None,
                package=str((it.get("package") or {}).get("type") or "") or (prev.package if prev else None),
            )
            moved = prev is not None and (prev.parent != e.parent or prev.name != e.name)
            shared = str(it.get(SHARED_CHANGED, "")).lower() == "true"
            if prev is not None and not full:
                e.perms = prev.perms
                e.labels = prev.labels if (prev.qxh, prev.ctag) == (e.qxh, e.ctag) else None
            if prev is None or full or not isinstance(e.perms, list) or shared or (moved and prev.parent != e.parent):
                perm_read.add(iid)
            if kind != "file" and (shared or (moved and prev is not None and prev.parent != e.parent)):
                perm_roots.add(iid)
            if prev is None or moved or shared or prev.qxh != e.qxh or prev.size != e.size:
                touched.add(iid)
            items[iid] = e
        # what is under a deleted folder is gone too (Graph may not list each child)
        drive.items = items
        for iid in [i for i in items if not drive.attached(i)]:
            del items[iid]
            touched.add(iid)
        if perm_roots:
            for iid in items:
                if any(a in perm_roots for a in drive.ancestors(iid)):
                    perm_read.add(iid)
                    touched.add(iid)
        for iid, e in items.items():
            if iid not in perm_read and e.kind != "root" and not isinstance(e.perms, list):
                perm_read.add(iid)  # a read that failed (or never happened) is tried again at every pass
                touched.add(iid)
        self._read_permissions(drive, [i for i in perm_read if i in items and items[i].kind != "root"])
        if self.cfg.exclude_labels:
            self._read_labels(drive, [i for i, e in items.items() if e.kind == "file" and e.labels is None])
        return touched

    # ------------------------------------------------------------------------- reads in batch
    def _batch_get(self, drive_id: str, ids: Sequence[str], suffix: str, method: str = "GET") -> dict[str, Any]:
        """``{item id: JSON body | "<status> <message>"}`` for ``<method> /drives/{d}/items/{i}/<suffix>``,
        20 per ``$batch``. Raises ``SourceUnavailableError`` (Graph down)."""
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 20):
            chunk = ids[start:start + 20]
            reqs = [
                BatchRequest(id=str(n), method=method, url=f"/drives/{drive_id}/items/{iid}/{suffix}",
                             body={} if method == "POST" else None,
                             headers={"Content-Type": "application/json"} if method == "POST" else None)
                for n, iid in enumerate(chunk)
            ]
            answers = self.graph.batch(reqs)
            for n, iid in enumerate(chunk):
                r = answers.get(str(n))
                if r is None:
                    out[iid] = "no answer in $batch"
                elif 200 <= r.status < 300:
                    out[iid] = r.body or {}
                else:
                    err = (r.body or {}).get("error") if isinstance(r.body, Mapping) else None
                    msg = f"{err.get('code', '')}: {err.get('message', '')}" if isinstance(err, Mapping) else ""
                    if r.status >= 500 or r.status == 429:
                        raise SourceUnavailableError(f"Graph {suffix} of {iid}: {r.status} {msg}")
                    out[iid] = f"{r.status} {msg}".strip()
        return out

    def _read_permissions(self, drive: Drive, ids: Sequence[str]) -> None:
        for iid, body in self._batch_get(drive.drive_id, list(ids), "permissions").items():
            drive.items[iid].perms = body if isinstance(body, str) else _perms(body)

    def _read_labels(self, drive: Drive, ids: Sequence[str]) -> None:
        for iid, body in self._batch_get(drive.drive_id, list(ids), "extractSensitivityLabels", "POST").items():
            if isinstance(body, str):
                drive.items[iid].labels = body
                continue
            labels: list[str] = []
            for lab in body.get("labels") or ():
                for k in ("sensitivityLabelId", "id", "name", "displayName"):
                    if lab.get(k):
                        labels.append(str(lab[k]).casefold())
                name = self._label_names().get(str(lab.get("sensitivityLabelId", "")).casefold())
                if name:
                    labels.append(name.casefold())
            drive.items[iid].labels = labels

    def _label_names(self) -> dict[str, str]:
        """Label id → name (``GET /security/informationProtection/sensitivityLabels``), read once;
        empty when Graph refuses it (then ``exclude_labels`` match label ids only)."""
        if self._labels is None:
            try:
                self._labels = {
                    str(x.get("id", "")).casefold(): str(x.get("name") or x.get("displayName") or "")
                    for x in self.graph.pages("/security/informationProtection/sensitivityLabels")
                }
            except GraphError as e:
                log.warning("sensitivity label names unavailable (%s): exclude_labels match ids only", e)
                self._labels = {}
        return self._labels

    def _read_library(self, drive: Drive) -> list[dict[str, Any]] | str:
        """The library's role assignments (REST), dumped; a ``str`` when they can't be read
        (items inheriting from the library are then readable by nobody)."""
        if self.rest is None:
            drive.rest_refused = "SharePoint REST not configured"
            return "SharePoint REST not configured"
        try:
            client = self.rest(drive.site_url)
            got = [_dump_assignment(ra) for ra in client.role_assignments(drive.list_id)]
            drive.rest_refused = None
            return got
        except SourceUnavailableError:
            raise
        except (AncreError, OSError, ValueError) as e:
            log.warning("role assignments of %s/%s: %s", drive.site_seg, drive.name, e)
            if isinstance(e, ConfigError) or (isinstance(e, RestError) and e.status in (401, 403)):
                drive.rest_refused = f"SharePoint REST of {drive.site_url} refused the app: {e}"[:300]
            return f"role assignments unreadable: {e}"[:300]
        except Exception as e:  # office365's own errors (ClientRequestException…)
            status = getattr(getattr(e, "response", None), "status_code", None)
            if status is not None and status >= 500:
                raise SourceUnavailableError(f"SharePoint REST {drive.site_url}: {e}") from e
            return f"role assignments unreadable: {e}"[:300]

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
        skip = self._label_skip(e)
        return SourceItem(self.source_id, f"{drive.drive_id}/{iid}", path, e.size, e.mtime, e.qxh, skip=skip)

    def _label_skip(self, e: Entry) -> str | None:
        if not self.cfg.exclude_labels:
            return None
        if isinstance(e.labels, str):
            return f"label_unreadable: {e.labels}"
        if e.labels is None:
            return "label_unreadable: not read"
        excluded = {x.casefold() for x in self.cfg.exclude_labels}
        hit = next((lab for lab in e.labels if lab in excluded), None)
        return f"label: {hit} is in exclude_labels" if hit else None

    def refresh(self) -> list[DriveDelta]:
        """Apply every library's delta (see the module doc). Raises ``SourceUnavailableError``."""
        with self._lock:
            drives = [self._load(d) for d in self._discover()]
            self.permission_failures = 0
            out = []
            unreachable = dict(self.unreachable_reasons)
            for d in drives:
                try:
                    out.append(self._refresh_drive(d))
                except GraphError as e:
                    if e.status not in _REFUSED:
                        raise SourceUnavailableError(f"source {self.source_id}: {d.prefix}: {e}") from e
                    unreachable[d.prefix] = f"{e.status} {e.code}: {e.message}"
            for prefix, why in sorted(unreachable.items()):
                log.warning("source %s: %s skipped (nothing under it purged): %s", self.source_id, prefix, why)
            self.unreachable_reasons = unreachable
            self._listed = [d.drive_id for d in drives if d.prefix not in unreachable]
            return out

    def list_items(self) -> Listing:
        """Every file of every selected library (module doc), after applying the deltas.
        Raises ``SourceUnavailableError`` when Graph can't be reached."""
        try:
            self.refresh()
        except GraphError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
        with self._lock:
            out = []
            for drive_id in self._listed:
                d = self._drives[drive_id]
                out += [it for it in (self._item(d, i) for i in d.items) if it is not None]
            refused = tuple(Unreachable(p, why) for p, why in sorted(self.unreachable_reasons.items()))
        return Listing(tuple(sorted(out, key=lambda it: it.path)), refused)

    def _find(self, path: str) -> tuple[Drive, str] | None:
        """The drive and item id at ``path``; a miss re-reads the saved snapshots once (a
        connector of the query side finds what the daemon listed since)."""
        with self._lock:
            self._load_saved()
            hit = self._path_index().get(path)
            if hit is None:
                self._load_saved(again=True)
                hit = self._path_index().get(path)
            if hit is None or hit[0] not in self._drives:
                return None
            return self._drives[hit[0]], hit[1]

    def _path_index(self) -> dict[str, tuple[str, str]]:
        """path → (drive id, item id) of every item, rebuilt after any snapshot change."""
        if self._paths is None:
            index: dict[str, tuple[str, str]] = {}
            for d in self._drives.values():
                for iid in d.items:
                    p = d.path(iid)
                    if p is not None:
                        index[p] = (d.drive_id, iid)
            self._paths = index
        return self._paths

    def get_item(self, path: str) -> SourceItem | None:
        """The current entry at ``path``: the delta of its library is applied first (one request
        when nothing changed), ``None`` if there is no such file. Raises
        ``SourceUnavailableError`` when Graph can't be reached."""
        rel = nfc(path.strip("/"))
        with self._lock:
            self._load_saved()
            drive = next((d for d in self._drives.values() if rel.startswith(d.prefix + "/")), None)
            try:
                if drive is None or drive.drive_id not in self._listed:
                    self.refresh()
                else:
                    self._refresh_drive(drive)
            except GraphError as e:
                if e.status in _REFUSED:
                    return None
                raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
            hit = self._find(rel)
            return self._item(*hit) if hit is not None else None

    def list_under(self, prefix: str) -> list[SourceItem]:
        """The files below the folder ``prefix`` in the snapshot."""
        pre = nfc(prefix.strip("/")) + "/"
        with self._lock:
            self._load_saved()
            out = []
            for d in self._drives.values():
                for iid in d.items:
                    it = self._item(d, iid)
                    if it is not None and it.path.startswith(pre):
                        out.append(it)
            return out

    # ---------------------------------------------------------------------------------- content
    def _locate(self, item: SourceItem) -> tuple[Drive, str] | None:
        drive_id, _, iid = item.native_id.partition("/")
        with self._lock:
            self._load_saved()
            d = self._drives.get(drive_id)
            return (d, iid) if d is not None and iid in d.items else None

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
    def _resolve_upn(self, upn: str) -> str | None:
        key = upn.casefold()
        if key not in self._upn:
            try:
                self._upn[key] = str(self.graph.get(f"/users/{quote(upn)}", params={"$select": "id"})["id"])
            except GraphError as e:
                if e.status != 404:
                    raise
                self._upn[key] = None
        return self._upn[key]

    def _mapped(self, drive: Drive, perms: list[dict[str, Any]] | str | None) -> Mapped:
        """The ACL of an item of ``drive`` from its Graph permission list (``None``: not read)."""
        try:
            return item_acl(
                "not read" if perms is None else perms,
                site_id=drive.site_id, tenant_id=self.cfg.tenant_id, policy=self.cfg.sharing_links,
                resolve_upn=self._resolve_upn, site_groups_unresolvable=drive.rest_refused,
            )
        except GraphError as e:
            return Mapped(Acl.nobody(f"acl_unreadable: {e.status} {e.code}: {e.message}"))

    def explain(self, item: SourceItem) -> tuple[Acl, tuple[Grant, ...]]:
        """The item's ACL and the grants behind it (which permission, link or group decided)."""
        hit = self._locate(item)
        if hit is None:
            return Acl.nobody(f"{item.path}: not in the SharePoint listing"), ()
        d, iid = hit
        with self._lock:
            m = self._mapped(d, _perms_or_reason(d.items.get(iid)))
        return m.acl, m.grants

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
            self._load_saved()
            for d in self._drives.values():
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
        return self.explain(item)[0]

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each path: its permissions read from Graph now (20 items per
        ``$batch``). A path not in the snapshot, or whose item Graph no longer has (404), is left
        out. Raises ``SourceUnavailableError``. The query-time check reads by id instead
        (:meth:`read_acls_by_id`): a path names what is there now, an id what was indexed."""
        ids: dict[str, str] = {}
        for path in paths:
            hit = self._find(nfc(path.strip("/")))
            if hit is not None:
                ids[path] = f"{hit[0].drive_id}/{hit[1]}"
        got = self.read_acls_by_id(list(ids.values()))
        return {path: got[nid] for path, nid in ids.items() if nid in got}

    def read_acls_by_id(self, native_ids: Sequence[str]) -> Mapping[str, Acl]:
        """``AclsByNativeId``: the current ACL of each item by its ``<drive id>/<item id>``, its
        permissions read from Graph now (20 items per ``$batch``, the drives' requests in
        parallel up to ``max_in_flight``). An id of no known library, or whose item Graph no longer
        has (404), is left out. Raises ``SourceUnavailableError``."""
        by_drive: dict[str, list[str]] = {}
        for nid in dict.fromkeys(native_ids):
            drive_id, _, iid = nid.partition("/")
            by_drive.setdefault(drive_id, []).append(iid)
        with self._lock:
            self._load_saved()
            drives = {k: self._drives.get(k) for k in by_drive}
            if any(d is None for d in drives.values()):
                self._load_saved(again=True)
                drives = {k: self._drives.get(k) for k in by_drive}
        out: dict[str, Acl] = {}
        try:
            for drive_id, iids in by_drive.items():
                d = drives[drive_id]
                if d is None:
                    continue
                for iid, body in self._batch_get(drive_id, iids, "permissions").items():
                    if isinstance(body, str) and body.startswith("404"):
                        continue
                    perms = body if isinstance(body, str) else _perms(body)
                    with self._lock:
                        out[f"{drive_id}/{iid}"] = self._mapped(d, perms).acl
        except GraphError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
        return out

    def sweep_permissions(self) -> list[str]:
        """Re-read every item's permissions and every library's role assignments (Graph misses
        some sharing changes), as :meth:`_sweep_drive` does: the unique scopes only when
        SharePoint REST says which items have them. Returns the paths of the files whose ACL
        changed (for ``SyncEngine.refresh_acls``). Raises ``SourceUnavailableError``."""
        changed: list[str] = []
        with self._lock:
            self._load_saved()
            for d in list(self._drives.values()):
                before = {i: self._mapped(d, e.perms).acl.digest() for i, e in d.items.items() if e.kind == "file"}
                d.library = self._read_library(d)
                try:
                    self._sweep_drive(d)
                except GraphError as e:
                    raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
                self._save(d)
                for i, digest in before.items():
                    entry = d.items.get(i)
                    if entry is not None and self._mapped(d, entry.perms).acl.digest() != digest:
                        p = d.path(i)
                        if p is not None:
                            changed.append(p)
        return sorted(changed)

    def _sweep_drive(self, d: Drive) -> None:
        """Re-read the permissions of every item of ``d``, cheaply: SharePoint REST lists which
        items have unique role assignments (``HasUniqueRoleAssignments``, 5,000 items per
        request); Graph is asked the permissions of those and of the library's root only, and an
        item that inherits takes its nearest unique folder's (or the root's) — which is what Graph
        would list for it ("effective sharing permissions"). Without REST (refused, not
        configured, unreadable) every item is read. Raises ``GraphError`` /
        ``SourceUnavailableError``."""
        ids = [i for i, e in d.items.items() if e.kind != "root"]
        scopes = self._unique_scopes(d)
        if scopes is None or d.root is None:
            self._read_permissions(d, ids)
            return
        unique = [i for i in ids if scopes.get(i, True)]  # an item REST did not list is read itself
        self._read_permissions(d, [d.root, *unique])
        for i in ids:
            if scopes.get(i, True):
                continue
            src = next((a for a in d.ancestors(i) if scopes.get(a, True)), d.root)
            got = d.items[src].perms
            d.items[i].perms = [dict(p) for p in got] if isinstance(got, list) else got

    def _unique_scopes(self, d: Drive) -> dict[str, bool] | None:
        """``item id -> HasUniqueRoleAssignments`` of the items of ``d`` (matched on their
        server-relative URL: the library's URL path + the item's names), ``None`` when SharePoint
        REST can't say. Raises ``SourceUnavailableError``."""
        from urllib.parse import unquote

        if self.rest is None or d.rest_refused or not d.list_id or not d.url:
            return None
        try:
            rows = self.rest(d.site_url).unique_scopes(d.list_id)
        except SourceUnavailableError:
            raise
        except Exception as e:  # noqa: BLE001 - then every item is read through Graph
            log.warning("unique scopes of %s unreadable (%s): every item's permissions are read", d.prefix, e)
            return None
        base = unquote(urlsplit(d.url).path).rstrip("/")
        by_ref: dict[str, str] = {}
        for iid, entry in d.items.items():
            p = d.path(iid) if entry.kind != "root" else None
            if p is not None:
                by_ref[nfc(f"{base}/{p[len(d.prefix) + 1:]}").casefold()] = iid
        out: dict[str, bool] = {}
        for ref, uniq in rows:
            found = by_ref.get(nfc(ref).casefold())
            if found is not None:
                out[found] = uniq
        return out

    def location(self, item: SourceItem) -> str:
        """The web URL of the item's folder (the library's for a file at its root)."""
        hit = self._locate(item)
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
        delta links as the next cursor. ``cursor`` ``None``: the baseline (the snapshots are
        brought up to date, no event). Otherwise ``modified`` for new, changed and re-shared
        files, ``deleted`` for files gone (by their last known path), ``acl`` for a folder whose
        sharing changed (its path covers what is under it), ``acl`` without a path when a
        library's role assignments changed, and ``rescan`` when Graph answered ``410 Gone``
        ("driveItem: delta": resync) — what vanished is purged by the full pass it brings. When
        ``permission_sweep_interval_s`` has elapsed since the last sweep (or since the first call),
        the round also sweeps every permission (:meth:`sweep_permissions`): ``acl`` for each file
        whose rights changed; a failed sweep is logged and tried again at the next call. Raises
        ``SourceUnavailableError`` when Graph can't be reached (the engine keeps the old cursor)."""
        with self._lock:
            self._load_saved()
            before = {d.drive_id: {i: d.path(i) for i in d.items} for d in self._drives.values()}
            try:
                deltas = self.refresh()
            except GraphError as e:
                raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
            events = [] if cursor is None else [ev for dd in deltas for ev in self._events(dd, before)]
            events += self._sweep_if_due()
            links = {dd.drive.drive_id: dd.drive.delta_link for dd in deltas if dd.drive.delta_link}
        return ChangeBatch(tuple(events), DeltaCursor(links=links))

    def _events(self, dd: DriveDelta, before: Mapping[str, Mapping[str, str | None]]) -> list[ChangeEvent]:
        """The change events of one library's delta round (see :meth:`changes`); ``before``:
        drive id → item id → path before the round."""
        if dd.resynced:
            return [ChangeEvent(self.source_id, None, ChangeKind.RESCAN)]
        d, out = dd.drive, []
        old = before.get(d.drive_id, {})
        if LIBRARY_CHANGED in dd.touched and old:
            out.append(ChangeEvent(self.source_id, None, ChangeKind.ACL))  # every inheriting item's rights
        for iid in sorted(dd.touched - {LIBRARY_CHANGED}):
            e = d.items.get(iid)
            new_path = d.path(iid) if e is not None else None
            old_path = old.get(iid)
            if old_path and old_path != new_path:
                out.append(ChangeEvent(self.source_id, old_path, ChangeKind.DELETED))
            if new_path is not None:
                kind = ChangeKind.ACL if e and e.kind != "file" else ChangeKind.MODIFIED
                out.append(ChangeEvent(self.source_id, new_path, kind))
        return out

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
        """``ancre check``: get a token, resolve the sites and their libraries, read one
        library's role assignments (SharePoint REST). Never raises; a refused site is reported
        with the permission the app registration lacks."""
        try:
            drives = self._discover()
        except Exception as e:  # noqa: BLE001 - a check reports, it does not crash
            return SourceCheck(
                False, f"SharePoint {self.cfg.tenant_id}: {type(e).__name__}: {e}",
                f"check sources.{self.source_id}.tenant_id / client_id / the credential, and that the app has "
                "Sites.Read.All (or Sites.Selected) with admin consent (README \"SharePoint Online\")",
            )
        refused = dict(self.unreachable_reasons)
        if not drives:
            return SourceCheck(False, f"no document library found ({refused or 'no site'})",
                               f"check sources.{self.source_id}.sites / libraries")
        d = drives[0]
        try:
            d.list_id = str(self.graph.get(f"/drives/{d.drive_id}/list", params={"$select": "id"}).get("id") or "") or None
        except Exception as e:  # noqa: BLE001 - check() never raises: any failure is the check's answer
            return SourceCheck(False, f"{d.prefix}: library list unreadable: {e}", "the app needs Sites.Read.All")
        library = self._read_library(d)
        if isinstance(library, str) and isinstance(self.graph.settings.credential, SecretCredential):
            return SourceCheck(
                False, f"{len(drives)} libraries; {d.prefix}: {library}",
                "SharePoint REST needs a certificate credential (certificate_path or pfx_path), not a client secret",
            )
        no_rest = self._rest_refusals(drives)
        if no_rest:
            what = "; ".join(f"{seg or 'root site'}: {why}" for seg, why in sorted(no_rest.items()))
            return SourceCheck(
                False,
                f"{len(drives)} libraries; SharePoint REST refused on {len(no_rest)} site(s) — their site groups can't "
                f"be resolved, documents only those groups read are readable by nobody: {what}",
                "grant the app Sites.Read.All under SharePoint (certificate credential) on those sites, or leave them "
                f"out of sources.{self.source_id}.sites",
            )
        n = len(library) if isinstance(library, list) else 0
        extra = f"; refused: {', '.join(f'{k} ({v})' for k, v in refused.items())}" if refused else ""
        return SourceCheck(not refused, f"{len(drives)} libraries; {d.prefix}: {n} role assignments read{extra}",
                           "grant the app access to the refused sites" if refused else "")

    def _rest_refusals(self, drives: Sequence[Drive]) -> dict[str, str]:
        """``site segment -> why`` for each site of ``drives`` whose SharePoint REST refuses the
        app (its site groups, as the principal provider reads them). Never raises."""
        out: dict[str, str] = {}
        for seg, url in sorted({(d.site_seg, d.site_url) for d in drives}):
            if self.rest is None:
                out[seg] = "SharePoint REST not configured"
                continue
            try:
                self.rest(url).site_groups()
            except Exception as e:  # noqa: BLE001 - a check reports, it does not crash
                out[seg] = f"{type(e).__name__}: {e}"[:300]
        return out

    def close(self) -> None:
        """Close the Graph client and the snapshot store; idempotent."""
        self.graph.close()
        self.snapshots.close()


def _perms(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{k: p[k] for k in _PERM_FIELDS if k in p} for p in body.get("value") or ()]


def _kind(it: Mapping[str, Any]) -> str | None:
    """What a driveItem is by its facets ("driveItem resource type"; a package has neither
    ``file`` nor ``folder``): ``package`` / ``folder`` / ``file``, ``None`` without any."""
    if it.get("package") is not None:
        return "package"
    if it.get("folder") is not None:
        return "folder"
    if it.get("file") is not None:
        return "file"
    return None


def _perms_or_reason(e: Entry | None) -> list[dict[str, Any]] | str:
    if e is None:
        return "item not in the snapshot"
    if e.perms is None:
        return "not read"
    return e.perms


__all__ = ["SharePointConnector", "resolve_sites", "site_ref", "site_segment"]
