"""Property: over random SharePoint site trees — same-named sites and subsites, folders and files
that inherit or have unique permissions, direct grants to users (guests included) and groups, the
site's Members group, sharing links with and without expiry — the (user, document) pairs ancre's
search returns are exactly those the permissions grant.

What they grant is written once, below, as a small reference model of Microsoft's rules
(``readers``): an item inherits from its parent unless it has unique permissions (then only its
own entries count, none = nobody); a site group grants its members, "Everyone except external
users" every member but no guest, an Entra group its members, a "specific people" link its
recipients; an expired permission grants nothing ("Permission resource type",
``expirationDateTime``). ancre's documented link policy (default ``specific_people``) adds one
rule: organization and anonymous links grant nobody. The fake tenant serves the documented
shapes (tests/support/fake_microsoft.py); the model knows nothing of ancre.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fake_microsoft import EVERYONE_EXCEPT_EXTERNAL, FakeMicrosoft

from ancre.app.runtime import Runtime
from ancre.config import load_settings

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = REPO / "examples" / "axonix" / "directory.json"
GUEST = "ext.partner_partner.ch#EXT#@axonix.ch"
USERS = ("alice.martin@axonix.ch", "bruno.favre@axonix.ch", "chloe.rey@axonix.ch", "david.meier@axonix.ch", GUEST)
GROUPS = ("GG_Direction", "GG_Techniciens", "GG_Stagiaires", "GG_Commercial")
SITE_PATHS = ("/sites/Projets", "/teams/Projets", "/sites/A/Projets", "/sites/B/Projets", "/sites/Direction")
DIR = json.loads(DIRECTORY.read_text(encoding="utf-8"))
MEMBERS_OF = {g: {u["upn"] for u in DIR["users"].values() if g in u.get("groups", [])} for g in GROUPS}
INTERNAL = set(USERS) - {GUEST}


# ------------------------------------------------------------------------------ the model
@dataclass(frozen=True)
class Entry:
    """One permission: ``kind`` user | group | members | link_users | link_org | link_anon;
    ``who``: a UPN, a group name or recipients; ``expiry``: None | "past" | "future"."""

    kind: str
    who: tuple[str, ...] = ()
    expiry: str | None = None


@dataclass
class Node:
    name: str
    folder: bool
    unique: bool
    entries: tuple[Entry, ...] = ()
    children: list[Node] = field(default_factory=list)


@dataclass
class Site:
    path: str
    members: tuple[str, ...]  # "everyone" | a group name | a UPN
    tree: list[Node]


def site_members(site: Site) -> set[str]:
    out: set[str] = set()
    for m in site.members:
        out |= INTERNAL if m == "everyone" else MEMBERS_OF.get(m, {m})
    return out


def readers(entries: tuple[Entry, ...], site: Site) -> set[str]:
    """Who the entries let read, by Microsoft's rules (and ancre's default link policy)."""
    out: set[str] = set()
    for e in entries:
        if e.expiry == "past":
            continue
        if e.kind == "user":
            out |= set(e.who)
        elif e.kind == "group":
            out |= MEMBERS_OF[e.who[0]]
        elif e.kind == "members":
            out |= site_members(site)
        elif e.kind == "link_users":
            out |= set(e.who)
    return out


def expected(sites: list[Site]) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()

    def walk(nodes: list[Node], prefix: str, inherited: set[str], site: Site) -> None:
        for n in nodes:
            who = readers(n.entries, site) if n.unique else inherited
            if n.folder:
                walk(n.children, f"{prefix}/{n.name}", who, site)
            else:
                pairs.update((u, f"{prefix}/{n.name}.md") for u in who)

    for s in sites:
        walk(s.tree, f"{s.path.strip('/')}/Documents", site_members(s), s)
    return pairs


# ------------------------------------------------------------------------------ strategies
expiry = st.sampled_from([None, None, "past", "future"])
entry = st.one_of(
    st.builds(lambda u, x: Entry("user", (u,), x), st.sampled_from(USERS), expiry),
    st.builds(lambda g, x: Entry("group", (g,), x), st.sampled_from(GROUPS), expiry),
    st.builds(lambda x: Entry("members", (), x), expiry),
    st.builds(lambda us, x: Entry("link_users", tuple(sorted(us)), x), st.sets(st.sampled_from(USERS), min_size=1, max_size=2), expiry),
    st.just(Entry("link_org")),
    st.just(Entry("link_anon")),
)


@st.composite
def nodes(draw: Any, depth: int, prefix: str) -> list[Node]:
    out = []
    for i in range(draw(st.integers(1, 3 if depth else 2))):
        folder = depth > 0 and draw(st.booleans())
        unique = draw(st.booleans())
        entries = tuple(draw(st.lists(entry, max_size=3))) if unique else ()
        n = Node(f"{prefix}{i}", folder, unique, entries)
        if folder:
            n.children = draw(nodes(depth - 1, f"{prefix}{i}-"))
        out.append(n)
    return out


@st.composite
def tenants(draw: Any) -> list[Site]:
    paths = draw(st.lists(st.sampled_from(SITE_PATHS), min_size=1, max_size=3, unique=True))
    sites = []
    for p in paths:
        members = tuple(draw(st.lists(st.sampled_from(("everyone", *GROUPS, *USERS)), min_size=0, max_size=2, unique=True)))
        sites.append(Site(p, members, draw(nodes(2, "d" if p.endswith("Projets") else "x"))))
    return sites


# ------------------------------------------------------------------------------ the tenant
def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build(sites: list[Site]) -> FakeMicrosoft:
    ms = FakeMicrosoft()
    for g in DIR["groups"]:
        ms.add_group(g, sam=g)
    for sam, u in DIR["users"].items():
        user = ms.add_user(u["upn"], sam=sam)
        for g in u.get("groups", []):
            ms.group(g).members.append(user.id)
    ms.add_user(GUEST, display_name="External Partner", user_type="Guest", mail="ext.partner@partner.ch")
    claims = {"everyone": EVERYONE_EXCEPT_EXTERNAL.format(tenant=ms.tenant_id)}
    n = 0
    for s in sites:
        site = ms.add_site(s.path.rsplit("/", 1)[-1], path=s.path)
        members = ms.add_site_group(site, "Members", [
            claims.get(m) or (ms.group(m).claim() if m in GROUPS else f"i:0#.f|membership|{m.lower()}") for m in s.members
        ], role="Read")
        drive = ms.add_drive(site, "Documents")

        def add(nodes_: list[Node], parent: Any, drive: Any = drive, members: Any = members) -> None:
            nonlocal n
            for node in nodes_:
                if node.folder:
                    item = ms.add_folder(drive, node.name, parent=parent)
                else:
                    n += 1
                    item = ms.add_file(drive, f"{node.name}.md", (
                        f"# Rapport {node.name}\n\nRapport trimestriel de l'equipe, piece {n}.").encode(), parent=parent)
                if node.unique:
                    ms.break_inheritance(drive, item)
                    for e in node.entries:
                        when = {None: None, "past": iso(time.time() - 3600), "future": iso(time.time() + 86400)}[e.expiry]
                        if e.kind == "user":
                            ms.grant(drive, item, user=e.who[0], expires=when)
                        elif e.kind == "group":
                            ms.grant(drive, item, group=e.who[0], expires=when)
                        elif e.kind == "members":
                            ms.grant(drive, item, site_group=members, expires=when)
                        elif e.kind == "link_users":
                            ms.add_link(drive, item, scope="users", recipients=list(e.who), expires=when)
                        else:
                            ms.add_link(drive, item, scope="organization" if e.kind == "link_org" else "anonymous")
                if node.folder:
                    add(node.children, item)

        add(s.tree, None)
    return ms.start()


@pytest.fixture(scope="module")
def e5() -> Any:
    from ancre.index.embedder_factory import make_embedder
    from ancre.settings import E5LocalEmbedderConfig

    return make_embedder(E5LocalEmbedderConfig())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sites=tenants())
def test_search_returns_exactly_what_the_permissions_grant(e5: Any, sites: list[Site]) -> None:
    ms = build(sites)
    try:
        with tempfile.TemporaryDirectory(prefix="ancre-sp-prop-") as tmp:
            cert = ms.certificate
            cfg = load_settings(
                None, data_dir=str(Path(tmp) / "data"), embedder={"kind": "e5-local"}, store={"kind": "edge"},
                directory={"kind": "file", "path": str(DIRECTORY), "cache_ttl_s": 0}, query={"live_acl_ttl_s": 0},
                sources=[{
                    "id": "sp", "kind": "sharepoint", "tenant_id": ms.tenant_id, "client_id": ms.client_id,
                    "certificate_path": str(cert.key_pem_path), "certificate_thumbprint": cert.thumbprint,
                    "authority": ms.authority, "graph_url": ms.graph_url, "ca_file": str(ms.ca_path),
                    "sites": [ms.site_url(s) for s in ms.sites.values()],
                }],
            )
            with Runtime(cfg) as rt:
                rt.__dict__["embedder"] = e5
                rep = rt.engine.run_pass(rt.connectors()[0])
                assert rep.outcome == "ok" and rep.failed == 0 and rep.acl_unreadable == 0, rep
                got = {
                    (u, h.path) for u in USERS
                    for h in rt.query_core.search("rapport trimestriel de l'equipe", u, limit=100).hits
                }
        assert got == expected(sites)
    finally:
        ms.close()
