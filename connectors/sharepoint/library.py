"""A library's rights as SharePoint REST states them, for the SharePoint connector: the
library's role assignments (``GET _api/web/lists(guid)/roleassignments``: a change means every
item inheriting from it may have new rights), which items hold unique role assignments
(``HasUniqueRoleAssignments``), and the permission sweep built on them (:func:`sweep_drive`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from ancre.connectors.sharepoint.graph import GraphClient
from ancre.connectors.sharepoint.reads import read_permissions
from ancre.connectors.sharepoint.rest import RestError
from ancre.connectors.sharepoint.snapshot import Drive
from ancre.errors import AncreError, ConfigError, SourceUnavailableError
from ancre.models import nfc

log = logging.getLogger("ancre.sharepoint")

RestFactory = Callable[[str], Any]
"""``site URL -> SharePointRest`` (its ``role_assignments(list_id)``, ``unique_scopes(list_id)``,
``site_groups()``)."""


def dump_assignment(ra: Any) -> dict[str, Any]:
    """A role assignment (office365 ``RoleAssignment``-like) as a JSON dict: principal id and
    type, login name, title, and its roles as ``[name, base_permissions_low, _high]``."""
    return {
        "principal_id": int(ra.principal_id), "principal_type": int(ra.principal_type),
        "login_name": str(ra.login_name or ""), "title": str(ra.title or ""),
        "roles": [[str(r.name), int(r.base_permissions_low), int(getattr(r, "base_permissions_high", 0) or 0)] for r in ra.roles],
    }


def read_library(rest: RestFactory | None, drive: Drive) -> list[dict[str, Any]] | str:
    """The library's role assignments (REST), dumped; a ``str`` when they can't be read (items
    inheriting from the library are then readable by nobody). Sets ``drive.rest_refused`` when
    the site's REST refuses the app (401/403, or a credential REST can't use). Raises
    ``SourceUnavailableError`` when SharePoint is down (5xx)."""
    if rest is None:
        drive.rest_refused = "SharePoint REST not configured"
        return "SharePoint REST not configured"
    try:
        got = [dump_assignment(ra) for ra in rest(drive.site_url).role_assignments(drive.list_id)]
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


def unique_scopes(rest: RestFactory | None, d: Drive) -> dict[str, bool] | None:
    """``item id -> HasUniqueRoleAssignments`` of the items of ``d`` (matched on their
    server-relative URL: the library's URL path + the item's names), ``None`` when SharePoint
    REST can't say. Raises ``SourceUnavailableError``."""
    if rest is None or d.rest_refused or not d.list_id or not d.url:
        return None
    try:
        rows = rest(d.site_url).unique_scopes(d.list_id)
    except SourceUnavailableError:
        raise
    except Exception as e:  # then every item is read through Graph
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


def sweep_drive(graph: GraphClient, rest: RestFactory | None, d: Drive) -> None:
    """Re-read the permissions of every item of ``d``, cheaply: SharePoint REST lists which
    items have unique role assignments (``HasUniqueRoleAssignments``, 5,000 items per
    request); Graph is asked the permissions of those and of the library's root only, and an
    item that inherits takes its nearest unique folder's (or the root's) — which is what Graph
    would list for it ("effective sharing permissions"). Without REST (refused, not
    configured, unreadable) every item is read. Raises ``GraphError`` /
    ``SourceUnavailableError``."""
    ids = [i for i, e in d.items.items() if e.kind != "root"]
    scopes = unique_scopes(rest, d)
    if scopes is None or d.root is None:
        read_permissions(graph, d, ids)
        return
    unique = [i for i in ids if scopes.get(i, True)]  # an item REST did not list is read itself
    read_permissions(graph, d, [d.root, *unique])
    for i in ids:
        if scopes.get(i, True):
            continue
        src = next((a for a in d.ancestors(i) if scopes.get(a, True)), d.root)
        got = d.items[src].perms
        d.items[i].perms = [dict(p) for p in got] if isinstance(got, list) else got


__all__ = ["RestFactory", "dump_assignment", "read_library", "sweep_drive", "unique_scopes"]
