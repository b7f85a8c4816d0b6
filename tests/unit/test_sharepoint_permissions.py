"""SharePoint permissions → principals (ancre.connectors.sharepoint.permissions), on the documented
Graph permission and SharePoint role assignment shapes."""

from __future__ import annotations

from dataclasses import dataclass

from ancre.connectors.sharepoint.permissions import (
    EVERYONE_INTERNAL,
    assignment_grants,
    item_acl,
    permission_grants,
    principal_of_login,
)

TENANT = "7f3b2c1a-0000-4000-8000-000000000001"
SITE_A = "axonix.sharepoint.com,aaaa,1111"
SITE_B = "axonix.sharepoint.com,bbbb,2222"
UPNS = {"alice@axonix.ch": "a11ce", "bruno@axonix.ch": "b7c0"}


def resolve(upn: str) -> str | None:
    return UPNS.get(upn.lower())


@dataclass(frozen=True)
class Role:
    name: str
    base_permissions_low: int
    base_permissions_high: int = 0


@dataclass(frozen=True)
class RA:
    principal_id: int
    principal_type: int
    login_name: str
    title: str
    roles: tuple[Role, ...]


READ = Role("Read", 0x1 | 0x1000 | 0x20000)
LIMITED = Role("Limited Access", 0x1000 | 0x20000 | 0x10000)  # Open, ViewFormPages... no ViewListItems
KW = {"tenant_id": TENANT, "resolve_upn": resolve}


def test_login_names() -> None:
    assert principal_of_login("i:0#.f|membership|Alice@axonix.ch", **KW) == "aad:a11ce"
    assert principal_of_login("i:0#.f|membership|nobody@axonix.ch", **KW) is None
    assert principal_of_login("c:0t.c|tenant|6B1F-GID", **KW) == "aad:6b1f-gid"
    assert principal_of_login("c:0o.c|federateddirectoryclaimprovider|m365gid", **KW) == "aad:m365gid"
    assert principal_of_login("c:0o.c|federateddirectoryclaimprovider|m365gid_o", **KW) == "aad:owners:m365gid"
    assert principal_of_login("c:0t.c|tenant|secgid_o", **KW) is None  # only Microsoft 365 groups have owners claims
    assert principal_of_login(f"c:0-.f|rolemanager|spo-grid-all-users/{TENANT}", **KW) == EVERYONE_INTERNAL
    assert principal_of_login("c:0-.f|rolemanager|spo-grid-all-users/other-tenant", **KW) is None
    assert principal_of_login("SHAREPOINT\\system", **KW) is None


def test_site_groups_are_scoped_to_their_site() -> None:
    members = RA(5, 8, "Direction Members", "Direction Members", (READ,))
    a = assignment_grants(members, site_id=SITE_A, **KW)
    b = assignment_grants(members, site_id=SITE_B, **KW)
    assert [g.principal for g in a] == [f"sp:{SITE_A}:5"]
    assert [g.principal for g in b] == [f"sp:{SITE_B}:5"]
    assert a[0].principal != b[0].principal


def test_limited_access_alone_grants_nothing() -> None:
    ra = RA(9, 1, "i:0#.f|membership|bruno@axonix.ch", "Bruno", (LIMITED,))
    assert assignment_grants(ra, site_id=SITE_A, **KW) == []
    ra2 = RA(9, 1, "i:0#.f|membership|bruno@axonix.ch", "Bruno", (LIMITED, READ))
    assert [g.principal for g in assignment_grants(ra2, site_id=SITE_A, **KW)] == ["aad:b7c0"]


def test_everyone_except_external_users_assignment() -> None:
    ra = RA(11, 4, f"c:0-.f|rolemanager|spo-grid-all-users/{TENANT}", "Everyone except external users", (READ,))
    assert [g.principal for g in assignment_grants(ra, site_id=SITE_A, **KW)] == [EVERYONE_INTERNAL]


def _link(scope: str, *recipients: dict) -> dict:
    return {
        "id": f"link-{scope}", "roles": ["read"], "link": {"scope": scope, "type": "view", "webUrl": "https://x"},
        "grantedToIdentitiesV2": list(recipients),
    }


def test_link_policy() -> None:
    alice = {"user": {"id": "A11CE", "displayName": "Alice"}}
    org, anon, users = _link("organization"), _link("anonymous"), _link("users", alice)
    for p in (org, anon):
        assert permission_grants(p, site_id=SITE_A, policy="specific_people", **KW) == []
    assert [g.principal for g in permission_grants(users, site_id=SITE_A, policy="specific_people", **KW)] == ["aad:a11ce"]
    assert permission_grants(users, site_id=SITE_A, policy="none", **KW) == []
    assert [g.principal for g in permission_grants(org, site_id=SITE_A, policy="organization", **KW)] == [EVERYONE_INTERNAL]
    assert permission_grants(anon, site_id=SITE_A, policy="organization", **KW) == []


def test_direct_grants_by_identity_kind() -> None:
    perms = [
        {"id": "1", "roles": ["write"], "grantedToV2": {"user": {"id": "u1"}, "siteUser": {"id": "7", "loginName": "i:0#.f|membership|x"}}},
        {"id": "2", "roles": ["read"], "grantedToV2": {"group": {"id": "g1"}}},
        {"id": "3", "roles": ["owner"], "grantedToV2": {"siteGroup": {"id": "3", "displayName": "Owners"}}},
        {"id": "4", "roles": ["sp.limited access"], "grantedToV2": {"user": {"id": "u2"}}},
        {"id": "5", "roles": ["read"], "grantedToV2": {"siteUser": {"id": "12", "loginName": "i:0#.f|membership|alice@axonix.ch"}}},
        {"id": "6", "roles": ["read"], "grantedToV2": {"application": {"id": "app"}}},
    ]
    got = [g.principal for p in perms for g in permission_grants(p, site_id=SITE_A, policy="specific_people", **KW)]
    assert got == ["aad:u1", "aad:g1", f"sp:{SITE_A}:3", "aad:a11ce"]


def test_an_items_own_list_decides_inherited_or_not() -> None:
    """Graph lists an item's effective permissions (own or inherited alike, no inheritedFrom in
    SharePoint libraries): the list decides, and an empty one is nobody."""
    common = {"site_id": SITE_A, "tenant_id": TENANT, "policy": "specific_people", "resolve_upn": resolve}
    folder_perm = {"id": "f", "roles": ["read"], "grantedToV2": {"group": {"id": "gdir"}}}
    assert item_acl([folder_perm], **common).acl.allow == {"aad:gdir"}
    nobody = item_acl([], **common).acl
    assert nobody.allow == frozenset() and nobody.reason is None
    broken = item_acl("403 accessDenied", **common).acl
    assert not broken.allow and "403" in (broken.reason or "")


def test_only_links_under_default_policy_means_nobody_without_problem() -> None:
    perms = {"f": [_link("organization"), _link("anonymous")]}
    m = item_acl(perms["f"], site_id=SITE_A, tenant_id=TENANT, policy="specific_people", resolve_upn=resolve)
    assert m.acl.allow == frozenset() and m.acl.reason is None
    assert not m.acl.readable_by(frozenset({EVERYONE_INTERNAL, "aad:a11ce"}))
