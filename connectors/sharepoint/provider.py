"""Entra ID principals of a user (docs/SHAREPOINT.md, DESIGN seam "principal providers").

``EntraProvider.principals("alice@axonix.ch")`` → ``{aad:<her object id>, aad:<each group she
is in, transitively>, aad:owners:<each group she owns> (GET /users/{id}/ownedObjects: the
``…_o`` claim of a Microsoft 365 group), aad:everyone-internal (members only, never guests),
sp:<site id>:<group id> for each SharePoint site group she is in}`` — the strings
:mod:`ancre.connectors.sharepoint.permissions` puts in ACLs. Combined with the directory provider
(``sid:…`` from Active Directory) by the principal resolver: one identity, both sets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any
from urllib.parse import quote

from ancre.connectors.sharepoint.graph import unreachable_key
from ancre.connectors.sharepoint.permissions import (
    EVERYONE_CLAIM,
    EVERYONE_INTERNAL,
    GRANT_ALL_USERS_CLAIM,
    M365_GROUP_PREFIX,
    MEMBERSHIP_PREFIX,
    OWNERS_SUFFIX,
    PRINCIPAL_SHAREPOINT_GROUP,
    SECURITY_GROUP_PREFIX,
    owners_principal,
    site_group_principal,
)
from ancre.errors import DirectoryError

log = logging.getLogger("ancre.sharepoint")

SITE_RETRY_S = 30.0
"""Seconds before a site whose groups could not be read is asked again (instead of ``ttl_s``)."""


@dataclass(frozen=True)
class SiteRef:
    """A site whose groups are looked at: Graph site id (the ``sp:`` scope) and URL (REST)."""

    site_id: str
    url: str


@dataclass(frozen=True)
class _User:
    oid: str
    upn: str
    member: bool


@dataclass(eq=False)
class EntraProvider:
    """Principals of a user from Microsoft Graph (and SharePoint REST for site groups), cached
    ``ttl_s`` seconds per user (site group members ``ttl_s`` per group).

    ``user`` is a UPN (``alice@axonix.ch``, as Open WebUI sends it) or an account name
    (``alice`` or ``AXONIX\\alice``, matched on ``onPremisesSamAccountName``). A user Entra does
    not know has no principal here (an empty set). Graph failing to answer (the user, her
    groups, what she owns) raises :class:`~ancre.errors.DirectoryError`: the query fails closed.
    One *site* whose SharePoint REST can't be read (refused — 401/403, a ``/contentstorage/``
    site —, or unreachable) only loses its own ``sp:`` principals: nobody holds them, so what
    only its groups grant is readable by nobody, and everyone's other principals resolve; the
    site and why are in :attr:`site_problems` (logged; asked again after ``SITE_RETRY_S``).

    ``sites``: the sites whose groups count (a callable, evaluated per refresh: the connector's
    configured sites); ``rest``: ``site URL -> SharePointRest`` (``None``: no site groups).
    """

    graph: Any
    _: KW_ONLY
    tenant_id: str
    sites: Callable[[], Sequence[SiteRef]]
    rest: Callable[[str], Any] | None
    ttl_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    name: str = "entra"
    site_problems: dict[str, str] = field(default_factory=dict, init=False)
    """Site URL → why its site groups could not be read at the last refresh."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _users: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict, init=False, repr=False)
    _groups: tuple[float, list[tuple[str, int, tuple[str, ...]]]] | None = field(default=None, init=False, repr=False)

    # ----------------------------------------------------------------------------------- public
    def principals(self, user: str) -> frozenset[str]:
        """The user's principals (class doc). Raises ``DirectoryError`` when Entra or SharePoint
        can't answer."""
        key = user.strip().casefold()
        now = self.clock()
        with self._lock:
            hit = self._users.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        try:
            got = self._principals(user.strip())
        except DirectoryError:
            raise
        except Exception as e:  # Graph/REST errors of every kind: fail closed
            down = unreachable_key(e)
            where = f" (sources.{self.name.partition(':')[2]}.{down})" if down and ":" in self.name else ""
            raise DirectoryError(f"Entra ID: principals of {user!r}: {type(e).__name__}: {e}{where}") from e
        with self._lock:
            self._users[key] = (now + self.ttl_s, got)
        return got

    # --------------------------------------------------------------------------------- internal
    def _user(self, user: str) -> _User | None:
        select = {"$select": "id,userPrincipalName,userType"}
        if "@" in user:
            try:
                u = self.graph.get(f"/users/{quote(user)}", params=select)
            except Exception as e:
                if getattr(e, "status", None) == 404:
                    return None
                raise
        else:
            account = user.rsplit("\\", 1)[-1].replace("'", "''")
            found = list(self.graph.pages(
                "/users",
                params={**select, "$filter": f"onPremisesSamAccountName eq '{account}'", "$count": "true"},
                headers={"ConsistencyLevel": "eventual"},
            ))
            if len(found) != 1:
                return None  # unknown, or ambiguous: grants nothing rather than someone else's rights
            u = found[0]
        upn = str(u.get("userPrincipalName") or user)
        member = str(u.get("userType") or "").casefold() == "member" and "#ext#" not in upn.casefold()
        return _User(str(u["id"]).lower(), upn, member)

    def _principals(self, user: str) -> frozenset[str]:
        u = self._user(user)
        if u is None:
            return frozenset()
        out = {f"aad:{u.oid}"}
        for g in self.graph.pages(f"/users/{u.oid}/transitiveMemberOf", params={"$select": "id"}):
            if str(g.get("@odata.type", "#microsoft.graph.group")).endswith(".group") and g.get("id"):
                out.add(f"aad:{str(g['id']).lower()}")
        for o in self.graph.pages(f"/users/{u.oid}/ownedObjects", params={"$select": "id"}):
            if o.get("id"):
                out.add(owners_principal(str(o["id"])))
        if u.member:
            out.add(EVERYONE_INTERNAL)
        for site_id, gid, logins in self._site_groups():
            if any(_login_matches(ln, u, out, self.tenant_id) for ln in logins):
                out.add(site_group_principal(site_id, gid))
        return frozenset(out)

    def _site_groups(self) -> list[tuple[str, int, tuple[str, ...]]]:
        """``(site id, group id, member login names)`` of every SharePoint group of each site
        (its site groups, and the groups its web grants a role to), cached ``ttl_s``."""
        if self.rest is None:
            return []
        now = self.clock()
        with self._lock:
            if self._groups is not None and self._groups[0] > now:
                return self._groups[1]
        groups: list[tuple[str, int, tuple[str, ...]]] = []
        problems: dict[str, str] = {}
        for site in self.sites():
            try:
                groups += self._groups_of(site)
            except Exception as e:  # this site's groups are missing, the rest resolves
                problems[site.url] = f"{type(e).__name__}: {e}"[:300]
                log.warning("SharePoint site %s: site groups unreadable, its sp: principals are missing "
                            "(what only they grant is readable by nobody): %s", site.url, problems[site.url])
        with self._lock:
            self.site_problems = problems
            self._groups = (now + (min(self.ttl_s, SITE_RETRY_S) if problems else self.ttl_s), groups)
        return groups

    def _groups_of(self, site: SiteRef) -> list[tuple[str, int, tuple[str, ...]]]:
        """``(site id, group id, member login names)`` of one site (raises as SharePoint REST)."""
        assert self.rest is not None
        client = self.rest(site.url)
        ids = sorted({int(g.id) for g in client.site_groups()} | {
            int(ra.principal_id) for ra in client.role_assignments(None)
            if int(ra.principal_type) == PRINCIPAL_SHAREPOINT_GROUP
        })
        return [(site.site_id, gid, tuple(str(m.login_name or "") for m in client.group_members(gid))) for gid in ids]


def _login_matches(login: str, user: _User, principals: Iterable[str], tenant_id: str) -> bool:
    """Whether a site group member's claims login name designates ``user`` (her own login, one
    of her Entra groups, a group she owns for its ``…_o`` claim, or an all-internal-users claim
    when she is a member)."""
    low = login.strip().lower()
    have = set(principals)
    if low.startswith(MEMBERSHIP_PREFIX):
        return low[len(MEMBERSHIP_PREFIX):] == user.upn.lower()
    for prefix in (SECURITY_GROUP_PREFIX, M365_GROUP_PREFIX):
        if low.startswith(prefix):
            gid = low[len(prefix):]
            if gid.endswith(OWNERS_SUFFIX):  # the group's owners, not its members
                return prefix == M365_GROUP_PREFIX and owners_principal(gid[: -len(OWNERS_SUFFIX)]) in have
            return f"aad:{gid}" in have
    if low.startswith(GRANT_ALL_USERS_CLAIM):
        return user.member and low[len(GRANT_ALL_USERS_CLAIM):] == tenant_id.lower()
    if low == EVERYONE_CLAIM:
        return user.member
    return False


def site_refs(sites: Mapping[str, str]) -> list[SiteRef]:
    """``{site id: url}`` → :class:`SiteRef` list (sorted by id)."""
    return [SiteRef(k, v) for k, v in sorted(sites.items())]


__all__ = ["EntraProvider", "SiteRef", "site_refs"]
