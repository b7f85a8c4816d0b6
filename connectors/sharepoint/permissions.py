"""SharePoint Online permissions → the read principals of an :class:`~ancre.models.Acl` (pure).

Two inputs are mapped (README "SharePoint"):

* **Graph permission resources** of a driveItem (``GET /drives/{d}/items/{i}/permissions``,
  Microsoft Graph v1.0 "permission resource type"): ``grantedToV2`` / ``grantedToIdentitiesV2``
  (``user``, ``group``, ``siteUser``, ``siteGroup``), ``link`` (``scope`` = ``users`` |
  ``organization`` | ``anonymous``), ``roles`` and ``inheritedFrom``.
* **SharePoint role assignments** of a library or site (REST ``/_api/web/roleassignments``,
  ``$expand=Member,RoleDefinitionBindings``): ``PrincipalType`` (1 user, 4 security group,
  8 SharePoint group) and the role definitions' ``BasePermissions``.

Principals (strings, see :class:`ancre.models.Principal`):

* ``aad:<object id>`` — an Entra user or group (security or Microsoft 365 group);
* ``aad:everyone-internal`` — "Everyone except external users" (claim
  ``c:0-.f|rolemanager|spo-grid-all-users/<tenant id>``): every *member* user, never a guest;
* ``sp:<site id>:<group id>`` — a SharePoint site group, scoped to its site (two sites'
  "Members" groups are two principals).

Read right: a Graph role among :data:`READ_ROLES`, or a SharePoint role whose base permissions
include ``ViewListItems`` (0x1, [MS-WSSFO3] 2.2.2.14 / ``SPBasePermissions``). "Limited Access"
has no ``ViewListItems`` and grants nothing.

Inheritance: an item takes the own (non-inherited) entries of the nearest object on its path —
itself, then each parent folder — that has unique permissions (at least one entry without
``inheritedFrom``); when nothing below the library has unique permissions, the library's role
assignments apply (which SharePoint answers with the site's when the library inherits).

Sharing links follow :data:`LinkPolicy` (default ``specific_people``): a "specific people" link
(``scope = users``) grants its recipients; an organization link grants nothing unless the policy
is ``organization`` (then ``aad:everyone-internal``); an anonymous link never grants anything —
ancre has no anonymous users.

Everything here fails closed: an entry that can't be understood grants nothing, and permissions
that could not be read make the item readable by nobody (:meth:`Acl.nobody`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ancre.models import Acl

EVERYONE_INTERNAL = "aad:everyone-internal"
"""Every member (non-guest) user of the tenant."""

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

UpnResolver = Callable[[str], "str | None"]
"""``upn -> Entra object id`` (``None``: no such user; the grant is dropped). May raise
:class:`~ancre.errors.SourceUnavailableError` (the caller's pass then stops as suspect)."""


@dataclass(frozen=True)
class Grant:
    """One principal granted read, and what granted it (for ``ancre acl explain``):
    ``via`` e.g. ``"permission 7 (read)"``, ``"link users (view)"``, ``"role Members: Edit"``."""

    principal: str
    via: str


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
    knows (system accounts, another tenant's all-users claim, an unknown user, a Microsoft 365
    group's *owners* claim ``…|<gid>_o`` — granting it to the whole group would widen it).

    ``i:0#.f|membership|alice@axonix.ch`` → ``aad:<alice's object id>`` (via ``resolve_upn``);
    ``c:0t.c|tenant|<gid>`` and ``c:0o.c|federateddirectoryclaimprovider|<gid>`` → ``aad:<gid>``;
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
            if gid.endswith("_o") or not gid:
                return None
            return f"aad:{gid}"
    return None


def principal_of_identity(
    identity_set: Mapping[str, Any], *, site_id: str, tenant_id: str, resolve_upn: UpnResolver
) -> str | None:
    """The principal of a Graph ``sharePointIdentitySet`` (``grantedToV2`` or one entry of
    ``grantedToIdentitiesV2``): ``user.id`` / ``group.id`` → ``aad:<id>``; ``siteGroup.id`` →
    ``sp:<site_id>:<id>``; ``siteUser.loginName`` → :func:`principal_of_login`; a user known
    only by ``email`` → resolved as a UPN. ``None`` for applications, devices and anything not
    understood."""
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
    site_user = identity_set.get("siteUser") or {}
    if isinstance(site_user, Mapping) and site_user.get("loginName"):
        return principal_of_login(str(site_user["loginName"]), tenant_id=tenant_id, resolve_upn=resolve_upn)
    return None


def site_group_principal(site_id: str, group_id: object) -> str:
    """``sp:<site id>:<group id>``: a SharePoint group is a principal of its own site only."""
    return f"sp:{site_id}:{group_id}"


# -- Graph permissions ----------------------------------------------------------------------------
def is_inherited(perm: Mapping[str, Any]) -> bool:
    """Whether a Graph permission is inherited from an ancestor (``inheritedFrom`` set)."""
    return bool(perm.get("inheritedFrom"))


def has_unique_permissions(perms: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an item has permissions of its own: at least one entry without ``inheritedFrom``."""
    return any(not is_inherited(p) for p in perms)


def grants_read(roles: Sequence[str]) -> bool:
    """Whether one of the Graph ``roles`` includes viewing (see :data:`READ_ROLES`)."""
    return any(str(r).strip().lower() in READ_ROLES for r in roles or ())


def permission_grants(
    perm: Mapping[str, Any], *, site_id: str, tenant_id: str, policy: LinkPolicy, resolve_upn: UpnResolver
) -> list[Grant]:
    """The read grants of one Graph permission resource (empty when it grants no read).

    A ``link`` follows ``policy`` (module doc); a direct grant gives its ``grantedToV2`` and
    ``grantedToIdentitiesV2`` principals when its roles include a read role."""
    roles = [str(r) for r in perm.get("roles") or ()]
    pid = perm.get("id", "?")
    link = perm.get("link")
    if isinstance(link, Mapping) and link:
        scope = str(link.get("scope") or "").lower()
        kind = str(link.get("type") or "link")
        if roles and not grants_read(roles):
            return []
        if scope == "users":
            if policy == "none":
                return []
            via = f"sharing link {pid} (specific people, {kind})"
            return _identities(perm, via, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)
        if scope == "organization" and policy == "organization":
            return [Grant(EVERYONE_INTERNAL, f"sharing link {pid} (organization, {kind})")]
        return []  # anonymous, organization under the default policy, unknown scopes
    if not grants_read(roles):
        return []
    via = f"permission {pid} ({', '.join(roles)})"
    return _identities(perm, via, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)


def _identities(
    perm: Mapping[str, Any], via: str, *, site_id: str, tenant_id: str, resolve_upn: UpnResolver
) -> list[Grant]:
    sets: list[Mapping[str, Any]] = []
    if isinstance(perm.get("grantedToV2"), Mapping):
        sets.append(perm["grantedToV2"])
    sets += [s for s in perm.get("grantedToIdentitiesV2") or () if isinstance(s, Mapping)]
    out: list[Grant] = []
    for s in sets:
        p = principal_of_identity(s, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)
        if p is not None:
            out.append(Grant(p, via))
    return out


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
PermsOf = Callable[[str], "Sequence[Mapping[str, Any]] | str"]
"""``item id -> its Graph permission entries``, or a ``str``: why they could not be read."""


def item_acl(
    chain: Sequence[str],
    perms_of: PermsOf,
    library: Sequence[RoleAssignmentLike] | str,
    *,
    site_id: str,
    tenant_id: str,
    policy: LinkPolicy,
    resolve_upn: UpnResolver,
) -> Mapped:
    """The read ACL of an item.

    ``chain``: the item's id, then its parent folders' ids up to (not including) the library
    root. The nearest of them with unique permissions decides with its own entries; when none
    has, ``library`` (the library's role assignments, or a ``str`` saying why they could not be
    read) decides. Unreadable permissions anywhere on that way → ``Acl.nobody(reason)``; no read
    grant at all → an empty ACL without a reason (nobody reads, and that is what SharePoint
    says: not reported as an ACL problem)."""
    for node in chain:
        perms = perms_of(node)
        if isinstance(perms, str):
            return Mapped(Acl.nobody(f"acl_unreadable: permissions of {node}: {perms}"))
        if has_unique_permissions(perms):
            grants: list[Grant] = []
            for perm in perms:
                if not is_inherited(perm):
                    grants += permission_grants(
                        perm, site_id=site_id, tenant_id=tenant_id, policy=policy, resolve_upn=resolve_upn
                    )
            return _mapped(grants, f"unique permissions on {node}")
    if isinstance(library, str):
        return Mapped(Acl.nobody(f"acl_unreadable: library role assignments: {library}"))
    grants = []
    for ra in library:
        grants += assignment_grants(ra, site_id=site_id, tenant_id=tenant_id, resolve_upn=resolve_upn)
    return _mapped(grants, "library role assignments")


def _mapped(grants: list[Grant], where: str) -> Mapped:
    uniq = tuple(dict.fromkeys(grants))
    allow = frozenset(g.principal for g in uniq)
    if not allow:  # read normally, and it grants no one: deliberate, not an ACL problem
        return Mapped(Acl(frozenset()))
    return Mapped(Acl(allow), uniq)


__all__ = [
    "EVERYONE_INTERNAL",
    "READ_ROLES",
    "VIEW_LIST_ITEMS",
    "Grant",
    "LinkPolicy",
    "Mapped",
    "assignment_grants",
    "grants_read",
    "has_unique_permissions",
    "item_acl",
    "permission_grants",
    "principal_of_identity",
    "principal_of_login",
    "site_group_principal",
]
