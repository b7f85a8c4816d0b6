"""SharePoint rights as Microsoft documents them, end to end through search as the users: the fake
tenant serves the documented shapes (tests/support/fake_microsoft.py, examples in
tests/support/ms_docs), the source is synced by the real engine (e5-local, embedded store), and
each user asks :meth:`ancre.query.QueryCore.search` — principals from the directory and the Entra
provider, hybrid retrieval, the rights filter and (unless said) the live rights check.

One test per point of the issue "SharePoint rights as Microsoft documents them"; the property test
over random site trees is ``test_sharepoint_rights_property.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.fake_microsoft import EVERYONE_EXCEPT_EXTERNAL, FakeMicrosoft
from support.ms_docs import copy_of

from ancre.app.check import check_source
from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.connectors.sharepoint.connector import SharePointConnector
from ancre.daemon.progress import index_status

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = REPO / "examples" / "axonix" / "directory.json"
ALICE = "alice.martin@axonix.ch"  # GG_Direction
BRUNO = "bruno.favre@axonix.ch"  # GG_Techniciens
CHLOE = "chloe.rey@axonix.ch"  # GG_Techniciens, GG_Stagiaires
GUEST = "ext.partner_partner.ch#EXT#@axonix.ch"


@pytest.fixture(scope="module")
def e5() -> Any:
    from ancre.index.embedder_factory import make_embedder
    from ancre.settings import E5LocalEmbedderConfig

    return make_embedder(E5LocalEmbedderConfig())


class World:
    """A fake tenant (started by :meth:`start`) and, once :meth:`runtime` is called, a runtime
    with one SharePoint source over ``sites`` (server-relative URLs, in that order)."""

    def __init__(self, tmp_path: Path, e5: Any) -> None:
        self.tmp = tmp_path
        self.e5 = e5
        self.ms = FakeMicrosoft()
        ms = self.ms
        directory = __import__("json").loads(DIRECTORY.read_text(encoding="utf-8"))
        for g in directory["groups"]:
            ms.add_group(g, sam=g)
        for sam, u in directory["users"].items():
            user = ms.add_user(u["upn"], sam=sam)
            for g in u.get("groups", []):
                ms.group(g).members.append(user.id)
        ms.add_user(GUEST, display_name="External Partner", user_type="Guest", mail="ext.partner@partner.ch")
        self.rt: Runtime | None = None
        self.conn: SharePointConnector | None = None

    def site(self, path: str, *, open_to_all: bool) -> Any:
        """A site at ``path`` with a library "Documents": its "Members" group holds everyone
        internal (``open_to_all``) or GG_Direction only."""
        s = self.ms.add_site(path.rsplit("/", 1)[-1], path=path)
        who = EVERYONE_EXCEPT_EXTERNAL.format(tenant=self.ms.tenant_id) if open_to_all else self.ms.group("GG_Direction").claim()
        self.ms.add_site_group(s, "Members", [who], role="Read")
        return self.ms.add_drive(s, "Documents")

    def runtime(self, *, query: dict[str, Any] | None = None, **src: Any) -> Runtime:
        ms = self.ms
        if ms._server is None:
            ms.start()
        cert = ms.certificate
        settings = load_settings(
            None, data_dir=str(self.tmp / "data"), embedder={"kind": "e5-local"}, store={"kind": "edge"},
            directory={"kind": "file", "path": str(DIRECTORY), "cache_ttl_s": 0},
            query={"live_acl_ttl_s": 0, **(query or {})},
            sources=[{
                "id": "sp", "kind": "sharepoint", "tenant_id": ms.tenant_id, "client_id": ms.client_id,
                "certificate_path": str(cert.key_pem_path), "certificate_thumbprint": cert.thumbprint,
                "authority": ms.authority, "graph_url": ms.graph_url, "ca_file": str(ms.ca_path),
                "sites": [ms.site_url(s) for s in ms.sites.values()], "identity_cache_ttl_s": 0, **src,
            }],
        )
        rt = Runtime(settings)
        rt.__dict__["embedder"] = self.e5
        self.rt = rt
        conn = rt.connectors()[0]
        assert isinstance(conn, SharePointConnector)
        self.conn = conn
        return rt

    def sync(self) -> Any:
        assert self.rt is not None and self.conn is not None
        return self.rt.engine.run_pass(self.conn)

    def found(self, user: str, question: str) -> set[str]:
        """Paths of the documents ``user``'s search returns."""
        assert self.rt is not None
        return {h.path for h in self.rt.query_core.search(question, user, limit=20).hits}

    def files(self, user: str, question: str) -> set[str]:
        """File names (last path segment) of the documents ``user``'s search returns: what a
        test of one site asserts, whatever the path's site prefix."""
        return {p.rsplit("/", 1)[-1] for p in self.found(user, question)}

    def states(self) -> dict[str, tuple[str, str | None]]:
        """``file name -> (status, reason)`` of every item in the state DB."""
        assert self.rt is not None
        return {s.path.rsplit("/", 1)[-1]: (s.status, s.reason) for s in self.rt.state.all_items()}

    def close(self) -> None:
        if self.rt is not None:
            self.rt.close()
        self.ms.close()


@pytest.fixture()
def world(tmp_path: Path, e5: Any) -> Iterator[World]:
    w = World(tmp_path, e5)
    yield w
    w.close()


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------- point 1
def test_two_sites_whose_urls_end_the_same_never_share_an_item_or_its_rights(world: World) -> None:
    """``/sites/Projets`` (GG_Direction only) and ``/teams/Projets`` (everyone) both hold
    ``Documents/atlas.md``: two documents, two paths, each with its own rights — also through the
    live check, which reads by drive id + item id, not by path."""
    restricted = world.site("/sites/Projets", open_to_all=False)
    opened = world.site("/teams/Projets", open_to_all=True)
    world.ms.add_file(restricted, "atlas.md", b"# Atlas\n\nBudget confidentiel du projet Atlas : 4,2 millions de francs.")
    world.ms.add_file(opened, "atlas.md", b"# Atlas\n\nPlanning public du projet Atlas : lancement en mars.")
    world.runtime()
    rep = world.sync()
    assert rep.outcome == "ok" and rep.new == 2, rep
    question = "budget confidentiel du projet Atlas"
    both = {"sites/Projets/Documents/atlas.md", "teams/Projets/Documents/atlas.md"}
    assert world.found(ALICE, question) == both
    for _ in range(2):  # the live check runs at every search: it must not move one site's rights to the other
        assert world.found(BRUNO, question) == {"teams/Projets/Documents/atlas.md"}
    assert {st.path for st in world.rt.state.all_items()} == both  # type: ignore[union-attr]


def test_subsites_with_the_same_name_are_two_sites(world: World) -> None:
    a = world.site("/sites/A/Projets", open_to_all=False)
    b = world.site("/sites/B/Projets", open_to_all=True)
    world.ms.add_file(a, "plan.md", b"# Plan\n\nPlan secret de la fusion avec Baumont.")
    world.ms.add_file(b, "plan.md", b"# Plan\n\nPlan de la fete du personnel.")
    world.runtime()
    world.sync()
    assert world.found(BRUNO, "plan de la fusion avec Baumont") == {"sites/B/Projets/Documents/plan.md"}
    assert world.found(ALICE, "plan de la fusion avec Baumont") == {
        "sites/A/Projets/Documents/plan.md", "sites/B/Projets/Documents/plan.md"}


# ------------------------------------------------------------------------------------- point 2
@pytest.mark.parametrize("live_acl", [True, False])
def test_expired_link_and_guest_grant_grant_nothing_at_that_instant(world: World, live_acl: bool) -> None:
    """A specific-people link and a guest's grant with an ``expirationDateTime``: nothing once
    expired (Graph still lists them), and a grant that expires later stops at that instant — no
    sync in between, with the live check (Graph read at answer time) or without it (the stored
    ACL carries the expiry)."""
    docs = world.site("/sites/Projets", open_to_all=False)
    ms = world.ms
    offre = ms.add_file(docs, "offre.md", b"# Offre\n\nOffre partenaire pour la migration Azure de Sarrasin.")
    ms.break_inheritance(docs, offre)
    ms.grant(docs, offre, user=GUEST, expires=iso(time.time() - 60))  # the guest's access ended a minute ago
    ms.add_link(docs, offre, scope="users", recipients=[BRUNO], expires=iso(time.time() + 3600))
    world.runtime(query={"live_acl": live_acl}, sharing_delta=True)
    assert world.sync().outcome == "ok"
    question = "offre partenaire migration Azure Sarrasin"
    assert world.files(GUEST, question) == set()
    assert world.files(BRUNO, question) == {"offre.md"}
    # the link now ends in a few seconds: the ACL-only update is read, then no sync at all
    ends = time.time() + 20
    ms.set_permissions(docs, offre, [
        {**p, "expirationDateTime": iso(ends)} if p.get("link") else p for p in ms.item(docs, "offre.md").permissions or []
    ])
    assert world.sync().acl_only == 1
    assert time.time() < ends - 1, "the ACL-only pass took longer than the link had left"
    assert world.files(BRUNO, question) == {"offre.md"}
    time.sleep(max(0.0, ends - time.time()) + 1.5)
    assert world.files(BRUNO, question) == set()


# ------------------------------------------------------------------------------------- point 3
def test_broken_inheritance_with_no_assignment_is_readable_by_nobody(world: World) -> None:
    """``breakroleinheritance(false)`` and nothing granted: Graph lists ``value: []`` (and never
    ``inheritedFrom`` in a SharePoint library) — nobody reads, not the library's readers."""
    docs = world.site("/sites/Projets", open_to_all=True)
    ms = world.ms
    ms.add_file(docs, "ouvert.md", b"# Ouvert\n\nProcedure de reservation des salles de reunion.")
    secret = ms.add_file(docs, "verrouille.md", b"# Verrouille\n\nProcedure de licenciement collectif en preparation.")
    ms.break_inheritance(docs, secret)
    world.runtime()
    assert world.sync().outcome == "ok"
    for user in (ALICE, BRUNO, CHLOE):
        assert "verrouille.md" not in world.files(user, "procedure de licenciement collectif")
    assert "ouvert.md" in world.files(BRUNO, "procedure de reservation des salles")
    # deliberate: what SharePoint says, not an ACL problem
    assert world.states()["verrouille.md"] == ("indexed", None)


# ------------------------------------------------------------------------------------- point 4
def test_owners_claim_grants_the_groups_owners_not_its_members(world: World) -> None:
    """A permission naming a Microsoft 365 group *and* its owners claim (``…|<gid>_o``) is read
    by the group's owners: a plain member does not read an owners-only file."""
    ms = world.ms
    team = ms.add_group("Equipe Projets", unified=True)
    team.members += [ms.user(BRUNO).id, ms.user(CHLOE).id]
    team.owners.append(ms.user(CHLOE).id)
    docs = world.site("/sites/Projets", open_to_all=False)
    f = ms.add_file(docs, "owners.md", b"# Proprietaires\n\nEvaluation annuelle des membres de l'equipe projets.")
    ms.break_inheritance(docs, f)
    ms.grant(docs, f, owners_of="Equipe Projets")
    world.runtime()
    assert world.sync().outcome == "ok"
    question = "evaluation annuelle des membres de l'equipe"
    assert world.files(BRUNO, question) == set()  # a member, not an owner
    assert world.files(CHLOE, question) == {"owners.md"}


# ------------------------------------------------------------------------------------- point 5
def test_one_site_refusing_rest_loses_only_its_site_groups(world: World) -> None:
    """A site whose SharePoint REST answers 403 (``/contentstorage/``-like): its documents, read
    only through its site groups, fail closed with the reason in ``ancre status`` and ``ancre
    check``; every user's other rights resolve and their searches answer."""
    ms = world.ms
    closed = world.site("/sites/Direction", open_to_all=False)
    opened = world.site("/sites/Projets", open_to_all=True)
    ms.add_file(closed, "comite.md", b"# Comite\n\nCompte rendu du comite de direction de novembre.")
    ms.add_file(opened, "guide.md", b"# Guide\n\nGuide d'installation du poste de travail.")
    ms.refuse_rest(closed.site_id, 403)
    rt = world.runtime()
    rep = world.sync()
    assert rep.outcome == "ok"
    assert world.files(BRUNO, "guide d'installation du poste de travail") == {"guide.md"}
    assert world.files(ALICE, "guide d'installation du poste de travail") == {"guide.md"}
    assert "comite.md" not in world.files(ALICE, "compte rendu du comite de direction")
    assert rep.acl_unreadable == 1, rep
    problems = index_status(rt.state, 0)["problems"]
    assert [(p["path"], "REST" in p["reason"] and "403" in p["reason"]) for p in problems] == [
        ("sites/Direction/Documents/comite.md", True)]
    check = check_source(rt, rt.settings.sources[0])
    assert not check.ok and "sites/Direction" in check.detail and "403" in check.detail, check


# ------------------------------------------------------------------------------------- point 6
def test_a_transient_permission_read_error_is_retried_at_the_next_pass(world: World) -> None:
    ms = world.ms
    docs = world.site("/sites/Projets", open_to_all=True)
    f = ms.add_file(docs, "nouveau.md", b"# Nouveau\n\nCalendrier des astreintes du service technique.")
    ms.fail(rf"/items/{f.id}/permissions$", 404, times=1)  # just created: not found yet
    rt = world.runtime()
    rep = world.sync()
    failures = getattr(world.conn, "permission_failures", None)
    assert rep.acl_unreadable == 1, rep
    assert [p["path"].rsplit("/", 1)[-1] for p in index_status(rt.state, 0)["problems"]] == ["nouveau.md"]
    question = "calendrier des astreintes du service technique"
    assert world.files(BRUNO, question) == set()
    rep = world.sync()  # the next pass (a delta with no change) reads it again
    assert world.files(BRUNO, question) == {"nouveau.md"}
    assert rep.acl_unreadable == 0 and rep.acl_only == 1, rep
    assert index_status(rt.state, 0)["problems"] == []
    # counted, then cleared
    assert (failures, world.conn.permission_failures) == (1, 0)  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------- point 7
def test_onenote_trailing_space_facetless_entry_and_the_documented_people_link(world: World) -> None:
    ms = world.ms
    docs = world.site("/sites/Projets", open_to_all=False)
    ms.add_file(docs, "Carnet de reunions", b"", package=True)
    ms.add_file(docs, "note.md ", b"# Note\n\nInventaire des licences logicielles du service.")
    people = ms.add_file(docs, "partage.md", b"# Partage\n\nCalendrier des revues de code de l'equipe.")
    ms.break_inheritance(docs, people)
    ms.add_link(docs, people, scope=None, recipients=[BRUNO])  # no "scope": the page's own people-link example
    ms.add_delta_entries(docs.id, [{"id": "01FACETLESS", "name": "fantome.md"}])  # no file/folder/deleted facet
    world.runtime()
    rep = world.sync()
    assert rep.outcome == "ok", rep
    st = world.states()
    assert st.get("Carnet de reunions") == ("skipped", "unsupported: OneNote notebook")
    assert st.get("note.md ", ("?",))[0] == "indexed"
    assert "fantome.md" not in st
    assert world.files(ALICE, "inventaire des licences logicielles") == {"note.md "}
    assert world.files(BRUNO, "calendrier des revues de code") == {"partage.md"}
    assert world.files(CHLOE, "calendrier des revues de code") == set()


def test_the_permission_pages_own_examples_map_as_documented() -> None:
    """The JSON examples of "Permission resource type", verbatim: the people link (no scope)
    grants its two recipients; view/edit links without scope or recipients, the existing-access
    link and an unredeemed invitation grant nobody; a redeemed invitation grants its user.
    ``0001-01-01T00:00:00Z`` is no expiry."""
    from ancre.connectors.sharepoint.permissions import permission_grants

    kw: dict[str, Any] = {"site_id": "s", "tenant_id": "t", "policy": "specific_people", "resolve_upn": lambda _u: None}
    got = {name: sorted(g.principal for g in permission_grants(copy_of(name), **kw)) for name in (
        "permission-people-link", "permission-view-link", "permission-edit-link", "permission-existing-link",
        "permission-invite-email", "permission-invite-redeemed")}
    assert got == {
        "permission-people-link": ["aad:35fij1974gb8832", "aad:9397721fh4hgh73"],
        "permission-view-link": [], "permission-edit-link": [], "permission-existing-link": [],
        "permission-invite-email": [], "permission-invite-redeemed": ["aad:5d33dd65c6932946"],
    }
    assert all(g.expires is None for g in permission_grants(copy_of("permission-people-link"), **kw))


# ------------------------------------------------------------------------------------- point 8
def test_without_the_live_check_a_removed_permission_is_gone_after_one_sweep(world: World) -> None:
    """``query.live_acl = false``, no ``sharing_delta``: a direct permission removed without any
    delta signal is gone from search after the next permission sweep (the README's bound), which
    reads only what may have changed: the library's unique scopes."""
    ms = world.ms
    docs = world.site("/sites/Projets", open_to_all=True)
    for i in range(30):
        ms.add_file(docs, f"note-{i:02d}.md", f"# Note {i}\n\nNote de service numero {i}.".encode())
    f = ms.add_file(docs, "prime.md", b"# Prime\n\nMontant de la prime de fin d'annee de Bruno.")
    ms.break_inheritance(docs, f)
    ms.grant(docs, f, user=BRUNO)
    world.runtime(query={"live_acl": False})
    # the README's bound without the live check: permission_sweep_interval_s (300 s) + one sweep
    assert world.conn.cfg.permission_sweep_interval_s == 300  # type: ignore[union-attr]
    assert world.sync().outcome == "ok"
    question = "montant de la prime de fin d'annee"
    prime = "prime.md"
    assert prime in world.files(BRUNO, question)
    ms.set_permissions(docs, f, [], signal=False)  # removed; delta says nothing
    assert world.sync().acl_only == 0 and prime in world.files(BRUNO, question)
    before = len(ms.graph_requests(r"/permissions$"))
    rep = world.rt.engine.refresh_acls(world.conn)  # type: ignore[union-attr,arg-type]  # the daemon's sweep
    assert rep.acl_only == 1, rep
    assert prime not in world.files(BRUNO, question)
    reads = len(ms.graph_requests(r"/permissions$")) - before
    assert reads <= 2, f"the sweep read {reads} items' permissions, not only the unique ones"
