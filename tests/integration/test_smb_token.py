"""The read decision of the SMB source, point by point, each checked against a real open on the
Samba AD DC: the whole network-logon token (NETWORK, BUILTIN groups, undecidable SIDs), OWNER
RIGHTS, the ordered walk, share permissions read from the server or stated with ``share_allow``,
FILE_GENERIC_READ as the read right, and ``acl explain``'s effective headline. The member-server
case (local groups that are not the domain's) is configured (``local_groups``): the tests have no
member server."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.raw_smb import RawAce, RawTree, encode_sd
from support.samba import SCRATCH_SHARES, SambaDC, samba_dc  # noqa: F401 - the session fixture
from support.smb_config import PASSWORD_ENV, write_smb_config
from typer.testing import CliRunner

from ancre.acl.directory import CachedDirectory
from ancre.acl.engine import FILE_GENERIC_READ, acl_problem
from ancre.acl.explain import explain_trace
from ancre.acl.ldap_directory import LdapDirectory
from ancre.app.cli import app
from ancre.connectors.smb import SmbConnector, SmbSourceConfig
from ancre.models import Acl

READ, FULL, FILE_READ_EA, INHERITED = 0x1200A9, 0x1F01FF, 0x8, 0x10
SHARE, CLOSED = SCRATCH_SHARES[0], SCRATCH_SHARES[2]  # default share permissions / restricted by a test


@dataclass
class Points:
    dc: SambaDC
    directory: CachedDirectory

    def write(self, name: str, aces: list[RawAce], owner: str | None = None) -> str:
        """A file ``points/<name>`` with exactly ``aces`` (in this order) and ``owner``."""
        path = f"points/{name}"
        with RawTree(self.dc.host, SHARE, self.dc.admin_principal, self.dc.admin_password) as tree:
            tree.create(path, data=b"x")
            tree.set_security(path, encode_sd(owner or self.dc.sid_of("Administrator"), self.dc.sid_of("Domain Users"), aces))
        return path

    def server(self, user: str, path: str, share: str = SHARE) -> bool:
        """Whether the server lets ``user`` open ``path`` with FILE_GENERIC_READ."""
        try:
            tree = RawTree(self.dc.host, share, f"{self.dc.domain}\\{user}", self.dc.user_password)
        except Exception as e:  # noqa: BLE001 - refused at tree connect: the share grants nothing
            assert "0xc0000022" in str(e).lower() or "ACCESS_DENIED" in str(e), e
            return False
        with tree:
            return tree.can_open(path, FILE_GENERIC_READ)

    def connector(self, share: str = SHARE, **extra: object) -> SmbConnector:
        cfg = SmbSourceConfig(id="points", kind="smb", server=self.dc.host, share=share,
                              username=self.dc.admin_principal, password=self.dc.admin_password, **extra)  # type: ignore[arg-type]
        return SmbConnector(cfg, directory=self.directory, ignore=())

    def acl(self, path: str, share: str = SHARE, **extra: object) -> Acl:
        conn = self.connector(share, **extra)
        try:
            item = conn.get_item(path)
            assert item is not None
            return conn.fetch_acl(item)
        finally:
            conn.close()

    def ancre(self, user: str, path: str, share: str = SHARE, **extra: object) -> bool:
        return self.acl(path, share, **extra).readable_by(self.directory.principals(user))


@pytest.fixture(scope="module")
def points(samba_dc: SambaDC) -> Iterator[Points]:
    dc = samba_dc
    (dc.scratch_path / "points").mkdir(parents=True, exist_ok=True)
    os.chmod(dc.scratch_path / "points", 0o755)
    ldap = LdapDirectory([f"ldap://{dc.host}:{dc.ldap_port}"], dc.base_dn, bind_dn=dc.admin_bind_dn,
                         bind_password=dc.admin_password, tls="none")
    yield Points(dc, CachedDirectory(ldap, 600))
    shutil.rmtree(dc.scratch_path / "points", ignore_errors=True)


def both(points: Points, user: str, path: str, **kw: object) -> bool:
    """ancre's decision, asserted equal to the server's."""
    share = str(kw.pop("share", SHARE))
    server, ancre = points.server(user, path, share), points.ancre(user, path, share, **kw)
    assert ancre == server, (user, path, "ancre", ancre, "server", server)
    return ancre


# --- 1. the whole token ---------------------------------------------------------------------------------
def test_a_deny_for_network_is_honoured(points: Points) -> None:
    path = points.write("network.txt", [(1, "S-1-5-2", READ, 0), (0, "S-1-1-0", READ, 0)])
    assert not both(points, "bruno", path)


def test_an_allow_for_builtin_users_grants_domain_users(points: Points) -> None:
    """BUILTIN\\Users (a local group of the server, holding Domain Users and Authenticated Users):
    Windows' default folder ACL grants it read."""
    path = points.write("users.txt", [(0, "S-1-5-32-545", READ, 0)])
    assert both(points, "bruno", path) and both(points, "chloe", path)
    path = points.write("pre2000.txt", [(1, "S-1-5-32-554", READ, 0), (0, "S-1-1-0", READ, 0)])
    assert not both(points, "bruno", path)  # Pre-Windows 2000 Compatible Access holds Authenticated Users


def test_a_deny_for_an_undecidable_sid_closes_the_document_with_its_reason(points: Points) -> None:
    """NTLM Authentication is in the token only when the user logs on with NTLM: ancre can't
    know, so its deny closes the document (the server refuses this NTLM session) and says why."""
    path = points.write("ntlm.txt", [(0, points.dc.sid_of("bruno"), READ, 0), (1, "S-1-5-64-10", READ, 0),
                                     (0, "S-1-1-0", READ, 0)])
    assert both(points, "bruno", path)  # the allow before the deny
    assert not both(points, "chloe", path)
    acl = points.acl(path)
    assert (acl_problem(acl) or "").startswith("undecidable token SID: DENY ACE 2 for NTLM Authentication (S-1-5-64-10)")
    conn = points.connector()
    try:
        ex = explain_trace(conn.explain_acl(path), "chloe", directory=points.directory)
    finally:
        conn.close()
    assert not ex.readable and any("NTLM Authentication" in n for n in ex.notes)
    assert "note: ALLOW" in ex.render() or "note: DENY" in ex.render()


def test_ancre_status_lists_the_document_an_undecidable_deny_closes(points: Points, tmp_path: Path) -> None:
    """The reason reaches the admin: ``ancre sync`` counts the document, ``ancre status`` (text and
    ``--json``) lists it with the token SID that could not be decided."""
    dc = points.dc
    path = points.write("status-ntlm.txt", [(1, "S-1-5-64-10", READ, 0), (0, "S-1-1-0", READ, 0)])
    os.environ[PASSWORD_ENV] = dc.admin_password
    try:
        cfg = write_smb_config(tmp_path, dc, extra=f'include = ["{path}"]\n')
        cfg.write_text(cfg.read_text().replace(f'share = "{dc.share}"', f'share = "{SHARE}"'))
        runner = CliRunner()
        res = runner.invoke(app, ["sync", "--json", "--config", str(cfg)])
        assert res.exit_code == 0, res.output
        (rep,) = json.loads(res.stdout)
        assert rep["new"] == 1 and rep["acl_unreadable"] == 1, rep
        ((where, kind, reason),) = rep["problems"]
        assert (where, kind) == (path, "acl_unreadable") and "NTLM Authentication (S-1-5-64-10)" in reason
        data = json.loads(runner.invoke(app, ["status", "--json", "--config", str(cfg)]).stdout)
        (problem,) = data["problems"]
        assert problem["path"] == path and problem["reason"].startswith("undecidable token SID: DENY ACE 1 for NTLM")
        text = " ".join(runner.invoke(app, ["status", "--config", str(cfg)]).output.split())
        assert f"partage:{path}" in text and "undecidable token SID" in text, text
    finally:
        os.environ.pop(PASSWORD_ENV, None)


def test_a_local_group_of_a_member_server_is_configured_and_its_deny_never_lost(points: Points) -> None:
    """A member server's own group (its machine SID, unknown to the domain), stated with
    ``local_groups``; without it, its deny closes the document instead of being ignored. (The
    server here is a DC, which has no such group: this is checked against the configuration.)"""
    local = "S-1-5-21-9-9-9-1001"
    path = points.write("local.txt", [(1, local, READ, 0), (0, "S-1-1-0", READ, 0)])
    stated = {"read_local_groups": False, "server_sid": "S-1-5-21-9-9-9", "local_groups": {local: ("GG_Stagiaires",)}}
    assert not points.ancre("chloe", path, **stated)  # a stagiaire: in the server's local group
    assert points.ancre("bruno", path, **stated)
    unknown = points.acl(path, read_local_groups=False)
    assert not unknown.readable_by(points.directory.principals("bruno")) and acl_problem(unknown)
    assert "may be one of its local groups" in (unknown.reason or "")


# --- 2. OWNER RIGHTS --------------------------------------------------------------------------------------
def test_owner_rights_applies_to_the_owner(points: Points) -> None:
    bruno = points.dc.sid_of("bruno")
    path = points.write("owner-deny.txt", [(1, "S-1-3-4", READ, 0), (0, "S-1-1-0", READ, 0)], owner=bruno)
    assert not both(points, "bruno", path) and both(points, "chloe", path)
    path = points.write("owner-allow.txt", [(0, "S-1-3-4", READ, 0)], owner=points.dc.sid_of("GG_Techniciens"))
    assert both(points, "bruno", path) and not both(points, "david", path)  # a group owner


# --- 3. the ordered walk ----------------------------------------------------------------------------------
def test_an_explicit_allow_before_an_inherited_deny_grants(points: Points) -> None:
    dc = points.dc
    path = points.write("canonical.txt", [(0, dc.sid_of("bruno"), READ, 0),
                                          (1, dc.sid_of("GG_Techniciens"), READ, INHERITED),
                                          (0, dc.sid_of("GG_Personnel"), READ, INHERITED)])
    assert both(points, "bruno", path)
    assert not both(points, "chloe", path)  # GG_Techniciens, denied before GG_Personnel's allow
    assert both(points, "alice", path)


# --- 4. share permissions -----------------------------------------------------------------------------------
def test_share_allow_domain_users_admits_users_of_their_primary_group(points: Points) -> None:
    """Every corpus user is in Domain Users through primaryGroupID alone (no member link)."""
    path = points.write("share-du.txt", [(0, points.dc.sid_of("GG_Techniciens"), READ, 0)])
    assert points.ancre("bruno", path, share_allow=("Domain Users",))
    assert not points.ancre("bruno", path, share_allow=("GG_Direction",))
    assert not points.ancre("alice", path, share_allow=("Domain Users",))  # NTFS refuses her


def test_the_share_permissions_are_read_from_the_server(points: Points) -> None:
    dc = points.dc
    path = points.write("share-server.txt", [(0, "S-1-1-0", READ, 0)])
    sddl = f"D:(A;;0x001f01ff;;;{dc.sid_of('Administrator')})(D;;0x001f01ff;;;{dc.sid_of('GG_Stagiaires')})(A;;0x001200a9;;;AU)"
    dc.sharesec(CLOSED, "--setsddl", sddl)
    try:
        assert both(points, "bruno", path, share=CLOSED)
        assert not both(points, "chloe", path, share=CLOSED)  # a stagiaire: the share denies her
        conn = points.connector(CLOSED)
        try:
            description, sd, problem, _ = conn.share_layer()
            assert problem is None and sd is not None and "NetShareGetInfo" in description
        finally:
            conn.close()
    finally:
        dc.sharesec(CLOSED, "--delete")


# --- 5. which right is read -------------------------------------------------------------------------------
def test_read_is_file_generic_read(points: Points) -> None:
    """Denied FILE_READ_EA only: the data could be read, the document can't be opened as Word does."""
    path = points.write("ea.txt", [(1, points.dc.sid_of("bruno"), FILE_READ_EA, 0), (0, "S-1-1-0", READ, 0)])
    assert not both(points, "bruno", path) and both(points, "chloe", path)


# --- 6. acl explain's headline -----------------------------------------------------------------------------
def test_acl_explain_headlines_the_effective_result_and_names_the_token_sid(points: Points, tmp_path: Path) -> None:
    dc = points.dc
    path = points.write("explain.txt", [(1, "S-1-5-2", FILE_READ_EA, 0), (0, "S-1-5-32-545", READ, 0)])
    os.environ[PASSWORD_ENV] = dc.admin_password
    try:
        cfg = write_smb_config(tmp_path, dc)
        text = cfg.read_text().replace(f'share = "{dc.share}"', f'share = "{SHARE}"')
        cfg.write_text(text)
        runner = CliRunner()
        res = runner.invoke(app, ["acl", "explain", "--as", "bruno", path, "--config", str(cfg)])
        out = res.output
        assert res.exit_code == 0, out
        assert "result: NOT READABLE" in out and "denied by explicit DENY ACE" in out and "NETWORK (S-1-5-2)" in out
        assert "in bruno's token: NETWORK: in every network logon" in out
        assert not points.server("bruno", path)
        path2 = points.write("explain2.txt", [(0, "S-1-5-32-545", READ, 0)])
        sddl = f"D:(A;;0x001f01ff;;;{dc.sid_of('Administrator')})(D;;0x001f01ff;;;{dc.sid_of('GG_Techniciens')})(A;;0x001f01ff;;;WD)"
        dc.sharesec(CLOSED, "--setsddl", sddl)
        try:
            cfg.write_text(text.replace(f'share = "{SHARE}"', f'share = "{CLOSED}"'))
            res = runner.invoke(app, ["acl", "explain", "--as", "bruno", path2, "--config", str(cfg)])
            out = res.output
            assert res.exit_code == 0, out
            lines = out.splitlines()
            assert lines[2] == "result: NOT READABLE", out  # the share refuses: the effective result
            assert "file permissions (NTFS): READABLE" in out and "effective result (file ∩ share): NOT READABLE" in out
            assert "BUILTIN\\Users (S-1-5-32-545)" in out  # the NTFS allow bruno holds through it
            assert not points.server("bruno", path2, CLOSED)
        finally:
            dc.sharesec(CLOSED, "--delete")
    finally:
        os.environ.pop(PASSWORD_ENV, None)
