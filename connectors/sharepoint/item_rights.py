"""Who may read a SharePoint item (:class:`ItemRights`): its Graph permission list mapped to
principals (:func:`~ancre.connectors.sharepoint.permissions.item_acl`), from the permissions the
last delta or sweep read (a sync's ``fetch_acl``), read from Graph now (the live check, by path or
by drive id + item id, 20 items per ``$batch``), or all read again (the permission sweep: Graph
delta misses some sharing changes). The module doc of :mod:`ancre.connectors.sharepoint.connector`
states the rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ancre.connectors.sharepoint.cache import DriveCache
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.connectors.sharepoint.graph import GraphClient, GraphError
from ancre.connectors.sharepoint.library import RestFactory, read_library, sweep_drive
from ancre.connectors.sharepoint.permissions import Grant, Mapped, item_acl
from ancre.connectors.sharepoint.reads import batch_get
from ancre.connectors.sharepoint.reads import perms as perms_of
from ancre.connectors.sharepoint.snapshot import Drive, Entry
from ancre.errors import SourceUnavailableError
from ancre.models import Acl, SourceItem, nfc


class ItemRights:
    """The rights side of one SharePoint source ``cfg``: Graph calls on ``graph``, library role
    assignments through ``rest`` (``None``: not configured), the items of ``cache`` (its lock
    held around every snapshot read). UPNs a permission names are resolved once and remembered.
    Thread-safe."""

    def __init__(self, cfg: SharePointSourceConfig, *, graph: GraphClient, rest: RestFactory | None, cache: DriveCache) -> None:
        self.cfg = cfg
        self.source_id = cfg.id
        self.graph = graph
        self.rest = rest
        self.cache = cache
        self._upn: dict[str, str | None] = {}

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

    def mapped(self, drive: Drive, perms: list[dict[str, Any]] | str | None) -> Mapped:
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
        """The item's ACL from the permissions read at the last delta or sweep, and the grants
        behind it (which permission, link or group decided)."""
        hit = self.cache.locate(item.native_id)
        if hit is None:
            return Acl.nobody(f"{item.path}: not in the SharePoint listing"), ()
        d, iid = hit
        with self.cache.lock:
            m = self.mapped(d, _perms_or_reason(d.items.get(iid)))
        return m.acl, m.grants

    def read_acls(self, paths: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each path: its permissions read from Graph now. A path not in the
        snapshot, or whose item Graph no longer has (404), is left out. Raises
        ``SourceUnavailableError``."""
        ids: dict[str, str] = {}
        for path in paths:
            hit = self.cache.find(nfc(path.strip("/")))
            if hit is not None:
                ids[path] = f"{hit[0].drive_id}/{hit[1]}"
        got = self.read_acls_by_id(list(ids.values()))
        return {path: got[nid] for path, nid in ids.items() if nid in got}

    def read_acls_by_id(self, native_ids: Sequence[str]) -> Mapping[str, Acl]:
        """The current ACL of each item by its ``<drive id>/<item id>``, its permissions read from
        Graph now (20 items per ``$batch``). An id of no known library, or whose item Graph no
        longer has (404), is left out. Raises ``SourceUnavailableError``."""
        by_drive: dict[str, list[str]] = {}
        for nid in dict.fromkeys(native_ids):
            drive_id, _, iid = nid.partition("/")
            by_drive.setdefault(drive_id, []).append(iid)
        with self.cache.lock:
            self.cache.load_saved()
            drives = {k: self.cache.drives.get(k) for k in by_drive}
            if any(d is None for d in drives.values()):
                self.cache.load_saved(again=True)
                drives = {k: self.cache.drives.get(k) for k in by_drive}
        out: dict[str, Acl] = {}
        try:
            for drive_id, iids in by_drive.items():
                d = drives[drive_id]
                if d is None:
                    continue
                for iid, body in batch_get(self.graph, drive_id, iids, "permissions").items():
                    if isinstance(body, str) and body.startswith("404"):
                        continue
                    perms = body if isinstance(body, str) else perms_of(body)
                    with self.cache.lock:
                        out[f"{drive_id}/{iid}"] = self.mapped(d, perms).acl
        except GraphError as e:
            raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
        return out

    def sweep(self) -> list[str]:
        """Re-read every item's permissions and every library's role assignments (the unique
        scopes only when SharePoint REST says which items have them), save the snapshots. Returns
        the paths of the files whose ACL changed. Raises ``SourceUnavailableError``."""
        changed: list[str] = []
        with self.cache.lock:
            self.cache.load_saved()
            for d in list(self.cache.drives.values()):
                before = {i: self.mapped(d, e.perms).acl.digest() for i, e in d.items.items() if e.kind == "file"}
                d.library = read_library(self.rest, d)
                try:
                    sweep_drive(self.graph, self.rest, d)
                except GraphError as e:
                    raise SourceUnavailableError(f"source {self.source_id}: {e}") from e
                self.cache.save(d)
                for i, digest in before.items():
                    entry = d.items.get(i)
                    if entry is not None and self.mapped(d, entry.perms).acl.digest() != digest:
                        p = d.path(i)
                        if p is not None:
                            changed.append(p)
        return sorted(changed)


def _perms_or_reason(e: Entry | None) -> list[dict[str, Any]] | str:
    if e is None:
        return "item not in the snapshot"
    if e.perms is None:
        return "not read"
    return e.perms


__all__ = ["ItemRights"]
