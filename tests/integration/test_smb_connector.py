"""Against a real Samba AD DC (tests/support/samba.py): the corpus synced over SMB with its
NT ACLs, users resolved over LDAP (``tokenGroups``), change notification, outages, ``acl explain``.

The module shares one Runtime (e5-local, embedded store, LDAPS directory, one SMB source read as
Administrator) synced once; every test that changes the domain or the share restores it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest
import smbclient
from pydantic import SecretStr
from support.corpus import CORPUS, USERS, readable_paths
from support.samba import DNS_DOMAIN, SambaDC, samba_dc  # noqa: F401 - the session fixture
from support.smb_config import PASSWORD_ENV, write_smb_config
from typer.testing import CliRunner

import ancre.connectors.smb.wire as smb_wire
from ancre.acl.directory import CachedDirectory
from ancre.acl.explain import explain_trace
from ancre.acl.ldap_directory import LdapDirectory
from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.config import load_settings
from ancre.connectors.base import AclExplainable, ChangeEvent, WatchableConnector
from ancre.connectors.smb import SmbConnector
from ancre.errors import DirectoryError, SourceUnavailableError
from ancre.models import COLLECTIONS, SourceItem
from ancre.settings import SecretRef

DENY_FILE = "CLIENTS/test-deny-explicite.docx"
DENY_QUESTION = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"
N_FILES = sum(1 for p in (CORPUS / "share").rglob("*") if p.is_file())  # files of examples/axonix/share (11)
WAIT_S = 60.0  # upper bound of any wait for an asynchronous effect (not a speed assertion)


# ---------------------------------------------------------------- helpers
def restart_smbd(dc: SambaDC) -> None:
    """Stop smbd and start it again."""
    dc.stop_smbd()
    dc.start_smbd()


def visible(rt: Runtime, principals: frozenset[str]) -> set[str]:
    """Paths of indexed documents whose payload ACL lets ``principals`` read."""
    out = set()
    for coll in COLLECTIONS:
        for p in rt.store.scroll(coll):
            if p.payload.readable_by(principals):
                out.add(p.payload.path)
    return out


def expected(user: str) -> set[str]:
    return {path for src, path in readable_paths(user) if src == "partage"}


def indexed_docs(rt: Runtime) -> set[str]:
    return {p.payload.path for coll in COLLECTIONS for p in rt.store.scroll(coll)}


def hits(rt: Runtime, question: str, principals: frozenset[str], limit: int = 20) -> list[Any]:
    return list(rt.retriever.retrieve(question, principals, limit=limit).results)


def write_config(dest: Path, dc: SambaDC, *, ttl: float = 0) -> Path:
    return write_smb_config(dest, dc, ttl=ttl)


class Env:
    """The module's world: the DC, the config, the runtime, the SMB connector and its directory."""

    def __init__(self, dc: SambaDC, cfg: Path, rt: Runtime) -> None:
        self.dc, self.cfg, self.rt = dc, cfg, rt
        self.conn = rt.connector(rt.settings.sources[0])
        assert isinstance(self.conn, SmbConnector)
        self.ldap = rt.directory.inner  # type: ignore[attr-defined]
        assert isinstance(self.ldap, LdapDirectory)
        self.admin = {"username": dc.admin_principal, "password": dc.admin_password}

    def p(self, user: str) -> frozenset[str]:
        """P(user), fresh from LDAP."""
        return self.ldap.principals(user)

    def sync(self) -> Any:
        return self.rt.engine.run_pass(self.conn)


@pytest.fixture(scope="module")
def env(samba_dc: SambaDC, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    restart_smbd(samba_dc)  # CHANGE_NOTIFY works even if an earlier module restarted smbd
    os.environ[PASSWORD_ENV] = samba_dc.admin_password
    root = tmp_path_factory.mktemp("smb")
    cfg = write_config(root, samba_dc)
    rt = Runtime(load_settings(cfg))
    e = Env(samba_dc, cfg, rt)
    first = e.sync()
    assert first.outcome == "ok" and first.new == N_FILES and first.failed == 0, first
    e.first = first  # type: ignore[attr-defined]
    yield e
    e.conn.close()
    rt.close()
    os.environ.pop(PASSWORD_ENV, None)


# ---------------------------------------------------------------- LDAP directory
def test_ldap_finds_users_by_sam_upn_mail_and_domain_name(env: Env) -> None:
    dc, d = env.dc, env.ldap
    chloe = d.principals("chloe")
    sid = dc.sid_of
    groups = {f"sid:{sid(g)}" for g in ("GG_Techniciens", "GG_Stagiaires", "GG_Personnel", "Domain Users")}
    assert f"sid:{sid('chloe')}" in chloe and groups <= chloe  # nested GG_Personnel and primary group included
    assert {"sid:S-1-1-0", "sid:S-1-5-11"} <= chloe
    assert f"sid:{sid('GG_Direction')}" not in chloe and f"sid:{sid('GG_RH')}" not in chloe
    assert d.principals("chloe.rey@axonix.ch") == chloe  # UPN (the fixture's mail is the same address)
    assert d.principals("AXONIX\\chloe") == chloe == d.principals("CHLOE")
    # the account a name designates, matched exactly after NFC and ASCII lowercasing
    assert d.account_of("CHLOE.Rey@axonix.ch") == d.account_of("axonix\\chloe") == "chloe"
    for other in ("chlo\u0113.rey@axonix.ch", "chloe.rey@axonix.ch.evil", "chloe@axonix.ch", "mallory"):
        assert d.account_of(other) is None and d.principals(other) == frozenset(), other
    for unknown in ("mallory", "", "OTHERDOM\\chloe", "AXONIX\\mallory", "*", "chloe)(objectClass=*"):
        assert d.principals(unknown) == frozenset(), unknown

    assert d.netbios() == "AXONIX"
    assert d.sid_of("GG_RH") == d.sid_of("AXONIX\\GG_RH") == sid("GG_RH")
    assert d.sid_of("Administrators") == d.sid_of("BUILTIN\\Administrators") == "S-1-5-32-544"
    assert d.sid_of("Authenticated Users") == "S-1-5-11" and d.sid_of("nobody-here") is None
    assert d.name_of(f"sid:{sid('GG_Stagiaires')}") == "AXONIX\\GG_Stagiaires"
    assert d.name_of("S-1-5-32-544") == "BUILTIN\\Administrators" and d.name_of("S-1-1-0") == "Everyone"
    assert set(USERS) <= set(d.users())
    route = d.membership_path("chloe", sid("GG_Personnel"))
    assert route is not None and len(route) == 2 and route[-1] == "GG_Personnel"
    assert route[0] in ("GG_Techniciens", "GG_Stagiaires")
    assert d.membership_path("chloe", sid("GG_Stagiaires")) == ("GG_Stagiaires",)
    assert d.membership_path("chloe", sid("GG_RH")) is None
    assert d.is_nested(f"sid:{sid('GG_RH')}", f"sid:{sid('GG_Personnel')}")
    assert not d.is_nested(sid("GG_Personnel"), sid("GG_RH"))


def test_ldap_starttls_and_disabled_account(env: Env) -> None:
    dc = env.dc
    d = LdapDirectory(
        [f"ldap://{dc.host}:{dc.ldap_port}"], dc.base_dn, bind_dn=dc.admin_bind_dn,
        bind_password=dc.admin_password, ca_file=str(dc.tls_ca_file),
    )
    assert d.principals("bruno") == env.p("bruno")
    tool = ["samba-tool", "user", "-s", str(dc.smb_conf)]
    subprocess.run([*tool[:2], "disable", "david", *tool[2:]], check=True, capture_output=True)
    try:
        assert d.principals("david") == frozenset()  # a disabled account reads nothing
    finally:
        subprocess.run([*tool[:2], "enable", "david", *tool[2:]], check=True, capture_output=True)
    assert d.principals("david")
    d.close()


@pytest.mark.parametrize("case", ["unreachable", "bad-password", "untrusted-ca", "ldaps-without-tls-mode"])
def test_ldap_failures_raise_instead_of_an_empty_set(env: Env, case: str) -> None:
    dc = env.dc
    ldaps = f"ldaps://{dc.host}:{dc.ldaps_port}"
    kw: dict[str, Any] = {"bind_dn": dc.admin_bind_dn, "bind_password": dc.admin_password, "ca_file": str(dc.tls_ca_file)}
    if case == "unreachable":
        d = LdapDirectory([f"ldap://{dc.host}:1", "ldaps://127.0.0.1:2"], dc.base_dn, timeout_s=2, **kw)
    elif case == "bad-password":
        d = LdapDirectory([ldaps], dc.base_dn, **{**kw, "bind_password": "wrong"})
    elif case == "untrusted-ca":
        d = LdapDirectory([ldaps], dc.base_dn, **{**kw, "ca_file": None})
    else:
        from ancre.errors import ConfigError

        with pytest.raises(ConfigError, match="does not fit"):
            LdapDirectory([ldaps], dc.base_dn, tls="starttls", **kw)
        return
    with pytest.raises(DirectoryError) as err:
        d.principals("chloe")
    assert dc.admin_password not in str(err.value)
    cached = CachedDirectory(d, 60)
    with pytest.raises(DirectoryError):
        cached.principals("chloe")  # not cached as "unknown": fails again
    with pytest.raises(DirectoryError):
        cached.principals("chloe")


# ---------------------------------------------------------------- sync over SMB
def test_visibility_json_holds_for_every_user(env: Env) -> None:
    rt = env.rt
    share = CORPUS / "share"
    assert indexed_docs(rt) == {f.relative_to(share).as_posix() for f in share.rglob("*") if f.is_file()}
    for user in USERS:
        assert visible(rt, env.p(user)) == expected(user), user
    assert visible(rt, env.ldap.principals("unknown-identity")) == set()
    # stable ids: the server's file ids; locations under the configured UNC root
    st = rt.state.items("partage")
    assert len(st) == N_FILES and all(nid.startswith("fid:") for nid in st)
    locs = {p.payload.path: p.payload.location for p in rt.store.scroll("documents")}
    assert locs[DENY_FILE] == "\\\\SRV-FICHIERS\\Partage\\CLIENTS\\"
    assert {p.payload.filename for p in rt.store.scroll("documentation")} == {
        "09-pipeline-llm.md", "11-correlations-yaml.md", "Politique_Securite_SI.pdf",
    }


def test_second_pass_changes_nothing(env: Env) -> None:
    again = env.sync()
    assert again.outcome == "ok"
    assert (again.new, again.changed, again.acl_only, again.deleted, again.embedded_chunks) == (0, 0, 0, 0, 0)
    assert again.unchanged == N_FILES


def test_chloe_is_denied_through_gg_stagiaires_while_gg_techniciens_allows(env: Env) -> None:
    rt, dc = env.rt, env.dc
    payload = next(p.payload for p in rt.store.scroll("documents") if p.payload.path == DENY_FILE)
    assert f"sid:{dc.sid_of('GG_Stagiaires')}" in payload.acl_deny
    assert f"sid:{dc.sid_of('GG_Techniciens')}" in payload.acl_allow
    assert "test-deny-explicite.docx" not in {r.filename for r in hits(rt, DENY_QUESTION, env.p("chloe"))}
    assert "test-deny-explicite.docx" in {r.filename for r in hits(rt, DENY_QUESTION, env.p("bruno"))[:3]}
    # chloe still reads the sibling through GG_Techniciens
    assert "CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx" in visible(rt, env.p("chloe"))


def test_group_membership_change_shows_after_the_cache_ttl(env: Env) -> None:
    rt, dc = env.rt, env.dc
    now = [0.0]
    ttl = 5.0
    directory = CachedDirectory(env.ldap, ttl, clock=lambda: now[0])
    names = lambda: {r.filename for r in hits(rt, DENY_QUESTION, directory.principals("chloe"))}  # noqa: E731 - a one-line query helper
    assert "test-deny-explicite.docx" not in names()
    dc.remove_from_group("chloe", "GG_Stagiaires")
    try:
        assert "test-deny-explicite.docx" not in names()  # cached: the old groups for up to the TTL
        now[0] += ttl
        assert "test-deny-explicite.docx" in names()  # after the TTL: re-read, the deny no longer applies
        assert DENY_FILE in visible(rt, directory.principals("chloe"))
    finally:
        dc.add_to_group("chloe", "GG_Stagiaires")
    assert "test-deny-explicite.docx" in names()  # still cached
    now[0] += ttl
    assert "test-deny-explicite.docx" not in names()  # revoked again
    assert DENY_FILE not in visible(rt, directory.principals("chloe"))


def test_folder_acl_change_updates_every_inheriting_payload_with_zero_embeddings(env: Env) -> None:
    rt, dc = env.rt, env.dc
    ace = f"ACL:{dc.sid_of('GG_Techniciens')}:DENIED/OI|CI/READ"
    docs = {"DOCUMENTATION/09-pipeline-llm.md", "DOCUMENTATION/11-correlations-yaml.md", "DOCUMENTATION/Politique_Securite_SI.pdf"}
    q = "Que fait la règle WD-EXCL-042 ?"
    assert "11-correlations-yaml.md" in {r.filename for r in hits(rt, q, env.p("bruno"))[:3]}
    dc.smbcacls("DOCUMENTATION", "--add", ace, "--propagate-inheritance")
    try:
        rep = env.sync()
        assert rep.outcome == "ok" and rep.acl_only == len(docs) and rep.embedded_chunks == 0
        assert (rep.new, rep.changed, rep.deleted) == (0, 0, 0)
        assert not docs & visible(rt, env.p("bruno")) and not docs & visible(rt, env.p("chloe"))
        assert docs <= visible(rt, env.p("david"))
        assert "11-correlations-yaml.md" not in {r.filename for r in hits(rt, q, env.p("bruno"))}
        assert "11-correlations-yaml.md" in {r.filename for r in hits(rt, q, env.p("david"))[:3]}
    finally:
        dc.smbcacls("DOCUMENTATION", "--delete", ace, "--propagate-inheritance")
    back = env.sync()
    assert back.acl_only == len(docs) and back.embedded_chunks == 0
    assert visible(rt, env.p("bruno")) == expected("bruno")


# ---------------------------------------------------------------- change notification
class EventSync:
    """A small event → sync loop, as the daemon runs it: events are debounced ``debounce_s``, then
    the changed paths are synced (``SyncEngine.sync_paths``), or the whole source on a rescan."""

    def __init__(self, rt: Runtime, conn: SmbConnector, debounce_s: float = 0.25) -> None:
        self.rt, self.conn, self.debounce_s = rt, conn, debounce_s
        self.events: queue.Queue[ChangeEvent] = queue.Queue()
        self.seen: list[ChangeEvent] = []
        self.done: list[tuple[float, set[str], bool, Any]] = []
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=conn.watch, args=(self.events.put, self.stop), daemon=True),
            threading.Thread(target=self._loop, daemon=True),
        ]

    def __enter__(self) -> Self:
        for t in self.threads:
            t.start()
        assert self.conn.watch_ready.wait(WAIT_S), "CHANGE_NOTIFY never armed"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def _loop(self) -> None:
        paths: set[str] = set()
        rescan = False
        last = 0.0
        while not self.stop.is_set():
            try:
                ev = self.events.get(timeout=0.05)
                with self.cond:
                    self.seen.append(ev)
                if ev.path is None:
                    rescan = True
                else:
                    paths.add(ev.path)
                    if ev.dest_path:
                        paths.add(ev.dest_path)
                last = time.monotonic()
                continue
            except queue.Empty:
                pass
            if (paths or rescan) and time.monotonic() - last >= self.debounce_s:
                rep = self.rt.engine.run_pass(self.conn) if rescan else self.rt.engine.sync_paths(self.conn, sorted(paths))
                with self.cond:
                    self.done.append((time.monotonic(), set(paths), rescan, rep))
                    self.cond.notify_all()
                paths, rescan = set(), False

    def wait_synced(self, path: str, after: float) -> tuple[float, Any]:
        """Time and report of the first sync covering ``path`` that ended after ``after``."""
        deadline = time.monotonic() + WAIT_S
        with self.cond:
            while True:
                for t, ps, rescan, rep in self.done:
                    if t > after and (path in ps or rescan):
                        return t, rep
                left = deadline - time.monotonic()
                assert left > 0, f"{path} was never synced; events: {self.seen[-10:]}"
                self.cond.wait(left)

    def wait_event(self, pred: Any) -> ChangeEvent:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with self.cond:
                for ev in self.seen:
                    if pred(ev):
                        return ev
            time.sleep(0.05)
        raise AssertionError(f"no such event; seen: {self.seen}")


def test_change_notify_makes_written_files_searchable_and_deleted_ones_disappear(env: Env) -> None:
    rt, dc = env.rt, env.dc
    conn = rt.connector(rt.settings.sources[0])
    assert isinstance(conn, WatchableConnector)
    cache: dict = {}
    bruno = env.p("bruno")
    delays: list[float] = []
    written: list[str] = []
    try:
        with EventSync(rt, conn) as loop:  # type: ignore[arg-type]
            for i in range(10):
                rel = f"DOCUMENTATION/notify-{i:02d}.md"
                marker = f"ZNOTIFYMARK{i:02d}Q"
                t0 = time.monotonic()
                with smbclient.open_file(conn.unc_of(rel), "w", encoding="utf-8", connection_cache=cache, **env.admin) as fh:
                    fh.write(f"# Note {i}\n\nLe code de contrôle de cette note est {marker}.\n")
                written.append(rel)
                t_sync, rep = loop.wait_synced(rel, t0)
                assert any(marker in r.text for r in hits(rt, marker, bruno, limit=5)), (rel, rep)
                delays.append(t_sync - t0)
            median = statistics.median(delays)
            print(f"\nCHANGE_NOTIFY: written over SMB -> searchable, median {median:.2f} s over 10 writes "
                  f"(min {min(delays):.2f} s, max {max(delays):.2f} s; target <= 5 s)")
            assert any(e.kind == "created" and e.path == written[0] for e in loop.seen)

            # deleted over SMB: gone from the index
            gone = written.pop()
            t0 = time.monotonic()
            smbclient.remove(conn.unc_of(gone), connection_cache=cache, **env.admin)
            _, rep = loop.wait_synced(gone, t0)
            assert rep.deleted == 1, rep
            assert gone not in indexed_docs(rt)
            assert all("ZNOTIFYMARK09Q" not in r.text for r in hits(rt, "ZNOTIFYMARK09Q", bruno, limit=5))

            # an ACL change on the folder: an "acl" event for it, then ACL-only updates of its subtree
            ace = f"ACL:{dc.sid_of('GG_Techniciens')}:DENIED/OI|CI/READ"
            t0 = time.monotonic()
            dc.smbcacls("DOCUMENTATION", "--add", ace, "--propagate-inheritance")
            try:
                loop.wait_event(lambda e: e.kind == "acl" and e.path == "DOCUMENTATION")
                _, rep = loop.wait_synced("DOCUMENTATION", t0)
                assert rep.embedded_chunks == 0 and rep.acl_only == 3 + len(written), rep
                assert not any(p.startswith("DOCUMENTATION/") for p in visible(rt, bruno))
            finally:
                t0 = time.monotonic()
                dc.smbcacls("DOCUMENTATION", "--delete", ace, "--propagate-inheritance")
            _, rep = loop.wait_synced("DOCUMENTATION", t0)
            assert rep.embedded_chunks == 0 and rep.acl_only == 3 + len(written), rep

            # clean up through the same path
            t0 = time.monotonic()
            for rel in written:
                smbclient.remove(conn.unc_of(rel), connection_cache=cache, **env.admin)
            for rel in written:
                loop.wait_synced(rel, t0)
            written.clear()
    finally:
        for rel in written:
            (dc.share_path / rel).unlink(missing_ok=True)
        SmbConnector.drop_connections(cache)
    final = env.sync()
    assert final.outcome == "ok" and final.listed == N_FILES and final.embedded_chunks == 0
    assert visible(rt, bruno) == expected("bruno")


def test_a_file_renamed_over_smb_is_indexed_under_its_new_name(env: Env) -> None:
    rt, dc = env.rt, env.dc
    conn = rt.connector(rt.settings.sources[0])
    assert isinstance(conn, SmbConnector)
    cache: dict = {}
    src, dst = "DOCUMENTATION/a-renommer.md", "DOCUMENTATION/renomme.md"
    try:
        with EventSync(rt, conn) as loop:
            t0 = time.monotonic()
            with smbclient.open_file(conn.unc_of(src), "w", encoding="utf-8", connection_cache=cache, **env.admin) as fh:
                fh.write("# Renommage\n\nMarqueur ZRENAMEMARKQ.\n")
            # an Office lock file next to it: ignored, no event
            with smbclient.open_file(conn.unc_of("DOCUMENTATION/~$renomme.md"), "w", connection_cache=cache, **env.admin) as fh:
                fh.write("lock")
            loop.wait_synced(src, t0)
            fid = conn.get_item(src).native_id  # type: ignore[union-attr]
            t0 = time.monotonic()
            smbclient.rename(conn.unc_of(src), conn.unc_of(dst), connection_cache=cache, **env.admin)
            loop.wait_event(lambda e: e.kind == "moved" and e.path == src and e.dest_path == dst)
            _, rep = loop.wait_synced(dst, t0)
            assert rep.deleted == 0 and conn.get_item(dst).native_id == fid  # type: ignore[union-attr]
            assert not any("~$" in (e.path or "") + (e.dest_path or "") for e in loop.seen)
            docs = indexed_docs(rt)
    finally:
        for rel in (src, dst, "DOCUMENTATION/~$renomme.md"):
            (dc.share_path / rel).unlink(missing_ok=True)
        SmbConnector.drop_connections(cache)
        env.sync()
    assert src not in docs and dst in docs, sorted(d for d in docs if "renom" in d)


def test_notify_overflow_asks_for_a_rescan(env: Env) -> None:
    conn = env.rt.connector(env.rt.settings.sources[0])
    assert isinstance(conn, SmbConnector)
    conn.notify_buffer_size = 8  # no record fits: the server answers STATUS_NOTIFY_ENUM_DIR
    events: list[ChangeEvent] = []
    stop = threading.Event()
    t = threading.Thread(target=conn.watch, args=(events.append, stop), daemon=True)
    t.start()
    try:
        assert conn.watch_ready.wait(WAIT_S)
        env.dc.smbclient('mkdir "TMP-OVERFLOW"', 'rmdir "TMP-OVERFLOW"')
        deadline = time.monotonic() + WAIT_S
        while not events and time.monotonic() < deadline:
            time.sleep(0.05)
        assert events and events[0] == ChangeEvent("partage", None, "rescan")
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive() and not conn.watch_ready.is_set()


# ---------------------------------------------------------------- share permissions
def test_share_permissions_are_intersected_with_ntfs(env: Env) -> None:
    rt = env.rt
    base = rt.settings.sources[0]

    def readable(share_allow: tuple[str, ...], share_deny: tuple[str, ...] = ()) -> dict[str, set[str]]:
        cfg = base.model_copy(update={"share_allow": share_allow, "share_deny": share_deny})
        conn = SmbConnector(cfg, directory=rt.directory, ignore=rt.settings.ignore)
        try:
            acls = {it.path: conn.fetch_acl(it) for it in conn.list_items()}
        finally:
            conn.close()
        return {u: {p for p, a in acls.items() if a.readable_by(env.p(u))} for u in USERS}

    # every GG_* group is nested in GG_Personnel: the share changes nothing for them...
    personnel = readable(("GG_Personnel",), ("AXONIX\\GG_Stagiaires",))
    for user in USERS:
        # ...except the share-level deny of GG_Stagiaires, which shuts chloe out everywhere
        assert personnel[user] == (set() if user == "chloe" else expected(user)), user
    # a share open to GG_Commercial only: NTFS readers outside it lose everything
    commercial = readable(("GG_Commercial",))
    assert commercial["david"] == expected("david")
    assert all(commercial[u] == set() for u in USERS if u != "david")
    # an unknown principal in the share configuration: nobody (fail closed)
    assert all(v == set() for v in readable(("GG_Nonexistent",)).values())
    assert readable(("Everyone",)) == {u: expected(u) for u in USERS}


# ---------------------------------------------------------------- unreadable parts
def test_unlistable_folder_purges_nothing_and_denied_read_control_is_nobody(env: Env) -> None:
    rt, dc = env.rt, env.dc
    list_root = "ACL:S-1-5-11:ALLOWED/0/0x001200a9"  # Authenticated Users: read the root folder only
    locked = "CLIENTS/verrou.txt"
    bruno_sid, rh_sid = dc.sid_of("bruno"), dc.sid_of("GG_RH")
    cfg = rt.settings.sources[0].model_copy(update={"username": "AXONIX\\bruno", "password": SecretRef(value=SecretStr(dc.user_password))})
    conn = SmbConnector(cfg, directory=None, ignore=rt.settings.ignore)  # a service account that can't read all
    before = indexed_docs(rt)
    dc.smbcacls("", "--add", list_root)
    try:
        dc.smbclient(f'put "{dc.share_path / DENY_FILE}" "{locked}"')
        dc.smbcacls(locked, "--sddl", "--set", f"O:{rh_sid}D:P(A;;0x00100080;;;{bruno_sid})(A;;0x001200A9;;;{rh_sid})")
        # the folders bruno can't list make the listing fail: the pass is suspect, nothing purged
        with pytest.raises(SourceUnavailableError, match="can't be listed"):
            list(conn.list_items())
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "suspect" and rep.deleted == 0 and "ARCHIVES" in (rep.reason or "")
        assert indexed_docs(rt) == before
        # bruno sees the file but may not read its security descriptor: nobody
        item = conn.get_item(locked)
        assert item is not None
        acl = conn.fetch_acl(item)
        assert acl.allow == frozenset() and "access denied on READ_CONTROL" in (acl.reason or "")
        # the administrator reads it: GG_RH only
        assert env.conn.fetch_acl(env.conn.get_item(locked)).allow == frozenset({f"sid:{rh_sid}"})  # type: ignore[arg-type]
    finally:
        conn.close()
        dc.smbclient(f'rm "{locked}"')
        dc.smbcacls("", "--delete", list_root)
    assert env.sync().outcome == "ok"


# ---------------------------------------------------------------- acl explain
def test_acl_explain_names_the_deny_ace_and_the_group(env: Env) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["acl", "explain", "--as", "chloe", DENY_FILE, "--config", str(env.cfg)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # rich wraps long lines at words
    assert "NOT READABLE" in out
    assert "denied by explicit DENY ACE on CLIENTS/test-deny-explicite.docx for AXONIX\\GG_Stagiaires" in out
    assert env.dc.sid_of("GG_Stagiaires") in out and "chloe is a member via GG_Stagiaires" in out
    stagiaires = f"sid:{env.dc.sid_of('GG_Stagiaires')}"
    assert f"decided by: principal {stagiaires} (AXONIX\\GG_Stagiaires), from provider 'directory'" in out

    res = runner.invoke(app, ["acl", "explain", "--as", "bruno", DENY_FILE, "--config", str(env.cfg)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "READABLE" in out and "NOT READABLE" not in out
    assert "allowed by ALLOW ACE inherited from a parent folder for AXONIX\\GG_Techniciens" in out

    res = runner.invoke(app, ["acl", "explain", "--as", "chloe", "CLIENTS/absent.docx", "--config", str(env.cfg)])
    out = " ".join(res.output.split())
    assert res.exit_code == 0 and "NOT READABLE" in out and "does not exist" in out, out


def test_acl_explain_through_the_connector_applies_the_share_permissions(env: Env) -> None:
    """The SMB connector explains (AclExplainable): the descriptor read from the server, and the
    share permissions on top, as its fetch_acl computes them for a sync."""
    rt = env.rt
    cfg = rt.settings.sources[0].model_copy(update={"share_allow": ("GG_Commercial",)})
    conn = SmbConnector(cfg, directory=rt.directory, ignore=rt.settings.ignore)
    try:
        assert isinstance(conn, AclExplainable)
        rel = conn.explain_path("\\\\SRV-FICHIERS\\Partage\\CLIENTS\\..\\" + DENY_FILE.replace("/", "\\"))
        assert rel == DENY_FILE
        trace = conn.explain_acl(rel)
        assert trace.descriptor is not None and trace.share is not None and trace.share.problem is None
        bruno = explain_trace(trace, "bruno", directory=rt.directory, resolver=rt.principals)
        # the headline is the effective result: NTFS lets GG_Techniciens read, the share does not
        assert not bruno.readable and not conn.fetch_acl(conn.get_item(DENY_FILE)).readable_by(env.p("bruno"))  # type: ignore[arg-type]
        assert bruno.files is not None and bruno.files.startswith("file permissions (NTFS): READABLE")
        assert bruno.share is not None and bruno.share.endswith("effective result (file ∩ share): NOT READABLE")
        assert bruno.summary.startswith("the share permissions: not readable")
        david = explain_trace(trace, "david", directory=rt.directory, resolver=rt.principals)  # GG_Commercial
        assert not david.readable and david.share is not None and "share permissions configured" in david.share
        absent = conn.explain_acl("CLIENTS/absent.docx")
        assert absent.descriptor is None and absent.share is not None and "does not exist" in (absent.unreadable or "")
    finally:
        conn.close()


# ---------------------------------------------------------------- outages (last: restarts smbd)
def test_a_session_the_server_dropped_is_reconnected_and_the_call_retried(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    conn = env.conn
    assert conn.get_item(DENY_FILE) is not None  # a pooled, working session
    caplog.set_level(logging.INFO, logger="ancre.connectors.smb")
    # the server closes every tree connect of the share (as after an idle timeout / admin action)
    subprocess.run(["smbcontrol", "-s", str(env.dc.smb_conf), "smbd", "close-share", env.dc.share], check=True, capture_output=True)
    item = conn.get_item(DENY_FILE)
    assert item is not None and item.path == DENY_FILE
    assert "connection lost" in caplog.text and "NETWORK_NAME_DELETED" in caplog.text
    assert conn.fetch_acl(item).deny  # the new session serves everything
    assert len(list(conn.list_items())) == N_FILES


def test_smbd_stopped_during_a_sync_purges_nothing_and_the_next_pass_completes(
    env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rt, dc = env.rt, env.dc
    caplog.set_level(logging.INFO, logger="ancre.connectors.smb")
    before_points = sum(rt.store.count(c) for c in COLLECTIONS)
    events: list[ChangeEvent] = []
    stop = threading.Event()
    watcher = rt.connector(rt.settings.sources[0])
    assert isinstance(watcher, SmbConnector)
    wt = threading.Thread(target=watcher.watch, args=(events.append, stop), daemon=True)
    wt.start()
    try:
        assert watcher.watch_ready.wait(WAIT_S)

        # 1. smbd goes away in the middle of the listing: suspect, nothing purged
        real_list_dir = smb_wire.list_dir
        calls = [0]

        def list_dir(*a: Any, **kw: Any) -> Any:
            calls[0] += 1
            if calls[0] == 3:
                dc.stop_smbd()
            return real_list_dir(*a, **kw)

        monkeypatch.setattr(smb_wire, "list_dir", list_dir)
        rep = env.sync()
        monkeypatch.undo()
        assert rep.outcome == "suspect" and rep.deleted == 0, rep
        assert "unreachable" in (rep.reason or "")
        assert sum(rt.store.count(c) for c in COLLECTIONS) == before_points
        with pytest.raises(SourceUnavailableError):
            env.conn.get_item(DENY_FILE)  # an event meanwhile is not read as "deleted" either

        assert "connection lost" in caplog.text  # the failure was met by one reconnection attempt

        # 2. back: the next pass completes
        restart_smbd(dc)
        rep = env.sync()
        assert rep.outcome == "ok" and rep.listed == N_FILES and rep.embedded_chunks == 0 and rep.deleted == 0, rep

        # 3. smbd stops after the listing, while items are read: the pass stops as suspect,
        # nothing purged and no right revoked by the outage (an unreachable server is not an
        # unreadable ACL)
        def stop_at_fourth(path: str, done: int, total: int) -> None:
            if done == 4 and dc.smbd_running:
                dc.stop_smbd()

        rep = rt.engine.run_pass(env.conn, progress=stop_at_fourth)
        assert rep.outcome == "suspect" and "unreachable" in (rep.reason or ""), rep
        assert rep.deleted == 0 and rep.new == 0 and rep.acl_only == 0 and rep.embedded_chunks == 0, rep
        assert sum(rt.store.count(c) for c in COLLECTIONS) == before_points
        for user in USERS:
            assert visible(rt, env.p(user)) == expected(user), user
        restart_smbd(dc)
        rep = env.sync()
        assert rep.outcome == "ok" and rep.deleted == 0 and rep.embedded_chunks == 0, rep
        for user in USERS:
            assert visible(rt, env.p(user)) == expected(user), user

        # the watch came back by itself and asked for a full reconciliation
        deadline = time.monotonic() + WAIT_S
        while not any(e.kind == "rescan" for e in events) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ChangeEvent("partage", None, "rescan") in events
        assert watcher.watch_ready.wait(WAIT_S)
    finally:
        monkeypatch.undo()
        if not dc.smbd_running:
            restart_smbd(dc)
        stop.set()
        wt.join(10)
        watcher.close()
    shutil.rmtree(dc.share_path / "TMP-OVERFLOW", ignore_errors=True)


# ---------------------------------------------------------------- DFS links (after the outages)
# inside the share (another name of the same server: only such links are followed), but
# the folder does not exist: the referral is followed and fails
DEAD_DFS_TARGET = "msdfs:localhost\\Partage\\absent-folder"


def dfs_link(dc: SambaDC, name: str, target: str) -> Path:
    """An msdfs link ``name`` at the share's root (Samba answers it with a referral to ``target``)."""
    link = dc.share_path / name
    link.symlink_to(target)
    return link


def test_dfs_referral_is_followed_and_one_that_cannot_be_is_reported(env: Env) -> None:
    dc = env.dc
    # the target folder is excluded from the source: its files show only through the link
    cfg = env.rt.settings.sources[0].model_copy(update={"exclude": ("DFS-CIBLE/*",)})
    conn = SmbConnector(cfg, directory=None, ignore=env.rt.settings.ignore)
    links = [
        dfs_link(dc, "LIEN-OK", "msdfs:localhost\\Partage\\DFS-CIBLE"),  # another server name: followed
        # smbprotocol never follows a referral back into the share it came from (same \\server\share
        # name): it gets STATUS_PATH_NOT_COVERED, so this one is unreachable to it
        dfs_link(dc, "LIEN-SELF", "msdfs:127.0.0.1\\Partage\\DFS-CIBLE"),
    ]
    try:
        dc.smbclient('mkdir "DFS-CIBLE"', f'put "{CORPUS / "share" / DENY_FILE}" "DFS-CIBLE/cible.docx"')
        listing = conn.list_items()
        items = {it.path: it for it in listing}
        assert set(items) == set(indexed_docs(env.rt)) | {"LIEN-OK/cible.docx"}
        assert listing.unreachable_paths == ("LIEN-SELF",)
        item = items["LIEN-OK/cible.docx"]
        assert conn.fetch_content(item) == (CORPUS / "share" / DENY_FILE).read_bytes()
        assert conn.fetch_acl(item).allow  # the target's descriptor, read through the referral
    finally:
        conn.close()
        for link in links:
            link.unlink()
        shutil.rmtree(dc.share_path / "DFS-CIBLE", ignore_errors=True)


def test_dfs_links_outside_the_share_are_skipped_never_followed(env: Env) -> None:
    """A DFS link to another share of the same server (``netlogon``) or to another
    server is never followed: nothing of its target is listed, read or given an ACL; the link is
    a skipped item naming its target, and a sync reports it as such."""
    rt, dc = env.rt, env.dc
    before = indexed_docs(rt)
    scripts = dc.root / "state" / "sysvol" / DNS_DOMAIN / "scripts"  # the netlogon share
    outside = scripts / "hors-partage.md"
    reasons = {
        "LIEN-HORS": "dfs link outside the share (\\\\localhost\\netlogon)",
        "LIEN-AUTRE": "dfs link outside the share (\\\\127.0.0.9\\autre)",
    }
    links = [
        dfs_link(dc, "LIEN-HORS", "msdfs:localhost\\netlogon"),
        dfs_link(dc, "LIEN-AUTRE", "msdfs:127.0.0.9\\autre"),
    ]
    cache: dict = {}
    try:
        scripts.mkdir(parents=True, exist_ok=True)
        outside.write_text("# Hors du partage\n\nMarqueur ZDFSHORSQ.\n", encoding="utf-8")
        # the other share does serve the file: a followed link would have reached it
        assert "hors-partage.md" in smbclient.listdir(f"\\\\{dc.host}\\netlogon", connection_cache=cache, **env.admin)

        listing = env.conn.list_items()
        items = {it.path: it for it in listing}
        assert {p: it.skip for p, it in items.items() if p.startswith("LIEN-")} == reasons
        assert set(items) == before | set(reasons) and listing.unreachable == ()
        # path by path, the same rule
        assert env.conn.get_item("LIEN-HORS/hors-partage.md") is None
        assert env.conn.get_item("LIEN-HORS").skip == reasons["LIEN-HORS"]  # type: ignore[union-attr]
        assert env.conn.list_under("LIEN-HORS") == [] and env.conn.list_under("LIEN-AUTRE") == []
        assert set(env.conn.read_acls(["LIEN-HORS/hors-partage.md", DENY_FILE])) == {DENY_FILE}
        assert env.conn.fetch_acl(SourceItem("partage", "x", "LIEN-HORS/hors-partage.md", 1, 0.0)).allow == frozenset()
        with pytest.raises(PermissionError):
            env.conn.fetch_content(SourceItem("partage", "x", "LIEN-HORS/hors-partage.md", 1, 0.0))
        res = CliRunner().invoke(app, ["acl", "explain", "--as", "chloe", "LIEN-HORS/hors-partage.md", "--config", str(env.cfg)])
        out = " ".join(res.output.split())
        assert "NOT READABLE" in out and "dfs link outside the share" in out, out

        rep = env.sync()
        assert rep.outcome == "ok" and (rep.new, rep.deleted, rep.skipped) == (0, 0, 2), rep
        assert {(p, st, r) for p, st, r in rep.problems if p.startswith("LIEN-")} == {
            (p, "skipped", r) for p, r in reasons.items()
        }
        assert indexed_docs(rt) == before
        res = CliRunner().invoke(app, ["status", "--json", "--config", str(env.cfg)])
        assert res.exit_code == 0, res.output
        shown = {(p["path"], p["status"], p["reason"]) for p in json.loads(res.stdout)["problems"] if p["path"].startswith("LIEN-")}
        assert shown == {(p, "skipped", r) for p, r in reasons.items()}
    finally:
        SmbConnector.drop_connections(cache)
        for link in links:
            link.unlink()
        outside.unlink(missing_ok=True)
    rep = env.sync()
    assert rep.outcome == "ok" and indexed_docs(rt) == before, rep


def test_dfs_link_retargeted_outside_takes_out_what_was_indexed_through_it(env: Env) -> None:
    """A link followed while inside the share, then pointed at another share: the next pass
    removes what was indexed through it, and the live check no longer gives its ACL; a link
    into itself (a loop) is not followed either."""
    rt, dc = env.rt, env.dc
    before = indexed_docs(rt)
    doc = "LIEN-BASCULE/bascule.md"
    # the target folder is excluded: its file shows only through the link (one file id, one document)
    conn = SmbConnector(env.rt.settings.sources[0].model_copy(update={"exclude": ("DFS-BASCULE/*",)}), directory=None, ignore=rt.settings.ignore)
    link: Path | None = None
    loop = dfs_link(dc, "LIEN-BOUCLE", "msdfs:localhost\\Partage")  # the share's own root
    try:
        dc.smbclient('mkdir "DFS-BASCULE"', f'put "{CORPUS / "share" / "DOCUMENTATION" / "09-pipeline-llm.md"}" "DFS-BASCULE/bascule.md"')
        link = dfs_link(dc, "LIEN-BASCULE", "msdfs:localhost\\Partage\\DFS-BASCULE")
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.new == 1, rep
        assert indexed_docs(rt) == before | {doc}
        assert ("LIEN-BOUCLE", "skipped", "dfs link loop (\\\\localhost\\Partage)") in rep.problems, rep.problems
        assert set(conn.read_acls([doc])) == {doc}

        link.unlink()
        link = dfs_link(dc, "LIEN-BASCULE", "msdfs:localhost\\netlogon")
        assert conn.read_acls([doc]) == {}  # the live check: at once, before any pass
        assert conn.get_item(doc) is None
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.deleted == 1, rep
        assert indexed_docs(rt) == before
        assert ("LIEN-BASCULE", "skipped", "dfs link outside the share (\\\\localhost\\netlogon)") in rep.problems
    finally:
        conn.close()
        for lk in (link, loop):
            if lk is not None:
                lk.unlink()
        shutil.rmtree(dc.share_path / "DFS-BASCULE", ignore_errors=True)
    rep = env.sync()
    assert rep.outcome == "ok" and indexed_docs(rt) == before, rep


def test_dfs_links_leading_to_each_other_end_the_walk(env: Env) -> None:
    """Two folders of the share, each holding a DFS link to the other, and a link to its own
    folder: the walk ends. The link to its own folder is a loop; each cross link is followed once
    (inside the share), and the link met behind it is one smbclient does not follow (a second
    referral hop: STATUS_PATH_NOT_COVERED), reported unreachable — the walk's own loop check
    (targets already followed on the way) would stop it otherwise."""
    dc = env.dc
    for here, there in (("DFS-X", "DFS-Y"), ("DFS-Y", "DFS-X")):
        (dc.share_path / here).mkdir()
        (dc.share_path / here / f"VERS-{there[-1]}").symlink_to(f"msdfs:localhost\\Partage\\{there}")
    (dc.share_path / "DFS-X" / "VERS-SOI").symlink_to("msdfs:localhost\\Partage\\DFS-X")
    try:
        listing = env.conn.list_items()
        items = {it.path: it for it in listing}
        seen = {p: it.skip for p, it in items.items() if p.startswith("DFS-")}
        assert seen == {
            "DFS-X/VERS-SOI": "dfs link loop (\\\\localhost\\Partage\\DFS-X)",
            "DFS-Y/VERS-X/VERS-SOI": "dfs link loop (\\\\localhost\\Partage\\DFS-X)",
        }, seen
        assert set(listing.unreachable_paths) == {"DFS-X/VERS-Y/VERS-X", "DFS-Y/VERS-X/VERS-Y"}
    finally:
        for d in ("DFS-X", "DFS-Y"):
            shutil.rmtree(dc.share_path / d, ignore_errors=True)


def test_dead_dfs_link_purges_nothing_while_other_changes_apply(env: Env) -> None:
    rt, dc = env.rt, env.dc
    before = indexed_docs(rt)
    new = "DOCUMENTATION/dfs-voisin.md"
    link = dfs_link(dc, "LIEN-MORT", DEAD_DFS_TARGET)
    cache: dict = {}
    try:
        with smbclient.open_file(env.conn.unc_of(new), "w", encoding="utf-8", connection_cache=cache, **env.admin) as fh:
            fh.write("# Voisin\n\nMarqueur ZDFSVOISINQ.\n")
        rep = env.sync()
        assert rep.outcome == "partial" and "LIEN-MORT" in (rep.reason or ""), rep
        assert (rep.new, rep.deleted) == (1, 0) and rep.listed == N_FILES + 1, rep
        assert env.conn.list_items().unreachable_paths == ("LIEN-MORT",)
        assert indexed_docs(rt) == before | {new}
        # a deletion elsewhere is still applied while the link stays dead
        smbclient.remove(env.conn.unc_of(new), connection_cache=cache, **env.admin)
        rep = env.sync()
        assert rep.outcome == "partial" and rep.deleted == 1, rep.reason
        assert indexed_docs(rt) == before
    finally:
        SmbConnector.drop_connections(cache)
        link.unlink()
        (dc.share_path / new).unlink(missing_ok=True)
    rep = env.sync()
    assert rep.outcome == "ok" and env.conn.list_items().unreachable == () and indexed_docs(rt) == before, rep


def test_indexed_subtree_that_becomes_a_dead_dfs_link_stays_indexed(env: Env, tmp_path: Path) -> None:
    rt, dc = env.rt, env.dc
    doc = "DFS-SOUS/sous.md"
    moved = tmp_path / "DFS-SOUS"
    admins = env.p("Administrator")  # the share root's ACL: BUILTIN\Administrators only
    link: Path | None = None
    try:
        dc.smbclient('mkdir "DFS-SOUS"')
        dc.smbclient(f'put "{CORPUS / "share" / "DOCUMENTATION" / "09-pipeline-llm.md"}" "{doc}"')
        rep = env.sync()
        assert rep.outcome == "ok" and rep.new == 1, rep
        acl_before = next(p.payload.acl_allow for p in rt.store.scroll("documents") if p.payload.path == doc)
        assert doc in visible(rt, admins)
        # the folder becomes a DFS link (inside the share) whose target is missing
        shutil.move(dc.share_path / "DFS-SOUS", moved)
        link = dfs_link(dc, "DFS-SOUS", DEAD_DFS_TARGET)
        rep = env.sync()
        assert rep.outcome == "partial" and rep.deleted == 0 and "DFS-SOUS" in (rep.reason or ""), rep
        assert doc in indexed_docs(rt) and doc in visible(rt, admins)
        assert next(p.payload.acl_allow for p in rt.store.scroll("documents") if p.payload.path == doc) == acl_before
        assert any(st.path == doc for st in rt.state.items("partage").values())
    finally:
        if link is not None:
            link.unlink()
        shutil.rmtree(dc.share_path / "DFS-SOUS", ignore_errors=True)
    # the link gone for good: the next pass purges what was under it
    rep = env.sync()
    assert rep.outcome == "ok" and rep.deleted == 1 and doc not in indexed_docs(rt), rep


# ---------------------------------------------------------------- Kerberos
KRB5_CONF = """[libdefaults]
	default_realm = {realm}
	dns_lookup_kdc = false
	dns_lookup_realm = false
	dns_canonicalize_hostname = false
	rdns = false
[realms]
	{realm} = {{
		kdc = {host}:88
	}}
"""


def test_kerberos_ticket_from_the_dc_kdc_lists_and_reads_the_share(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        import gssapi
        import gssapi.raw
        import krb5  # pyspnego's Kerberos provider needs it
    except ImportError as e:
        msg = (
            f"Kerberos over SMB needs the gssapi and krb5 packages ({e}): apt install libkrb5-dev gcc, "
            "then pip install -e '.[kerberos]' (.ci/install-samba.sh does both)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    dc = env.dc
    # the KDC of the fixture's DC, no DNS: the service ticket is for cifs/127.0.0.1 as written
    (tmp_path / "krb5.conf").write_text(KRB5_CONF.format(realm=dc.realm, host=dc.host))
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")
    cfg = env.rt.settings.sources[0].model_copy(
        update={"auth": "kerberos", "username": None, "password": None}
    )
    # the DC answers as DC1 / dc1.axonix.test, which don't resolve here (no DNS, /etc/hosts left
    # alone): give its account the SPN of the address the source uses (an IP SPN, as on Windows)
    spn = ["samba-tool", "spn", "{}", f"cifs/{dc.host}", "DC1$", "-s", str(dc.smb_conf)]
    subprocess.run([a.format("add") for a in spn], check=True, capture_output=True)
    try:
        # no ticket: no access (and no silent fallback to another mechanism)
        conn = SmbConnector(cfg, directory=None, ignore=env.rt.settings.ignore)
        with pytest.raises(SourceUnavailableError, match="authentication"):
            list(conn.list_items())
        conn.close()

        user = gssapi.Name(f"{dc.admin_user}@{dc.realm}", gssapi.NameType.user)
        creds = gssapi.raw.acquire_cred_with_password(user, dc.admin_password.encode(), usage="initiate").creds
        gssapi.raw.store_cred_into({"ccache": os.environ["KRB5CCNAME"]}, creds, usage="initiate", overwrite=True)

        conn = SmbConnector(cfg, directory=None, ignore=env.rt.settings.ignore)
        try:
            items = {it.path: it for it in conn.list_items()}
            assert set(items) == indexed_docs(env.rt) and len(items) == N_FILES
            assert conn.fetch_content(items[DENY_FILE]) == (CORPUS / "share" / DENY_FILE).read_bytes()
            assert conn.fetch_acl(items[DENY_FILE]) == env.conn.fetch_acl(env.conn.get_item(DENY_FILE))  # type: ignore[arg-type]
        finally:
            conn.close()
        # the session was Kerberos: the cache now holds the service ticket for cifs/127.0.0.1
        ccache = krb5.cc_resolve(krb5.init_context(), os.environ["KRB5CCNAME"].encode())
        services = {b"/".join(c.server.components) for c in ccache}
        assert f"cifs/{dc.host}".encode() in services, services
    finally:
        subprocess.run([a.format("delete") for a in spn], check=True, capture_output=True)


# ---------------------------------------------------------------- links on the server
def test_server_side_links_never_widen_rights(env: Env, tmp_path: Path) -> None:
    """Unix links on the Samba share: a reparse point (symlink, junction) is reported, never
    read; a link Samba resolves itself (``follow symlinks``, ``wide links = no``) is read with
    the *target's* descriptor; a link leading outside the share is never read."""
    dc = env.dc
    outside = tmp_path / "dehors"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret hors du partage", encoding="utf-8")
    links = {
        "LIEN-FICHIER.docx": dc.share_path / "RH" / "Grille_Salariale_2026.docx",
        "LIEN-DOSSIER": dc.share_path / "RH",
        "LIEN-DEHORS.txt": outside / "secret.txt",
        "LIEN-DEHORS-DOSSIER": outside,
    }
    for name, target in links.items():
        (dc.share_path / name).symlink_to(target)
    try:
        items = {it.path: it for it in env.conn.list_items()}
        seen = {p: it.skip for p, it in items.items() if p.startswith("LIEN")}
        logging.getLogger(__name__).warning("what Samba returns for unix links: %s", seen)
        for p, it in items.items():
            if not p.startswith("LIEN"):
                continue
            if it.skip is not None:
                assert it.skip in ("symlink", "junction"), it
                continue
            assert not p.startswith("LIEN-DEHORS"), f"{p}: a link outside the share was listed as a file"
            target = p.replace("LIEN-FICHIER.docx", "RH/Grille_Salariale_2026.docx").replace("LIEN-DOSSIER", "RH")
            assert env.conn.fetch_acl(it) == env.conn.fetch_acl(items[target]), p
    finally:
        for name in links:
            (dc.share_path / name).unlink()
