"""The Entra principal provider and the SharePoint connector's change feed (Graph delta), against FakeMicrosoft
(no embedding: fast)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_microsoft import FakeMicrosoft

from ancre.connectors.base import ChangeEvent, ChangeFeed, SourceContext, Watchable
from ancre.connectors.sharepoint import KIND, build
from ancre.connectors.sharepoint.config import SharePointSourceConfig
from ancre.connectors.sharepoint.connector import DeltaCursor, SharePointConnector
from ancre.errors import DirectoryError

ALICE = "alice.martin@axonix.ch"
GUEST = "ext.partner_partner.ch#EXT#@axonix.ch"


@pytest.fixture(scope="module")
def ms() -> Iterator[FakeMicrosoft]:
    with FakeMicrosoft.axonix() as fake:
        yield fake


def _cfg(ms: FakeMicrosoft, **kw: Any) -> SharePointSourceConfig:
    cert = ms.certificate
    return SharePointSourceConfig(
        id="sp", kind="sharepoint", tenant_id=ms.tenant_id, client_id=ms.client_id,
        certificate_path=cert.key_pem_path, certificate_thumbprint=cert.thumbprint, authority=ms.authority,
        graph_url=ms.graph_url, ca_file=ms.ca_path, sites=(ms.site_url("Direction"), ms.site_url("Projets")), **kw,
    )


def _ctx(tmp_path: Path) -> SourceContext:
    def no_directory():
        raise AssertionError("not needed")

    return SourceContext(directory=no_directory, ignore=(), private_paths=(), data_dir=tmp_path)


def test_entra_principals_of_a_member_by_upn_and_by_account_name(ms: FakeMicrosoft, tmp_path: Path) -> None:
    assert KIND.providers is not None
    (entra,) = KIND.providers(_cfg(ms), _ctx(tmp_path))
    alice = ms.user(ALICE)
    p = entra.principals(ALICE)
    direction_members = next(g.id for g in ms.site("Direction").groups.values() if g.title == "Members")
    assert f"aad:{alice.id}" in p
    assert f"aad:{ms.group('GG_Direction').id}" in p and f"aad:{ms.group('GG_Personnel').id}" in p  # transitive
    assert "aad:everyone-internal" in p
    assert f"sp:{ms.site('Direction').id}:{direction_members}" in p
    assert entra.principals("alice") == p == entra.principals("AXONIX\\alice")
    assert entra.principals("nobody@axonix.ch") == frozenset()


def test_entra_guest_is_never_everyone_internal(ms: FakeMicrosoft, tmp_path: Path) -> None:
    (entra,) = KIND.providers(_cfg(ms), _ctx(tmp_path))  # type: ignore[misc]
    p = entra.principals(GUEST)
    assert f"aad:{ms.user(GUEST).id}" in p and "aad:everyone-internal" not in p
    projets_members = next(g.id for g in ms.site("Projets").groups.values() if g.title == "Members")
    assert f"sp:{ms.site('Projets').id}:{projets_members}" not in p


def test_entra_failure_fails_closed(ms: FakeMicrosoft, tmp_path: Path) -> None:
    (entra,) = KIND.providers(_cfg(ms, max_retries=0), _ctx(tmp_path))  # type: ignore[misc]
    ms.fail(r"^/users/", 503, times=1)
    with pytest.raises(DirectoryError):
        entra.principals("chloe.rey@axonix.ch")


def test_delta_feed_reports_changes_as_events_from_its_cursor(ms: FakeMicrosoft, tmp_path: Path) -> None:
    conn = build(_cfg(ms, sharing_delta=True), _ctx(tmp_path))
    assert isinstance(conn, SharePointConnector) and isinstance(conn, ChangeFeed) and not isinstance(conn, Watchable)
    assert conn.cursor_type is DeltaCursor and conn.poll_interval_s == _cfg(ms).delta_interval_s
    try:
        assert len(list(conn.list_items())) >= 6
        docs = ms.drive("Projets")
        ms.add_file(docs, "avant.md", b"# Avant")
        base = conn.changes(None)  # the baseline: no event, the drives' delta links
        assert base.events == () and set(base.cursor.links) == {ms.drive("Direction").id, docs.id}
        assert DeltaCursor.model_validate_json(base.cursor.model_dump_json()) == base.cursor  # what the engine keeps
        same = conn.changes(base.cursor)
        assert same.events == () and same.cursor == base.cursor
        f = ms.add_file(docs, "nouveau.md", b"# Nouveau")
        ms.grant(docs, "11-correlations-yaml.md", user=ALICE)
        ms.delete_item(docs, f)
        g = ms.add_file(docs, "second.md", b"# Second")
        batch = conn.changes(same.cursor)
        events = batch.events
        assert ChangeEvent("sp", "sites/Projets/Documents/second.md", "modified") in events
        assert ChangeEvent("sp", "sites/Projets/Documents/11-correlations-yaml.md", "modified") in events
        assert not any(e.path == "sites/Projets/Documents/nouveau.md" and e.kind == "modified" for e in events)
        assert not any(e.path == "sites/Projets/Documents/avant.md" for e in events)  # before the baseline
        assert batch.cursor != same.cursor and batch.cursor.links[docs.id] != same.cursor.links[docs.id]
        ms.rename(docs, g, "renomme.md")
        events = conn.changes(batch.cursor).events
        assert ChangeEvent("sp", "sites/Projets/Documents/second.md", "deleted") in events
        assert ChangeEvent("sp", "sites/Projets/Documents/renomme.md", "modified") in events
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_a_410_on_delta_is_a_rescan_event_and_a_fresh_cursor(ms: FakeMicrosoft, tmp_path: Path) -> None:
    conn = build(_cfg(ms), _ctx(tmp_path))
    assert isinstance(conn, SharePointConnector)
    try:
        base = conn.changes(None)
        docs = ms.drive("Projets")
        ms.gone_next_delta(docs.id, "resyncRequired")
        batch = conn.changes(base.cursor)
        assert [(e.path, e.kind) for e in batch.events] == [(None, "rescan")]
        assert "410" in batch.events[0].reason and "Projets" in batch.events[0].reason, batch.events[0].reason
        assert set(batch.cursor.links) == set(base.cursor.links)
        assert conn.changes(batch.cursor).events == ()  # the fresh link works
        assert len(conn.list_items()) >= 6  # the re-enumerated snapshot lists everything
    finally:
        ms.clear_faults()
        conn.close()  # type: ignore[attr-defined]


def _forget_own_files(data_dir: Path) -> None:
    """Remove every file the connector keeps of its own (its drive snapshots) from ``data_dir``."""
    own = sorted(data_dir.glob("sharepoint.sqlite3*"))
    assert own, "the connector kept a snapshot store"
    for f in own:
        f.unlink()


def _delta_tokens(ms: FakeMicrosoft, drive_id: str) -> list[str]:
    return [r.query.get("token", [""])[0] for r in ms.graph_requests(rf"/drives/{drive_id}/root/delta$")]


def test_the_feed_resumes_from_the_engines_cursor_when_its_own_files_are_gone(ms: FakeMicrosoft, tmp_path: Path) -> None:
    """Issue 46: the change feed resumes from the cursor the engine kept, not from the
    connector's own snapshot store. Between two rounds the connector's files are deleted and a
    new connector (a restarted daemon) is asked for the changes since the engine's cursor: it
    asks Graph for the delta since *that* link and reports every change made since, at the
    items' current paths — nothing missed, nothing asked for a rescan."""
    docs = ms.drive("Projets")
    for name in ("perte-modifie.md", "perte-partage.md", "perte-stable.md", "perte-brouillon.md"):
        ms.add_file(docs, name, f"# {name}".encode())
    first = build(_cfg(ms, sharing_delta=True), _ctx(tmp_path))
    try:
        cursor = first.changes(None).cursor
    finally:
        first.close()  # type: ignore[attr-defined]
    ms.add_file(docs, "perte-nouveau.md", b"# Ecrit pendant la perte")
    ms.modify_file(docs, ms.item(docs, "perte-modifie.md"), b"# Revu")
    ms.rename(docs, ms.item(docs, "perte-brouillon.md"), "perte-definitif.md")
    ms.grant(docs, "perte-partage.md", user=ALICE)
    _forget_own_files(tmp_path)

    again = build(_cfg(ms, sharing_delta=True), _ctx(tmp_path))
    try:
        batch = again.changes(cursor)
        assert cursor.links[docs.id].split("token=")[1] in _delta_tokens(ms, docs.id), "asked from the engine's cursor"
        got = {(e.path, e.kind) for e in batch.events}
        assert not any(e.kind == "rescan" for e in batch.events), batch.events
        for name in ("perte-nouveau.md", "perte-modifie.md", "perte-definitif.md", "perte-partage.md"):
            assert (f"sites/Projets/Documents/{name}", "modified") in got, (name, sorted(got, key=str))
        assert not any(p and p.endswith(("perte-stable.md", "perte-brouillon.md")) for p, _ in got), got
        assert batch.cursor.links[docs.id] != cursor.links[docs.id]
        assert again.changes(batch.cursor).events == ()  # the rebuilt snapshot serves the new cursor
    finally:
        again.close()  # type: ignore[attr-defined]


def test_a_deletion_the_lost_snapshot_alone_could_place_asks_for_a_rescan_saying_why(
    ms: FakeMicrosoft, tmp_path: Path
) -> None:
    """A file deleted while the connector's files were gone has no path left anywhere but in the
    engine's index: the round asks for a full pass (which purges it) and says why."""
    docs = ms.drive("Projets")
    doomed = ms.add_file(docs, "a-supprimer.md", b"# Condamne")
    first = build(_cfg(ms), _ctx(tmp_path))
    try:
        cursor = first.changes(None).cursor
    finally:
        first.close()  # type: ignore[attr-defined]
    ms.delete_item(docs, doomed)
    _forget_own_files(tmp_path)
    again = build(_cfg(ms), _ctx(tmp_path))
    try:
        batch = again.changes(cursor)
        rescans = [e for e in batch.events if e.kind == "rescan"]
        assert len(rescans) == 1 and rescans[0].path is None, batch.events
        assert "deleted since the engine's cursor" in rescans[0].reason and "sites/Projets/Documents" in rescans[0].reason
        assert again.changes(batch.cursor).events == ()  # resumed: the next round is an ordinary one
        assert "sites/Projets/Documents/a-supprimer.md" not in {i.path for i in again.list_items()}
    finally:
        again.close()  # type: ignore[attr-defined]


def test_a_snapshot_that_never_served_the_cursor_is_not_trusted(ms: FakeMicrosoft, tmp_path: Path) -> None:
    """A snapshot store restored from an older copy (or another install's) is at a point the
    engine's cursor is not: the round reads the tree again rather than applying the delta since
    the cursor to a tree that missed what came between."""
    import shutil

    docs = ms.drive("Projets")
    ms.add_file(docs, "restaure-avant.md", b"# Avant")
    conn = build(_cfg(ms), _ctx(tmp_path))
    try:
        conn.changes(None)
    finally:
        conn.close()  # type: ignore[attr-defined]
    backup = tmp_path / "backup"
    backup.mkdir()
    for f in tmp_path.glob("sharepoint.sqlite3*"):
        shutil.copy2(f, backup / f.name)
    ms.rename(docs, ms.item(docs, "restaure-avant.md"), "restaure-apres.md")  # seen by the next round only
    conn = build(_cfg(ms), _ctx(tmp_path))
    try:
        cursor = conn.changes(conn.changes(None).cursor).cursor
    finally:
        conn.close()  # type: ignore[attr-defined]
    _forget_own_files(tmp_path)
    for f in backup.iterdir():
        shutil.copy2(f, tmp_path / f.name)  # the older copy: it never handed out ``cursor``
    ms.add_file(docs, "ensuite.md", b"# Ensuite")
    conn = build(_cfg(ms), _ctx(tmp_path))
    try:
        got = {(e.path, e.kind) for e in conn.changes(cursor).events}
        assert ("sites/Projets/Documents/ensuite.md", "modified") in got
        paths = {i.path for i in conn.list_items()}
        assert "sites/Projets/Documents/restaure-apres.md" in paths
        assert "sites/Projets/Documents/restaure-avant.md" not in paths, "the restored copy's stale tree"
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_the_feed_sweeps_permissions_when_the_interval_is_due(ms: FakeMicrosoft, tmp_path: Path) -> None:
    """Graph delta misses some sharing changes: every ``permission_sweep_interval_s`` (on the
    connector's monotonic clock) a delta round also re-reads every permission, and reports the
    files whose rights changed as ``acl`` events."""
    from ancre.connectors.sharepoint import graph_client, rest_factory
    from ancre.connectors.sharepoint.snapshot import DriveSnapshotStore

    cfg = _cfg(ms, permission_sweep_interval_s=60)
    now = [0.0]
    conn = SharePointConnector(cfg, graph=graph_client(cfg), rest=rest_factory(cfg), clock=lambda: now[0],
                               snapshots=DriveSnapshotStore(tmp_path / "sharepoint.sqlite3"))
    docs = ms.drive("Direction")
    path = "sites/Direction/Documents/09-pipeline-llm.md"
    chloe = "chloe.rey@axonix.ch"
    try:
        cursor = conn.changes(None).cursor
        ms.grant(docs, "09-pipeline-llm.md", user=chloe, signal=False)
        now[0] = 59.0
        assert conn.changes(cursor).events == ()  # no delta signal, sweep not due yet
        now[0] = 60.0
        assert conn.changes(cursor).events == (ChangeEvent("sp", path, "acl"),)
        assert f"aad:{ms.user(chloe).id}" in conn.fetch_acl(next(i for i in conn.list_items() if i.path == path)).allow
        now[0] = 100.0
        assert conn.changes(cursor).events == ()  # next sweep at 120
    finally:
        conn.close()


def test_query_side_connector_finds_what_the_daemon_listed_since(ms: FakeMicrosoft, tmp_path: Path) -> None:
    daemon_side = build(_cfg(ms), _ctx(tmp_path))
    query_side = build(_cfg(ms), _ctx(tmp_path))
    assert isinstance(daemon_side, SharePointConnector) and isinstance(query_side, SharePointConnector)
    try:
        list(daemon_side.list_items())
        assert set(query_side.read_acls(["sites/Direction/Documents/Grille_Salariale_2026.docx"]))
        ms.add_file(ms.drive("Direction"), "tard.md", b"# Tard")
        assert query_side.read_acls(["sites/Direction/Documents/tard.md"]) == {}
        list(daemon_side.list_items())
        acl = query_side.read_acls(["sites/Direction/Documents/tard.md"])["sites/Direction/Documents/tard.md"]
        members = next(g.id for g in ms.site("Direction").groups.values() if g.title == "Members")
        assert f"sp:{ms.site('Direction').id}:{members}" in acl.allow
    finally:
        daemon_side.close()  # type: ignore[attr-defined]
        query_side.close()  # type: ignore[attr-defined]


def test_snapshots_are_kept_in_a_table_of_their_own_never_in_the_state_db(ms: FakeMicrosoft, tmp_path: Path) -> None:
    import sqlite3

    conn = build(_cfg(ms), _ctx(tmp_path))
    try:
        n = len(conn.list_items())
        assert n >= 6
    finally:
        conn.close()  # type: ignore[attr-defined]
    assert not (tmp_path / "state.sqlite3").exists()  # the engine's state DB is not the connector's
    db = sqlite3.connect(tmp_path / "sharepoint.sqlite3")
    rows = db.execute("SELECT source, drive_id FROM sharepoint_drive_snapshots").fetchall()
    assert sorted(rows) == sorted(("sp", ms.drive(s).id) for s in ("Direction", "Projets"))
    again = build(_cfg(ms), _ctx(tmp_path))  # a restart lists from the kept snapshot: no full enumeration
    try:
        before = len(ms.graph_requests(r"/root/delta$"))
        assert len(again.list_items()) == n
        polls = ms.graph_requests(r"/root/delta$")[before:]
        assert polls and all("token" in r.query for r in polls)
    finally:
        again.close()  # type: ignore[attr-defined]


def test_an_install_with_snapshots_in_the_state_db_meta_table_reads_its_libraries_again(
    ms: FakeMicrosoft, tmp_path: Path
) -> None:
    """Snapshots an older ancre kept in the state DB's ``meta`` table are not read: the first pass
    reads every library again from an empty delta (full enumeration)."""
    import json

    from ancre.index.state import StateDB

    old = StateDB(tmp_path / "state.sqlite3")
    ids = []
    for site in ("Direction", "Projets"):  # stale snapshots: no item, a delta link that says "nothing new"
        d = ms.drive(site)
        snap = {"site_id": "x", "site_url": ms.site_url(site), "site_seg": f"sites/{site}", "name": "Documents",
                "url": "", "root": None, "delta": f"{ms.graph_url}/drives/{d.id}/root/delta?token=latest",
                "list_id": None, "library": None, "rest_refused": None, "items": {}}
        old.set_meta(f"sharepoint:sp:{d.id}", json.dumps(snap))
        ids.append(d.id)
    old.set_meta("sharepoint:sp:drives", json.dumps(sorted(ids)))
    old.close()
    conn = build(_cfg(ms), _ctx(tmp_path))
    try:
        before = len(ms.graph_requests(r"/root/delta$"))
        assert len(conn.list_items()) >= 6
        polls = ms.graph_requests(r"/root/delta$")[before:]
        assert polls and not any("token" in r.query for r in polls)
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_check_reads_sites_and_role_assignments_and_names_the_secret_problem(ms: FakeMicrosoft, tmp_path: Path) -> None:
    from ancre.connectors.base import Checkable

    conn = build(_cfg(ms), _ctx(tmp_path))
    assert isinstance(conn, Checkable)
    res = conn.check()
    assert res.ok and "role assignments read" in res.detail, res
    cfg = _cfg(ms).model_copy(update={"certificate_path": None, "certificate_thumbprint": None, "client_secret": None})
    secret = SharePointSourceConfig.model_validate({**cfg.model_dump(), "client_secret": ms.client_secret})
    res = build(secret, _ctx(tmp_path)).check()  # type: ignore[attr-defined]
    assert not res.ok and "certificate" in res.fix, res


def test_site_role_change_is_an_acl_event_for_every_inheriting_item(ms: FakeMicrosoft, tmp_path: Path) -> None:
    from support.fake_microsoft import security_group_claim

    conn = build(_cfg(ms), _ctx(tmp_path))
    assert isinstance(conn, SharePointConnector)
    try:
        items = {it.path: it for it in conn.list_items()}
        cursor = conn.changes(None).cursor
        grille = items["sites/Direction/Documents/Grille_Salariale_2026.docx"]
        rh = ms.group("GG_RH")
        assert f"aad:{rh.id}" not in conn.fetch_acl(grille).allow
        ms.set_web_role("Direction", security_group_claim(rh.id), ["Read"])
        assert ChangeEvent("sp", None, "acl") in conn.changes(cursor).events
        assert f"aad:{rh.id}" in conn.fetch_acl(grille).allow
        ms.set_web_role("Direction", security_group_claim(rh.id), [])
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_explain_names_the_grant_and_maps_a_web_url(ms: FakeMicrosoft, tmp_path: Path) -> None:
    conn = build(_cfg(ms), _ctx(tmp_path))
    assert isinstance(conn, SharePointConnector)
    try:
        items = {it.path: it for it in conn.list_items()}
        acl, grants = conn.explain(items["sites/Projets/Documents/04_Reponse_AO_Migration_Azure_Sarrasin.docx"])
        assert acl.allow and {g.principal for g in grants} == acl.allow
        assert any("Members" in g.via for g in grants), grants
        url = ms.site_url("Projets") + "/Documents/04_Reponse_AO_Migration_Azure_Sarrasin.docx"
        assert conn.explain_path(url) == "sites/Projets/Documents/04_Reponse_AO_Migration_Azure_Sarrasin.docx"
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_acl_explain_of_a_sharepoint_item_names_the_grant_and_the_entra_provider(
    ms: FakeMicrosoft, tmp_path: Path
) -> None:
    from support.corpus import CORPUS

    from ancre.acl.directory import FileDirectory
    from ancre.acl.explain import explain_trace
    from ancre.acl.providers import DirectoryProvider, PrincipalResolver

    assert KIND.providers is not None
    (entra,) = KIND.providers(_cfg(ms), _ctx(tmp_path))
    directory = FileDirectory(CORPUS / "directory.json")
    resolver = PrincipalResolver([DirectoryProvider(directory), entra])
    conn = build(_cfg(ms), _ctx(tmp_path))
    assert isinstance(conn, SharePointConnector)
    path = "sites/Projets/Documents/04_Reponse_AO_Migration_Azure_Sarrasin.docx"
    try:
        list(conn.list_items())
        trace = conn.explain_acl(conn.explain_path(path))
        assert trace.grants is not None and trace.grant_via
        ex = explain_trace(trace, ALICE, directory=directory, resolver=resolver)
        assert ex.readable and ex.provider == f"entra:{_cfg(ms).id}", ex
        assert ex.decided_by is not None and ex.decided_by in trace.grant_via
        assert f"allowed by {trace.grant_via[ex.decided_by]}" in ex.render()
        guest = explain_trace(trace, GUEST, directory=directory, resolver=resolver)
        assert not guest.readable
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_entra_principals_are_cached_for_the_ttl(ms: FakeMicrosoft, tmp_path: Path) -> None:
    from ancre.connectors.sharepoint import graph_client, rest_factory
    from ancre.connectors.sharepoint.connector import resolve_sites
    from ancre.connectors.sharepoint.provider import EntraProvider, SiteRef

    cfg = _cfg(ms)
    graph = graph_client(cfg)
    now = [0.0]
    entra = EntraProvider(
        graph, tenant_id=ms.tenant_id, rest=rest_factory(cfg), ttl_s=60, clock=lambda: now[0],
        sites=lambda: [SiteRef(i, u) for i, u in resolve_sites(graph, cfg.sites)],
    )
    try:
        first = entra.principals("chloe.rey@axonix.ch")
        n = len(ms.requests)
        assert entra.principals("chloe.rey@axonix.ch") == first and len(ms.requests) == n  # cached
        ms.group("GG_RH").members.append(ms.user("chloe.rey@axonix.ch").id)
        now[0] = 61.0
        assert f"aad:{ms.group('GG_RH').id}" in entra.principals("chloe.rey@axonix.ch")  # expired: read again
    finally:
        ms.group("GG_RH").members.remove(ms.user("chloe.rey@axonix.ch").id)
        graph.close()
