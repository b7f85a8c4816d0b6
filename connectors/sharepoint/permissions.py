"""SharePoint Online permissions → the read principals of an :class:`~ancre.models.Acl` (pure).

Two inputs are mapped (docs/SHAREPOINT.md):

* **Graph permission resources** of a driveItem (``GET /drives/{d}/items/{i}/permissions``,
  Microsoft Graph v1.0 "permission resource type", "List sharing permissions on a driveItem"):
  ``grantedToV2`` / ``grantedToIdentitiesV2`` (``sharePointIdentitySet``: ``user``, ``group``,
  ``siteUser``, ``siteGroup``), ``link`` (``sharingLink``: ``scope`` = ``users`` |
  ``organization`` | ``anonymous`` | ``existingAccess``, or none), ``roles`` and
  ``expirationDateTime``.
* **SharePoint role assignments** of a library or site (REST ``/_api/web/roleassignments``,
  ``$expand=Member,RoleDefinitionBindings``): ``PrincipalType`` (1 user, 4 security group,
  8 SharePoint group) and the role definitions' ``BasePermissions`` — used by ``ancre acl
  explain`` and by the principal provider (which site groups a web grants a role to).

Principals (strings, see :class:`ancre.models.Principal`):

* ``aad:<object id>`` — an Entra user or group (security or Microsoft 365 group: its members);
* ``aad:owners:<group id>`` — the *owners* of a Microsoft 365 group (claim
  ``c:0o.c|federateddirectoryclaimprovider|<group id>_o``: "this claim represents the group
  owners", SharePoint docs "Site permissions after Microsoft 365 group connection");
* ``aad:everyone-internal`` — "Everyone except external users" (claim
  ``c:0-.f|rolemanager|spo-grid-all-users/<tenant id>``): every *member* user, never a guest;
* ``sp:<site id>:<group id>`` — a SharePoint site group, scoped to its site (two sites'
  "Members" groups are two principals: a ``siteGroup`` id is "unique only within the site").

Read right: a Graph role among :data:`READ_ROLES`, or a SharePoint role whose base permissions
include ``ViewListItems`` (0x1, [MS-WSSFO3] 2.2.2.14 / ``SPBasePermissions``). "Limited Access"
has no ``ViewListItems`` and grants nothing.

**Inheritance is not read from** ``inheritedFrom``: "OneDrive for Business and SharePoint document
libraries do not return the inheritedFrom property". What Graph lists for an item are its
*effective* permissions — "applied directly on the DriveItem itself" or "inherited from the
DriveItem's ancestors" — so an item's own list decides, whatever it inherits from: an item with
unique permissions and none granted (``value: []``) is readable by nobody.

**Expiry**: a permission whose ``expirationDateTime`` has passed grants nothing; one that has not
gives a grant that ends then (:class:`~ancre.models.Grant` ``expires``), so the query filter
honours it at that instant. ``0001-01-01T00:00:00Z`` ("DateTime.MinValue indicates there is no
expiration") and no value mean none; a value that can't be read grants nothing.

Sharing links follow :data:`LinkPolicy` (default ``specific_people``): a "specific people" link
(``scope = users``, or no ``scope`` at all — the permission page's own "Specific people link"
example has none) grants its recipients; an organization link grants nothing unless the policy is
``organization`` (then ``aad:everyone-internal``); an anonymous link never grants anything —
ancre has no anonymous users; an ``existingAccess`` link "does not grant any additional
privileges".

Everything here fails closed: an entry that can't be understood grants nothing, and permissions
that could not be read make the item readable by nobody (:meth:`Acl.nobody`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from ancre.models import Acl
from ancre.models import Grant as Clause

EVERYONE_INTERNAL = "aad:everyone-internal"
"""Every member (non-guest) user of the tenant."""

OWNERS_PREFIX = "aad:owners:"
"""``aad:owners:<group id>``: the owners of a Microsoft 365 group (its ``…_o`` claim)."""


def owners_principal(group_id: str) -> str:
    """``aad:owners:<group id>`` (lower case)."""
    return f"{OWNERS_PREFIX}{group_id.lower()}"

VIEW_LIST_ITEMS = 0x1
"""``SPBasePermissions.ViewListItems`` (low word): the right to view items of a list/library."""

READ_ROLES = frozenset(
    {
        "read", "write", "owner", "restrictedview",
        "sp.full control", "sp.design", "sp.edit", "sp.contribute", "sp.read", "sp.view only",
        "sp.approve", "sp.restricted view",
    }
)
"""Graph permission ``roles`` values that include viewing the item (Graph ``permission.roles``:
``read``, ``write``, ``owner``; SharePoint permission levels as ``sp.<name>``). Anything else
(``sp.limited access``, an unknown custom level) grants nothing."""

LinkPolicy = Literal["none", "specific_people", "organization"]
"""What sharing links grant: ``none`` — no link grants anything; ``specific_people`` (default) —
a ``users``-scoped link grants its recipients; ``organization`` — also an organization link
grants ``aad:everyone-internal``. Anonymous links never grant anything."""

GRANT_ALL_USERS_CLAIM = "c:0-.f|rolemanager|spo-grid-all-users/"
EVERYONE_CLAIM = "c:0(.s|true"
MEMBERSHIP_PREFIX = "i:0#.f|membership|"
SECURITY_GROUP_PREFIX = "c:0t.c|tenant|"
M365_GROUP_PREFIX = "c:0o.c|federateddirectoryclaimprovider|"

PRINCIPAL_USER = 1
PRINCIPAL_SECURITY_GROUP = 4
PRINCIPAL_SHAREPOINT_GROUP = 8

OWNERS_SUFFIX = "_o"

UpnResolver = Callable[[str], "str | None"]
"""``upn -> Entra object id`` (``None``: no such user; the grant is dropped). May raise
:class:`~ancre.errors.SourceUnavailableError` (the caller's pass then stops as suspect)."""


@dataclass(frozen=True)
class Grant:
    """One principal granted read, and what granted it (for ``ancre acl explain``):
    ``via`` e.g. ``"permission 7 (read)"``, ``"link users (view)"``, ``"role Members: Edit"``;
    ``expires``: epoch seconds at which it stops granting (its ``expirationDateTime``), ``None``
    for never."""

    principal: str
    via: str
    expires: float | None = None


@dataclass(frozen=True)
class Mapped:
    """The ACL of an item and the grants behind it (``grants`` empty when nobody reads)."""

    acl: Acl
    grants: tuple[Grant, ...] = ()


class RoleDefLike(Protocol):
    """A role definition: ``name`` and the 64-bit base permissions split in two 32-bit words."""

    name: str
    base_permissions_low: int
    base_permissions_high: int


class RoleAssignmentLike(Protocol):
    """A SharePoint role assignment (see :mod:`ancre.connectors.sharepoint.rest`)."""

    principal_id: int
    principal_type: int
    login_name: str
    title: str
    roles: Sequence[Any]


# -- login names and identities -------------------------------------------------------------------
def principal_of_login(login_name: str, *, tenant_id: str, resolve_upn: UpnResolver) -> str | None:
    """The principal of a SharePoint claims login name, ``None`` when it maps to nobody ancre
    knows (system accounts, another tenant's all-users claim, an unknown user).

    ``i:0#.f|membership|alice@axonix.ch`` → ``aad:<alice's object id>`` (via ``resolve_upn``);
    ``c:0t.c|tenant|<gid>`` and ``c:0o.c|federateddirectoryclaimprovider|<gid>`` → ``aad:<gid>``;
    ``c:0o.c|federateddirectoryclaimprovider|<gid>_o`` (the group's owners) → ``aad:owners:<gid>``;
    ``c:0-.f|rolemanager|spo-grid-all-users/<tenant id>`` → ``aad:everyone-internal``;
    ``c:0(.s|true`` ("Everyone", guests included) → ``aad:everyone-internal`` (narrower: the
    guests it would add are left out, never the other way round)."""
    ln = (login_name or "").strip()
    low = ln.lower()
    if low.startswith(GRANT_ALL_USERS_CLAIM):
        return EVERYONE_INTERNAL if low[len(GRANT_ALL_USERS_CLAIM):] == tenant_id.lower() else None
    if low == EVERYONE_CLAIM:
        return EVERYONE_INTERNAL
    if low.startswith(MEMBERSHIP_PREFIX):
        oid = resolve_upn(ln[len(MEMBERSHIP_PREFIX):])
        return f"aad:{oid.lower()}" if oid else None
    for prefix in (SECURITY_GROUP_PREFIX, M365_GROUP_PREFIX):
        if low.startswith(prefix):
            gid = low[len(prefix):]
            if gid.endswith(OWNERS_SUFFIX):
                gid = gid[: -len(OWNERS_SUFFIX)]
                return owners_principal(gid) if gid and prefix == M365_GROUP_PREFIX else None
            return f"aad:{gid}" if gid else None
    return None


def is_owners_claim(login_name: str) -> bool:
    """Whether a claims login name is a Microsoft 365 group's owners claim (``…|<gid>_o``)."""
    low = (login_name or "").strip().lower()
    return low.startswith(M365_GROUP_PREFIX) and low.endswith(OWNERS_SUFFIX)


def principal_of_identity(
    identity_set: Mapping[str, Any], *, site_id: str, tenant_id: str, resolve_upn: UpnResolver
) -> str | None:
    """The principal of a Graph ``sharePointIdentitySet`` (``grantedToV2`` or one entry of
    ``grantedToIdentitiesV2``): a ``siteUser`` whose ``loginName`` is a group's owners claim →
    ``aad:owners:<gid>`` (before anything else: the same identity names the group in ``group``,
    whose members are not its owners); ``user.id`` / ``group.id`` → ``aad:<id>``;
    ``siteGroup.id`` → ``sp:<site_id>:<id>``; ``siteUser.loginName`` → :func:`principal_of_login`;
    a user known only by ``email`` → resolved as a UPN. ``None`` for applications, devices and
    anything not understood."""
    site_user = identity_set.get("siteUser") or {}
    if isinstance(site_user, Mapping) and is_owners_claim(str(site_user.get("loginName") or "")):
        return principal_of_login(str(site_user["loginName"]), tenant_id=tenant_id, resolve_upn=resolve_upn)
    user = identity_set.get("user") or {}
    if isinstance(user, Mapping):
        if user.get("id"):
            return f"aad:{str(user['id']).lower()}"
        if user.get("email"):
            oid = resolve_upn(str(user["email"]))
            if oid:
                return f"aad:{oid.lower()}"
    group = identity_set.get("group") or {}
    if isinstance(group, Mapping) and group.get("id"):
        return f"aad:{str(group['id']).lower()}"
    site_group = identity_set.get("siteGroup") or {}
    if isinstance(site_group, Mapping) and site_group.get("id") not in (None, ""):
        return site_group_principal(site_id, site_group["id"])
    if isinstance(site_user, Mapping) and site_user.get("loginName"):
        return principal_of_login(str(site_user["loginName"]), tenant_id=tenant_id, resolve_upn=resolve_upn)
    return None


def site_group_principal(site_id: str, group_id: object) -> str:
    """``sp:<site id>:<group id>``: a SharePoint group is a principal of its own site only."""
    return f"sp:{site_id}:{group_id}"


# -- Graph permissions ----------------------------------------------------------------------------
def grants_read(roles: Sequence[str]) -> bool:
    """Whether one of the Graph ``roles`` includes viewing (see :data:`READ_ROLES`)."""
    return any(str(r).strip().lower() in READ_ROLES for r in roles or ())


NEVER = "never"
"""What :func:`permission_expiry` returns for a permission that grants nothing any more."""


def permission_expiry(perm: Mapping[str, Any], *, now: float | None = None) -> float | str | None:
    """When a permission stops granting: ``None`` (never: no ``expirationDateTime``, or
    ``0001-01-01T00:00:00Z`` — "DateTime.MinValue indicates there is no expiration"), epoch
    seconds (a future instant), or :data:`NEVER` when it has expired at ``now`` (default: the
    current time) or its value can't be read (fail closed)."""
    raw = perm.get("expirationDateTime")
    if raw in (None, ""):
        return None
    try:
        when = datetime.fromisoformat(str(raw))
    except ValueError:
        return NEVER
    if when.year <= 1:
        return None
    if when.tzinfo is None:
        return NEVER  # "yyyy-MM-ddTHH:mm:ssZ": a value without its zone is not the documented form
    at = when.timestamp()
    return NEVER if at <= (time.time() if now is None else now) else at


def permission_grants(
    perm: Mapping[str, Any], *, site_id: str, tenant_id: str, policy: LinkPolicy, resolve_upn: UpnResolver,
    now: float | None = None,
) -> list[Grant]:
    """The read grants of one Graph permission resource (empty when it grants no read, or has
    expired at ``now``).

    A ``link`` follows ``policy`` (module doc); a direct grant gives its ``grantedToV2`` and
    ``grantedToIdentitiesV2`` principals when its roles include a read role. Each grant carries
    the permission's expiry (:func:`permission_expiry`)."""
    expires = permission_expiry(perm, now=now)
    if expires == NEVER:
        return []
    until = expires if isinstance(expires, float) else None
    roles = [str(r) for r in perm.get("roles") or ()]
    pid = perm.get("id", "?")
    link = perm.get("link")
    if isinstance(link, Mapping) and link:
        scope = str(link.get("scope") or "").lower()
        kind = str(link.get("type") or "link")
        if roles and not grants_read(roles):
            return []
        if scope == "users" or (not scope and perm.get("grantedToIdentitiesV2")):
            if policy == "none":
                return []
            via = f"sharing link {pid} (specific people, {kind})"
            return _identities(perm, via, until, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)
        if scope == "organization" and policy == "organization":
            return [Grant(EVERYONE_INTERNAL, f"sharing link {pid} (organization, {kind})", until)]
        return []  # anonymous, existingAccess, organization under the default policy, unknown scopes
    if not grants_read(roles):
        return []
    via = f"permission {pid} ({', '.join(roles)})"
    return _identities(perm, via, until, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)


def _identities(
    perm: Mapping[str, Any], via: str, until: float | None, *, site_id: str, tenant_id: str, resolve_upn: UpnResolver
) -> list[Grant]:
    sets: list[Mapping[str, Any]] = []
    if isinstance(perm.get("grantedToV2"), Mapping):
        sets.append(perm["grantedToV2"])
    sets += [s for s in perm.get("grantedToIdentitiesV2") or () if isinstance(s, Mapping)]
    out: list[Grant] = []
    for s in sets:
        p = principal_of_identity(s, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)
        if p is not None:
            out.append(Grant(p, f"{via} to {_display_name(s)}" if _display_name(s) else via, until))
    return out


def _display_name(identity_set: Mapping[str, Any]) -> str:
    for key in ("siteGroup", "group", "user", "siteUser"):
        ident = identity_set.get(key)
        if isinstance(ident, Mapping) and ident.get("displayName"):
            return str(ident["displayName"])
    return ""


# -- SharePoint role assignments ------------------------------------------------------------------
def role_grants_read(role: Any) -> bool:
    """Whether a role definition includes ``ViewListItems`` (bit 0x1 of the low word)."""
    return bool(int(getattr(role, "base_permissions_low", 0) or 0) & VIEW_LIST_ITEMS)


def assignment_grants(
    ra: RoleAssignmentLike, *, site_id: str, tenant_id: str, resolve_upn: UpnResolver
) -> list[Grant]:
    """The read grant of one role assignment (empty when none of its roles has ViewListItems):
    a SharePoint group (type 8) → ``sp:<site_id>:<PrincipalId>``; a user or an Entra group →
    :func:`principal_of_login` of its ``LoginName``."""
    reading = [r for r in ra.roles if role_grants_read(r)]
    if not reading:
        return []
    via = f"role assignment {ra.title or ra.login_name}: {', '.join(str(getattr(r, 'name', '?')) for r in reading)}"
    if ra.principal_type == PRINCIPAL_SHAREPOINT_GROUP:
        return [Grant(site_group_principal(site_id, ra.principal_id), via)]
    p = principal_of_login(ra.login_name, tenant_id=tenant_id, resolve_upn=resolve_upn)
    return [Grant(p, via)] if p is not None else []


# -- an item's ACL ------------------------------------------------------------------------------
def item_acl(
    perms: Sequence[Mapping[str, Any]] | str,
    *,
    site_id: str,
    tenant_id: str,
    policy: LinkPolicy,
    resolve_upn: UpnResolver,
    site_groups_unresolvable: str | None = None,
    now: float | None = None,
) -> Mapped:
    """The read ACL of an item from its Graph permission list — its *effective* permissions, own
    or inherited alike (module doc) — or a ``str`` saying why they could not be read
    (→ ``Acl.nobody(reason)``). No read grant at all (``[]``, links that widen nothing) → an
    empty ACL without a reason: nobody reads, and that is what SharePoint says.

    ``site_groups_unresolvable``: why the site's groups can't be resolved to their members (its
    SharePoint REST refused the app); when only such groups would read, the ACL is
    ``Acl.nobody`` with that reason (reported, not silent). ``now``: epoch seconds for expiry
    (default: the current time)."""
    if isinstance(perms, str):
        return Mapped(Acl.nobody(f"acl_unreadable: permissions: {perms}"))
    grants: list[Grant] = []
    for perm in perms:
        grants += permission_grants(
            perm, site_id=site_id, tenant_id=tenant_id, policy=policy, resolve_upn=resolve_upn, now=now
        )
    if site_groups_unresolvable and grants and all(g.principal.startswith(f"sp:{site_id}:") for g in grants):
        return Mapped(Acl.nobody(f"acl_unresolvable: site groups: {site_groups_unresolvable}"), tuple(dict.fromkeys(grants)))
    return _mapped(grants)


def _mapped(grants: list[Grant]) -> Mapped:
    uniq = tuple(dict.fromkeys(grants))
    if not uniq:  # read normally, and it grants no one: deliberate, not an ACL problem
        return Mapped(Acl(frozenset()))
    return Mapped(acl_of_grants(uniq), uniq)


def acl_of_grants(grants: Sequence[Grant]) -> Acl:
    """The :class:`~ancre.models.Acl` of read grants: the principals of the grants without
    expiry, plus one clause per expiry instant (:class:`ancre.models.Grant` ``expires``), readable
    iff any clause admits the user at that instant."""
    forever = frozenset(g.principal for g in grants if g.expires is None)
    timed: dict[float, set[str]] = {}
    for g in grants:
        if g.expires is not None and g.principal not in forever:
            timed.setdefault(g.expires, set()).add(g.principal)
    if not timed:
        return Acl(forever)
    clauses = [Clause(forever)] if forever else []
    clauses += [Clause(frozenset(ps), expires=t) for t, ps in sorted(timed.items())]
    return Acl.of(clauses)


__all__ = [
    "EVERYONE_INTERNAL",
    "OWNERS_PREFIX",
    "READ_ROLES",
    "VIEW_LIST_ITEMS",
    "Grant",
    "LinkPolicy",
    "Mapped",
    "acl_of_grants",
    "assignment_grants",
    "grants_read",
    "is_owners_claim",
    "item_acl",
    "owners_principal",
    "permission_expiry",
    "permission_grants",
    "principal_of_identity",
    "principal_of_login",
    "site_group_principal",
]
