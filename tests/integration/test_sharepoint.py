"""SharePoint Online scenarios through the sync engine: the ``sharepoint`` source kind
against :class:`FakeMicrosoft` (token endpoint, Graph v1.0 and SharePoint REST on 127.0.0.1 over
TLS, driven by msal, httpx and office365-rest-python-client), e5-local and the embedded store.

Who reads what is asked the way the query core does: the user's principals (the file directory's
``sid:`` ones ∪ the Entra provider's ``aad:``/``sp:`` ones) against the ACL payload stored with the
document's chunks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_microsoft import FakeMicrosoft

from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.connectors import sharepoint
from ancre.connectors.sharepoint.connector import SharePointConnector
from ancre.models import Acl

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = REPO / "examples" / "axonix" / "directory.json"
ALICE = "alice.martin@axonix.ch"  # GG_Direction
BRUNO = "bruno.favre@axonix.ch"  # GG_Techniciens
GUEST = "ext.partner_partner.ch#EXT#@axonix.ch"


@pytest.fixture(scope="module")
def e5() -> Any:
    """One e5-local embedder for the module (loading it is the slow part of a runtime)."""
    from ancre.index.embedder_factory import make_embedder
    from ancre.settings import E5LocalEmbedderConfig

    return make_embedder(E5LocalEmbedderConfig())


@pytest.fixture()
def ms() -> Iterator[FakeMicrosoft]:
    with FakeMicrosoft.axonix() as fake:
        # the seed's 47 kB YAML guide is ~50 chunks to embed in every test: a short one does
        fake.modify_file(fake.drive("Projets"), "11-correlations-yaml.md", SHORT_GUIDE)
        yield fake


SHORT_GUIDE = (
    "# Corrélations YAML\n\nLes règles de corrélation des alarmes sont décrites en YAML : une règle par "
    "fichier, un identifiant, des conditions et une action.\n"
).encode()


def source(ms: FakeMicrosoft, **kw: Any) -> dict[str, Any]:
    """A ``[[sources]]`` entry for the fake tenant (certificate credential, both sites)."""
    cert = ms.certificate
    return {
        "id": "sp", "kind": "sharepoint", "tenant_id": ms.tenant_id, "client_id": ms.client_id,
        "certificate_path": str(cert.key_pem_path), "certificate_thumbprint": cert.thumbprint,
        "authority": ms.authority, "graph_url": ms.graph_url, "ca_file": str(ms.ca_path),
        "sites": [ms.site_url("Direction"), ms.site_url("Projets")], **kw,
    }


class Env:
    """A runtime with one SharePoint source, its connector and its Entra provider."""

    def __init__(self, tmp_path: Path, ms: FakeMicrosoft, embedder: Any = None, **src: Any) -> None:
        self.ms = ms
        self.settings = load_settings(
            None, data_dir=str(tmp_path / "data"), embedder={"kind": "e5-local"}, store={"kind": "edge"},
            directory={"kind": "file", "path": str(DIRECTORY), "cache_ttl_s": 0},
            sync={"mass_delete_min_items": 4, "mass_delete_ratio": 0.5},
            sources=[source(ms, **src)],
        )
        self.rt = Runtime(self.settings)
        if embedder is not None:
            self.rt.__dict__["embedder"] = embedder  # the module's (same config), not a second load
        conn = self.rt.connectors()[0]
        assert isinstance(conn, SharePointConnector)
        self.conn = conn
        assert sharepoint.KIND.providers is not None
        (self.entra,) = sharepoint.KIND.providers(self.settings.sources[0], self.rt.source_context())

    def sync(self, **kw: Any):
        return self.rt.engine.run_pass(self.conn, **kw)

    def principals(self, user: str) -> frozenset[str]:
        """The directory's principals ∪ the Entra provider's (the principal resolver's union)."""
        return self.rt.directory.principals(user) | self.entra.principals(user)

    def readable(self, user: str) -> set[str]:
        """Paths of the documents whose stored chunks ``user`` may read."""
        p = self.principals(user)
        return {
            pt.payload.path for coll in ("documents", "documentation") for pt in self.rt.store.scroll(coll)
            if Acl(frozenset(pt.payload.acl_allow), frozenset(pt.payload.acl_deny)).readable_by(p)
        }

    def indexed(self) -> set[str]:
        return {st.path for st in self.rt.state.all_items() if st.status == "indexed"}

    def stored(self) -> set[str]:
        return {pt.payload.path for coll in ("documents", "documentation") for pt in self.rt.store.scroll(coll)}

    def status(self, path: str) -> tuple[str, str | None]:
        st = next(s for s in self.rt.state.all_items() if s.path == path)
        return st.status, st.reason

    def close(self) -> None:
        self.rt.close()


@pytest.fixture()
def env_factory(tmp_path: Path, ms: FakeMicrosoft, e5: Any) -> Iterator[Any]:
    made: list[Env] = []

    def make(**src: Any) -> Env:
        e = Env(tmp_path, ms, e5, **src)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


DIRECTION = {
    "sites/Direction/Documents/Contrats/03_Contrat_Maintenance_Etude_Rochat.docx",
    "sites/Direction/Documents/Contrats/21_Contrat_Maintenance_Baumont_Industries.docx",
    "sites/Direction/Documents/Grille_Salariale_2026.docx",
    "sites/Direction/Documents/09-pipeline-llm.md",
}
PROJETS = {
    "sites/Projets/Documents/11-correlations-yaml.md",
    "sites/Projets/Documents/04_Reponse_AO_Migration_Azure_Sarrasin.docx",
}


# ---------------------------------------------------------------------------------- scenarios
def test_first_pass_indexes_both_sites_with_their_rights(env_factory) -> None:
    env = env_factory()
    rep = env.sync()
    assert rep.outcome == "ok" and rep.new == 6 and rep.acl_unreadable == 0, rep
    assert env.indexed() == env.stored() == DIRECTION | PROJETS
    assert env.readable(ALICE) == DIRECTION | PROJETS
    assert env.readable(BRUNO) == PROJETS
    # alice's one identity carries her AD rights and her Entra ones
    p = env.principals(ALICE)
    assert any(x.startswith("sid:") for x in p) and any(x.startswith("aad:") for x in p)
    item = env.conn.get_item("sites/Direction/Documents/Contrats/03_Contrat_Maintenance_Etude_Rochat.docx")
    assert item is not None
    assert env.conn.location(item) == env.ms.site_url("Direction") + "/Documents/Contrats/"


def test_folder_with_unique_permissions_under_a_site_open_to_everyone(env_factory, ms: FakeMicrosoft) -> None:
    pdocs = ms.drive("Projets")
    folder = ms.add_folder(pdocs, "Board")
    ms.add_file(pdocs, "plan-board.md", b"# Plan\n\nLe plan du conseil pour 2027.", parent=folder)
    ms.break_inheritance(pdocs, folder)  # unique permissions, nothing copied
    ms.grant(pdocs, folder, group="GG_Direction")
    env = env_factory()
    assert env.sync().outcome == "ok"
    assert "sites/Projets/Documents/Board/plan-board.md" in env.readable(ALICE)
    assert "sites/Projets/Documents/Board/plan-board.md" not in env.readable(BRUNO)
    assert env.readable(BRUNO) >= PROJETS


def test_everyone_except_external_users_reads_but_never_a_guest(env_factory) -> None:
    env = env_factory()
    env.sync()
    assert "aad:everyone-internal" in env.principals(BRUNO)
    assert "aad:everyone-internal" not in env.principals(GUEST)
    assert env.readable(BRUNO) == PROJETS
    assert env.readable(GUEST) == set()


def test_two_sites_same_named_members_group_are_different_principals(env_factory, ms: FakeMicrosoft) -> None:
    direction, projets = ms.site("Direction"), ms.site("Projets")
    gid_d = next(g.id for g in direction.groups.values() if g.title == "Members")
    gid_p = next(g.id for g in projets.groups.values() if g.title == "Members")
    env = env_factory()
    env.sync()
    bruno = env.principals(BRUNO)
    assert f"sp:{projets.id}:{gid_p}" in bruno
    assert f"sp:{direction.id}:{gid_d}" not in bruno
    assert not env.readable(BRUNO) & DIRECTION
    assert f"sp:{direction.id}:{gid_d}" in env.principals(ALICE)


def test_links_organization_and_anonymous_widen_nothing_specific_people_grant_recipients(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    f = ms.add_file(docs, "lien-org.md", b"# Note\n\nPartagee par lien.")
    ms.add_link(docs, f, scope="organization")
    ms.add_link(docs, f, scope="anonymous")
    g = ms.add_file(docs, "lien-personnes.md", b"# Note\n\nPartagee a Bruno.")
    ms.add_link(docs, g, scope="anonymous")
    ms.add_link(docs, g, scope="users", recipients=[BRUNO])
    env = env_factory()
    env.sync()
    for user in (BRUNO, GUEST):  # the links widen nothing beyond the site's own readers (alice)
        assert "sites/Direction/Documents/lien-org.md" not in env.readable(user)
    assert "sites/Direction/Documents/lien-personnes.md" in env.readable(BRUNO)
    assert "sites/Direction/Documents/lien-personnes.md" not in env.readable(GUEST)
    assert {"sites/Direction/Documents/lien-org.md", "sites/Direction/Documents/lien-personnes.md"} <= env.readable(ALICE)
    assert env.status("sites/Direction/Documents/lien-org.md") == ("indexed", None)  # deliberate: not an ACL problem


def test_organization_links_grant_internal_members_only_when_opted_in(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    f = ms.add_file(docs, "lien-org.md", b"# Note\n\nPartagee par lien.")
    ms.add_link(docs, f, scope="organization")
    env = env_factory(sharing_links="organization")
    env.sync()
    assert "sites/Direction/Documents/lien-org.md" in env.readable(BRUNO)
    assert "sites/Direction/Documents/lien-org.md" not in env.readable(GUEST)


def test_the_exposure_report_names_an_organization_link(env_factory, ms: FakeMicrosoft) -> None:
    """``ancre report exposure`` on a SharePoint source: a file shared by an organization-wide
    link (granted under ``sharing_links = "organization"``) is broadly readable, and the report
    names the link that opened it, as ``acl explain`` does, and what its text holds."""
    from ancre.app.reports import exposure

    docs = ms.drive("Direction")
    f = ms.add_file(docs, "lien-org.md", b"# Note\n\nPartagee par lien. IBAN CH93 0076 2011 6238 5295 7.")
    ms.add_link(docs, f, scope="organization")
    env = env_factory(sharing_links="organization")
    env.sync()
    rep = exposure(env.rt)
    exposed = {d.path: d for fo in rep.folders for d in fo.documents}
    # the Direction site's own documents (its members only) are not broadly readable
    assert not (DIRECTION & set(exposed)) and "sites/Direction/Documents/lien-org.md" in exposed, set(exposed)
    doc = exposed["sites/Direction/Documents/lien-org.md"]
    assert doc.reach.principal == "aad:everyone-internal" and doc.reach.readers and doc.reach.readers > 0
    assert doc.reach.opened_by is not None and "sharing link" in doc.reach.opened_by
    assert "organization" in doc.reach.opened_by
    assert [(x.kind.value, x.count) for x in doc.findings] == [("iban", 1)]


def test_folder_newly_shared_where_delta_returns_only_the_folder(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    env = env_factory(sharing_delta=True)
    env.sync()
    contrats = {p for p in DIRECTION if "/Contrats/" in p}
    assert not env.readable(BRUNO) & contrats
    ms.break_inheritance(docs, "Contrats")
    ms.grant(docs, "Contrats", user=BRUNO)  # unique: bruno only
    before = len(ms.graph_requests(r"/delta"))
    rep = env.sync()
    delta_calls = ms.graph_requests(r"/delta")[before:]
    assert delta_calls and all("deltashowsharingchanges" in r.headers.get("prefer", "") for r in delta_calls)
    assert rep.acl_only == 2 and rep.embedded_chunks == 0 and rep.changed == 0, rep
    assert contrats <= env.readable(BRUNO)
    assert not env.readable(ALICE) & contrats


def test_permission_removed_without_delta_signal_is_revoked_by_the_sweep(env_factory, ms: FakeMicrosoft) -> None:
    pdocs = ms.drive("Projets")
    path = "sites/Projets/Documents/11-correlations-yaml.md"
    env = env_factory(sharing_delta=True)
    env.sync()
    assert path in env.readable(BRUNO)
    ms.set_permissions(pdocs, "11-correlations-yaml.md", [{"roles": ["read"], "grantedToV2": {"user": {"id": ms.user(ALICE).id}}}], signal=False)
    rep = env.sync()
    assert rep.acl_only == 0 and path in env.readable(BRUNO)  # delta did not see it
    changed = env.conn.sweep_permissions()
    assert changed == [path]
    rep = env.rt.engine.refresh_acls(env.conn, changed)
    assert rep.acl_only == 1
    assert path not in env.readable(BRUNO) and path in env.readable(ALICE)


def test_the_daemons_acl_sweep_reads_sharepoint_permissions_at_the_source(env_factory, ms: FakeMicrosoft) -> None:
    """The daemon's own ACL sweep (``refresh_acls`` of the whole source) re-reads the permissions
    from Graph, not the ones read at the last delta."""
    pdocs = ms.drive("Projets")
    path = "sites/Projets/Documents/11-correlations-yaml.md"
    env = env_factory(sharing_delta=True)
    env.sync()
    assert path in env.readable(BRUNO)
    ms.set_permissions(pdocs, "11-correlations-yaml.md", [{"roles": ["read"], "grantedToV2": {"user": {"id": ms.user(ALICE).id}}}], signal=False)
    rep = env.rt.engine.refresh_acls(env.conn)
    assert rep.outcome == "ok" and rep.acl_only == 1, rep
    assert path not in env.readable(BRUNO) and path in env.readable(ALICE)


def test_delta_token_answered_410_full_resync_removes_unseen(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    env = env_factory()
    env.sync()
    ms.delete_item(docs, "09-pipeline-llm.md")
    ms.gone_next_delta(docs.id, "resyncChangesApplyDifferences")
    ms.add_delta_entries(docs.id, [])  # nothing extra
    ms.requests.clear()
    rep = env.sync()
    assert rep.outcome == "ok" and rep.deleted == 1 and rep.embedded_chunks == 0, rep
    assert env.indexed() == (DIRECTION | PROJETS) - {"sites/Direction/Documents/09-pipeline-llm.md"}
    assert not ms.graph_requests(r"/content$")  # unchanged files are not downloaded again


def test_410_resync_respects_the_mass_deletion_guard(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    env = env_factory()
    env.sync()
    for name in ("Contrats", "Grille_Salariale_2026.docx", "09-pipeline-llm.md"):
        ms.delete_item(docs, name)
    ms.gone_next_delta(docs.id)
    rep = env.sync()
    assert rep.outcome == "suspect" and rep.deleted == 0, rep
    assert env.stored() == DIRECTION | PROJETS


def test_batch_sub_response_429_with_retry_after_is_retried_alone(env_factory, ms: FakeMicrosoft) -> None:
    ms.throttle(r"/permissions$", times=1, retry_after=1)
    env = env_factory()
    rep = env.sync()
    assert rep.outcome == "ok" and rep.acl_unreadable == 0, rep
    perm_reads = [r.path for r in ms.graph_requests(r"/permissions$") if r.in_batch]
    assert len(perm_reads) == len(set(perm_reads)) + 1  # exactly the throttled one asked twice
    assert env.readable(ALICE) == DIRECTION | PROJETS


def test_deleted_item_without_a_name_is_purged(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    env = env_factory()
    env.sync()
    ms.delete_item(docs, "Grille_Salariale_2026.docx")
    rep = env.sync()
    assert rep.deleted == 1 and "sites/Direction/Documents/Grille_Salariale_2026.docx" not in env.stored()


def test_item_seen_twice_in_one_delta_takes_its_last_occurrence(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    env = env_factory()
    env.sync()
    it = ms.item(docs, "09-pipeline-llm.md")
    ms.modify_file(docs, it, b"# Pipeline\n\nVersion deux.")
    ms.add_delta_entries(docs.id, [{"id": it.id, "parentReference": {"driveId": docs.id, "id": it.parent_id}, "deleted": {"state": "deleted"}}])
    rep = env.sync()
    assert rep.deleted == 1 and "sites/Direction/Documents/09-pipeline-llm.md" not in env.stored()


def test_token_expiring_mid_pass_is_renewed(env_factory, ms: FakeMicrosoft) -> None:
    env = env_factory()
    issued = len(ms.token_requests)

    def progress(path: str, done: int, total: int) -> None:
        if done == 2:
            ms.expire_tokens()

    rep = env.sync(progress=progress)
    assert rep.outcome == "ok" and rep.new == 6 and rep.failed == 0, rep
    assert len(ms.token_requests) > issued + 0
    assert any(r.get("error") is None for r in ms.token_requests[issued:])


def test_excluded_label_added_to_an_indexed_file_is_gone_at_the_next_pass(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    path = "sites/Direction/Documents/Grille_Salariale_2026.docx"
    env = env_factory(exclude_labels=["Strictement confidentiel"])
    env.sync()
    assert path in env.stored()
    ms.set_label(docs, "Grille_Salariale_2026.docx", "Strictement confidentiel")
    rep = env.sync()
    assert path not in env.stored(), rep
    status, reason = env.status(path)
    assert status == "skipped" and "strictement confidentiel" in (reason or "")


def test_label_that_cannot_be_read_is_a_status_not_a_crash(env_factory, ms: FakeMicrosoft) -> None:
    docs = ms.drive("Direction")
    ms.set_label(docs, "09-pipeline-llm.md", None, error=423)
    env = env_factory(exclude_labels=["Confidentiel"])
    rep = env.sync()
    assert rep.outcome == "ok"
    status, reason = env.status("sites/Direction/Documents/09-pipeline-llm.md")
    assert status == "skipped" and "423" in (reason or "")
    assert "sites/Direction/Documents/09-pipeline-llm.md" not in env.stored()


def test_site_refusing_us_is_skipped_with_a_reason_the_rest_syncs(env_factory, ms: FakeMicrosoft) -> None:
    env = env_factory()
    env.sync()
    ms.fail(rf"/sites/{ms.site('Direction').id}/drives", 403, times=100)
    ms.modify_file(ms.drive("Projets"), "11-correlations-yaml.md", b"# Correlations\n\nVersion deux.")
    rep = env.sync()
    assert rep.outcome == "partial" and "Direction" in (rep.reason or "") and rep.changed == 1, rep
    assert env.stored() == DIRECTION | PROJETS  # nothing under the refused site purged
    refused = {u.path: u.reason for u in env.conn.list_items().unreachable}
    assert "403" in refused["sites/Direction"]


def test_graph_outage_mid_pass_is_suspect_and_revokes_nothing(env_factory, ms: FakeMicrosoft) -> None:
    env = env_factory(max_retries=1)
    env.sync()
    before = env.readable(BRUNO)
    ms.fail(r"/drives/", 503, times=10_000)
    rep = env.sync()
    assert rep.outcome == "suspect" and rep.deleted == 0 and rep.acl_only == 0, rep
    assert env.readable(BRUNO) == before
    # Graph going away after the listing, while a changed file is downloaded
    ms.clear_faults()
    ms.modify_file(ms.drive("Projets"), "11-correlations-yaml.md", b"# Correlations\n\nVersion trois.")
    ms.fail(r"/content$", 503, times=10_000)
    rep = env.sync()
    assert rep.outcome == "suspect" and "unreachable during the pass" in (rep.reason or ""), rep
    assert env.readable(BRUNO) == before and env.stored() == DIRECTION | PROJETS


def test_read_acls_reads_live(env_factory, ms: FakeMicrosoft) -> None:
    env = env_factory()
    env.sync()
    path = "sites/Projets/Documents/11-correlations-yaml.md"
    ms.set_permissions(ms.drive("Projets"), "11-correlations-yaml.md", [{"roles": ["read"], "grantedToV2": {"user": {"id": ms.user(ALICE).id}}}], signal=False)
    live = env.conn.read_acls([path, "sites/Projets/Documents/nope.md"])
    assert set(live) == {path}
    assert live[path].allow == {f"aad:{ms.user(ALICE).id}"}


def test_no_change_delta_pass_makes_no_per_item_request(env_factory, ms: FakeMicrosoft) -> None:
    env = env_factory()
    env.sync()
    ms.requests.clear()
    rep = env.sync()
    assert rep.unchanged == 6 and rep.embedded_chunks == 0
    per_item = list(ms.graph_requests(r"/items/"))
    assert per_item == []


# ---------------------------------------------------------------------------- a real tenant
REAL_ENV = ("ANCRE_SP_TENANT_ID", "ANCRE_SP_CLIENT_ID", "ANCRE_SP_CERT", "ANCRE_SP_THUMBPRINT", "ANCRE_SP_SITE")


@pytest.mark.skipif(
    not all(os.environ.get(k) for k in REAL_ENV),
    reason=f"no real tenant configured (set {', '.join(REAL_ENV)} to run against one)",
)
def test_real_tenant_lists_and_reads_acls(tmp_path: Path) -> None:
    """Read-only: lists the site, reads one document's content and ACL."""
    settings = load_settings(
        None, data_dir=str(tmp_path / "data"),
        sources=[{
            "id": "real", "kind": "sharepoint", "tenant_id": os.environ["ANCRE_SP_TENANT_ID"],
            "client_id": os.environ["ANCRE_SP_CLIENT_ID"], "certificate_path": os.environ["ANCRE_SP_CERT"],
            "certificate_thumbprint": os.environ["ANCRE_SP_THUMBPRINT"], "sites": [os.environ["ANCRE_SP_SITE"]],
        }],
    )
    with Runtime(settings) as rt:
        conn = rt.connectors()[0]
        items = list(conn.list_items())
        assert items, "the site has no document"
        acl = conn.fetch_acl(items[0])
        assert acl.allow or acl.reason is not None
        assert conn.read_acls([items[0].path])


def test_watch_events_drive_the_daemons_path_sync(env_factory, ms: FakeMicrosoft) -> None:
    """What the daemon does with the change feed's events: paths → ``sync_paths``, ``acl`` → ``refresh_acls``."""
    pdocs = ms.drive("Projets")
    env = env_factory(sharing_delta=True)
    env.sync()
    cursor = env.conn.changes(None).cursor
    ms.modify_file(pdocs, "11-correlations-yaml.md", b"# Correlations\n\nVersion deux, vorxzzzz.")
    ms.add_file(pdocs, "nouveau.md", b"# Nouveau\n\nUn nouveau document.")
    ms.delete_item(ms.drive("Direction"), "09-pipeline-llm.md")
    events = env.conn.changes(cursor).events
    rep = env.rt.engine.sync_paths(env.conn, [e.path for e in events if e.path and e.kind != "acl"])
    assert (rep.new, rep.changed, rep.deleted) == (1, 1, 1), rep
    assert "sites/Projets/Documents/nouveau.md" in env.readable(BRUNO)
    assert "sites/Direction/Documents/09-pipeline-llm.md" not in env.stored()
