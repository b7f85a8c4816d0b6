"""The real Samba AD DC fixture serves what the SMB and LDAP connectors need, with the corpus ACLs.

Proves, with the client libraries the connectors use (ldap3, smbprotocol), that the fixture's domain
has the corpus users and nested groups, that the share holds the corpus tree, and that the NT
security descriptors read over SMB2 QUERY_INFO carry acl.json (inheritance, protection, the
explicit deny), and that Samba itself enforces them.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import ldap3
import pytest
import smbclient
from ldap3.protocol.formatters.formatters import format_sid
from smbprotocol.exceptions import SMBException, SMBOSError
from smbprotocol.security_descriptor import AceFlags, AceType, SDControl, SMB2CreateSDBuffer
from support.samba import (
    CORPUS,
    RIGHTS,
    SambaDC,
    process_alive,
    read_sd_raw,
    samba_dc,  # noqa: F401 - the session fixture
)

FILE_READ_DATA = 0x1
DENY_FILE = "CLIENTS/test-deny-explicite.docx"


def _unc(dc: SambaDC, rel: str) -> str:
    return dc.unc_root + ("\\" + rel.replace("/", "\\") if rel else "")


def _dacl(raw: bytes) -> tuple[int, list[tuple[int, int, int, str]]]:
    """(SD control, [(ace type, ace flags, mask, sid)]) of a self-relative security descriptor."""
    sd = SMB2CreateSDBuffer()
    sd.unpack(raw)
    dacl = sd.get_dacl()
    assert dacl is not None, "no DACL in the descriptor"
    aces = []
    for ace in dacl["aces"].get_value():
        assert not isinstance(ace, bytes), f"unexpected ACE type {ace[0]:#x}"
        aces.append(
            (
                ace["ace_type"].get_value(),
                ace["ace_flags"].get_value(),
                ace["mask"].get_value(),
                str(ace["sid"].get_value()),
            )
        )
    return sd["control"].get_value(), aces


def _sd(dc: SambaDC, rel: str) -> tuple[int, list[tuple[int, int, int, str]]]:
    return _dacl(read_sd_raw(_unc(dc, rel), username=dc.admin_principal, password=dc.admin_password))


def _token_groups(conn: ldap3.Connection, dn: str) -> set[str]:
    assert conn.search(dn, "(objectClass=*)", search_scope=ldap3.BASE, attributes=["tokenGroups"])
    return {format_sid(raw) for raw in conn.response[0]["raw_attributes"]["tokenGroups"]}


@pytest.fixture()
def admin_ldap(samba_dc: SambaDC) -> Iterator[ldap3.Connection]:
    conn = samba_dc.ldap_connection()
    yield conn
    conn.unbind()


@pytest.fixture()
def smb_cache() -> Iterator[dict]:
    """A private smbclient connection cache (one per test), closed afterwards."""
    cache: dict = {}
    yield cache
    smbclient.reset_connection_cache(fail_on_error=False, connection_cache=cache)


def test_ldap_simple_bind_finds_chloe_and_her_nested_groups(samba_dc: SambaDC, admin_ldap) -> None:
    conn = admin_ldap
    assert conn.search(samba_dc.base_dn, "(sAMAccountName=chloe)", attributes=["userPrincipalName", "mail"])
    (entry,) = [e for e in conn.response if e["type"] == "searchResEntry"]
    assert entry["attributes"]["userPrincipalName"] == "chloe.rey@axonix.ch"
    assert conn.search(samba_dc.base_dn, "(userPrincipalName=chloe.rey@axonix.ch)", attributes=["cn"])
    assert [e["dn"] for e in conn.response if e["type"] == "searchResEntry"] == [entry["dn"]]

    groups = _token_groups(conn, entry["dn"])
    sid = samba_dc.sid_of
    assert {sid("GG_Techniciens"), sid("GG_Stagiaires"), sid("GG_Personnel"), sid("Domain Users")} <= groups
    assert sid("GG_Direction") not in groups and sid("GG_RH") not in groups
    assert all(s.startswith((samba_dc.domain_sid + "-", "S-1-5-32-")) for s in groups)

    # every corpus user can bind with the fixture's password
    server = ldap3.Server(samba_dc.host, port=samba_dc.ldap_port)
    user = ldap3.Connection(server, user=entry["dn"], password=samba_dc.user_password)
    assert user.bind(), user.result
    user.unbind()


def test_ldaps_and_starttls_verify_the_fixture_ca(samba_dc: SambaDC) -> None:
    conn = samba_dc.ldap_connection(tls=True)
    assert conn.bound and conn.server.ssl
    assert conn.search(samba_dc.user_dn("chloe"), "(objectClass=user)", search_scope=ldap3.BASE)
    conn.unbind()

    tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=str(samba_dc.tls_ca_file))
    server = ldap3.Server(samba_dc.host, port=samba_dc.ldap_port, tls=tls)
    conn = ldap3.Connection(server, user=samba_dc.admin_bind_dn, password=samba_dc.admin_password)
    conn.open()
    assert conn.start_tls()
    assert conn.bind(), conn.result
    conn.unbind()

    # and a client that does not trust that CA is refused
    untrusted = ldap3.Server(
        samba_dc.host, port=samba_dc.ldaps_port, use_ssl=True, tls=ldap3.Tls(validate=ssl.CERT_REQUIRED)
    )
    with pytest.raises(ldap3.core.exceptions.LDAPSocketOpenError):
        ldap3.Connection(untrusted, auto_bind=True)


def test_group_membership_changes_show_in_token_groups(samba_dc: SambaDC, admin_ldap) -> None:
    dn = samba_dc.user_dn("chloe")
    stagiaires = samba_dc.sid_of("GG_Stagiaires")
    assert stagiaires in _token_groups(admin_ldap, dn)
    samba_dc.remove_from_group("chloe", "GG_Stagiaires")
    try:
        groups = _token_groups(admin_ldap, dn)
        assert stagiaires not in groups
        assert samba_dc.sid_of("GG_Personnel") in groups  # still nested through GG_Techniciens
    finally:
        samba_dc.add_to_group("chloe", "GG_Stagiaires")
    assert stagiaires in _token_groups(admin_ldap, dn)


def test_smbclient_walks_the_share_and_reads_a_file(samba_dc: SambaDC, smb_cache) -> None:
    auth = {"username": samba_dc.admin_principal, "password": samba_dc.admin_password}
    seen: set[str] = set()
    for top, _dirs, files in smbclient.walk(samba_dc.unc_root, connection_cache=smb_cache, **auth):
        rel_top = top[len(samba_dc.unc_root) :].strip("\\").replace("\\", "/")
        seen.update(f"{rel_top}/{name}".lstrip("/") for name in files)
    src = CORPUS / "share"
    expected = {p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()}
    assert seen == expected

    rel = "DOCUMENTATION/09-pipeline-llm.md"
    with smbclient.open_file(_unc(samba_dc, rel), mode="rb", connection_cache=smb_cache, **auth) as fh:
        assert fh.read() == (src / rel).read_bytes()
    assert (samba_dc.share_path / rel).read_bytes() == (src / rel).read_bytes()


def test_security_descriptor_of_the_deny_file(samba_dc: SambaDC) -> None:
    raw = read_sd_raw(
        _unc(samba_dc, DENY_FILE), username=samba_dc.admin_principal, password=samba_dc.admin_password
    )
    sd = SMB2CreateSDBuffer()
    sd.unpack(raw)
    assert sd.get_owner() is not None and sd.get_group() is not None
    control, aces = _dacl(raw)
    assert control & SDControl.DACL_PRESENT and control & SDControl.SELF_RELATIVE
    assert not control & SDControl.DACL_PROTECTED

    sid = samba_dc.sid_of
    deny = [a for a in aces if a[0] == AceType.ACCESS_DENIED_ACE_TYPE]
    assert [(a[3], a[1] & AceFlags.INHERITED_ACE) for a in deny] == [(sid("GG_Stagiaires"), 0)]
    assert deny[0][2] & FILE_READ_DATA
    assert aces[0] == deny[0], "canonical order: the explicit deny comes first"

    inherited_allow = {
        a[3]: a[2] for a in aces if a[0] == AceType.ACCESS_ALLOWED_ACE_TYPE and a[1] & AceFlags.INHERITED_ACE
    }
    assert inherited_allow == {
        sid("GG_Direction"): RIGHTS["READ"],
        sid("GG_Techniciens"): RIGHTS["READ"],
        sid("Administrators"): RIGHTS["FULL"],
    }
    # a file carries no inheritance flags, only INHERITED
    assert all(a[1] & (AceFlags.OBJECT_INHERIT_ACE | AceFlags.CONTAINER_INHERIT_ACE) == 0 for a in aces)


def test_protected_folder_drops_the_parent_aces(samba_dc: SambaDC) -> None:
    sid = samba_dc.sid_of
    control, aces = _sd(samba_dc, "RH")
    assert control & SDControl.DACL_PROTECTED
    assert {a[3] for a in aces} == {sid("Administrators"), sid("GG_RH")}

    control, aces = _sd(samba_dc, "RH/Grille_Salariale_2026.docx")
    assert not control & SDControl.DACL_PROTECTED
    assert sid("GG_Direction") not in {a[3] for a in aces}
    assert {a[3] for a in aces if a[1] & AceFlags.INHERITED_ACE} == {sid("Administrators"), sid("GG_RH")}

    # a sibling folder that inherits: the root's Administrators ACE arrives INHERITED, with OI|CI
    control, aces = _sd(samba_dc, "DIRECTION")
    assert not control & SDControl.DACL_PROTECTED and control & SDControl.DACL_AUTO_INHERITED
    oici = AceFlags.OBJECT_INHERIT_ACE | AceFlags.CONTAINER_INHERIT_ACE
    allow = AceType.ACCESS_ALLOWED_ACE_TYPE
    assert (allow, oici | AceFlags.INHERITED_ACE, RIGHTS["FULL"], sid("Administrators")) in aces
    assert (allow, oici, RIGHTS["READ"], sid("GG_Direction")) in aces


def test_samba_enforces_the_deny_for_chloe_only(samba_dc: SambaDC, smb_cache) -> None:
    path = _unc(samba_dc, DENY_FILE)
    expected = (CORPUS / "share" / DENY_FILE).read_bytes()
    bruno = {"username": "AXONIX\\bruno", "password": samba_dc.user_password, "connection_cache": smb_cache}
    with smbclient.open_file(path, "rb", **bruno) as fh:
        assert fh.read() == expected
    other_cache: dict = {}
    chloe = {"username": "AXONIX\\chloe", "password": samba_dc.user_password, "connection_cache": other_cache}
    try:
        with pytest.raises(SMBOSError) as denied:
            smbclient.open_file(path, "rb", **chloe)
        assert "STATUS_ACCESS_DENIED" in str(denied.value)
        # but she reads the sibling that has no deny
        sibling = _unc(samba_dc, "CLIENTS/21_Contrat_Maintenance_Baumont_Industries.docx")
        with smbclient.open_file(sibling, "rb", **chloe) as fh:
            assert fh.read(4) == b"PK\x03\x04"
    finally:
        smbclient.reset_connection_cache(fail_on_error=False, connection_cache=other_cache)


def test_smbcacls_propagates_a_folder_change_to_its_files(samba_dc: SambaDC) -> None:
    sid = samba_dc.sid_of("GG_Commercial")
    ace = f"ACL:{sid}:ALLOWED/OI|CI/READ"
    files = ["DOCUMENTATION/09-pipeline-llm.md", "DOCUMENTATION/Politique_Securite_SI.pdf"]
    assert all(sid not in {a[3] for a in _sd(samba_dc, f)[1]} for f in files)
    samba_dc.smbcacls("DOCUMENTATION", "--add", ace, "--propagate-inheritance")
    try:
        for f in files:
            inherited = (AceType.ACCESS_ALLOWED_ACE_TYPE, AceFlags.INHERITED_ACE, RIGHTS["READ"], sid)
            assert inherited in _sd(samba_dc, f)[1]
    finally:
        samba_dc.smbcacls("DOCUMENTATION", "--delete", ace, "--propagate-inheritance")
    assert all(sid not in {a[3] for a in _sd(samba_dc, f)[1]} for f in files)


def test_stop_and_start_smbd_keeps_ldap_up(samba_dc: SambaDC, smb_cache) -> None:
    auth = {"username": samba_dc.admin_principal, "password": samba_dc.admin_password}
    assert smbclient.listdir(samba_dc.unc_root, connection_cache=smb_cache, **auth)
    samba_dc.stop_smbd()
    try:
        assert not samba_dc.smbd_running
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((samba_dc.host, samba_dc.smb_port), timeout=2).close()
        # the pooled session is dead; smbprotocol reports the refused reconnection as ValueError
        with pytest.raises((SMBException, OSError, ValueError)):
            smbclient.listdir(samba_dc.unc_root, connection_cache=smb_cache, **auth)
        conn = samba_dc.ldap_connection()  # the directory is still there
        conn.unbind()
    finally:
        samba_dc.start_smbd()
    smbclient.reset_connection_cache(fail_on_error=False, connection_cache=smb_cache)
    assert sorted(smbclient.listdir(samba_dc.unc_root, connection_cache=smb_cache, **auth)) == sorted(
        p.name for p in (CORPUS / "share").iterdir()
    )


def test_share_path_holds_the_nt_acls_in_xattrs(samba_dc: SambaDC) -> None:
    local = samba_dc.share_path / DENY_FILE
    assert local.read_bytes() == (CORPUS / "share" / DENY_FILE).read_bytes()
    assert len(os.getxattr(local, "security.NTACL")) > 0  # acl_xattr's store


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _naming(root: Path) -> list[int]:
    """The live processes whose command line names a file under ``root``."""
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and f"{root}/" in _cmdline(int(p.name)) and process_alive(int(p.name))]


def test_closing_the_dc_leaves_no_process_behind(samba_dc: SambaDC) -> None:
    """Issue 46: after ``make test`` samba-dcerpcd and its rpcd_classic workers of the test DC were
    still running, orphaned: smbd starts samba-dcerpcd, which leaves smbd's session and process
    group, so killing those groups missed it. The session's DC is made to start them with the RPC
    calls a source check makes (SRVSVC, SAMR, LSA), then closed as the session's end closes it:
    none of its processes is left, and no process names its folder. It is then started again for
    the tests that follow (a new domain: new SIDs, read again by every test)."""
    from pydantic import SecretStr

    from ancre.connectors.smb import SmbConnector, SmbSourceConfig
    from ancre.connectors.smb import rights as smb_rights

    dc = samba_dc
    cfg = SmbSourceConfig(id="s", kind="smb", server=dc.host, port=dc.smb_port, share=dc.share,
                          username=dc.admin_principal, password=SecretStr(dc.admin_password))
    conn = SmbConnector(cfg, directory=None, ignore=())
    try:
        assert conn.check().ok
    finally:
        conn.close()
    started = dc.processes()
    names = " | ".join(_cmdline(p) for p in started)
    assert "samba-dcerpcd" in names and "rpcd_" in names, names
    foreign = set(_naming(dc.root)) - set(started)  # another run's orphans (an older fixture's): not ours
    dc.close()
    try:
        left = [(p, _cmdline(p)) for p in started if process_alive(p)]
        assert not left, left
        strays = [(p, _cmdline(p)) for p in _naming(dc.root) if p not in foreign]
        assert not strays, strays
        assert not dc.root.exists()
    finally:
        dc.start()
        with smb_rights._SERVER_LOCK:  # the new domain's SIDs: nothing cached from the old one
            smb_rights._SERVER_RIGHTS.clear()
