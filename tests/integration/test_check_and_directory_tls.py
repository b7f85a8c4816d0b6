"""A first hour with a real domain controller, on the Samba AD DC fixture:

- descriptors written by ``smbcacls --set``, ``--sddl --set`` and ``--add`` (ACL revision 3
  included) read back through the connector's reader and parsed;
- a document whose ACL the engine can't use is counted by ``ancre sync`` and listed by
  ``ancre status``;
- the directory reached as ``localhost`` (the certificate names 127.0.0.1 and dc1.axonix.test):
  refused with one line naming the certificate's names and ``tls_server_name``, accepted with it;
- ``ancre check`` passes on the fixture config and fails with a clear line for a wrong password,
  a wrong TLS name and an unknown user; ``ancre sync`` stops on a broken directory;
- smbprotocol's per-request INFO lines stay out of the logs unless ``[logging]`` asks for them.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.httpserver import ScriptedServer
from support.samba import SambaDC, read_sd_raw, samba_dc  # noqa: F401 - the session fixture
from support.scripted_ollama import ANSWER_MODEL, JUDGE_MODEL, chats, script
from typer.testing import CliRunner

from ancre.acl.ldap_directory import LdapDirectory
from ancre.acl.sd_parse import acl_from_descriptor
from ancre.app.cli import app
from ancre.config import load_settings
from ancre.connectors.smb import SmbConnector
from ancre.daemon.logs import setup_logging
from ancre.errors import DirectoryError

PASSWORD_ENV = "ANCRE_TEST_CHECK_PASSWORD"
FOLDER = "ANCRE-CHECK"
DC_NAME = "dc1.axonix.test"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def write_config(dest: Path, dc: SambaDC, ollama: str, *, tls_server_name: str | None = DC_NAME, extra: str = "") -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    cfg = dest / "ancre.toml"
    name = f'tls_server_name = "{tls_server_name}"' if tls_server_name else ""
    cfg.write_text(
        f'''data_dir = "data"
[embedder]
kind = "e5-local"
[directory]
kind = "ldap"
url = "ldaps://localhost:{dc.ldaps_port}"
{name}
base_dn = "{dc.base_dn}"
bind_dn = "{dc.admin_bind_dn}"
bind_password_env = "{PASSWORD_ENV}"
ca_file = "{dc.tls_ca_file}"
cache_ttl_s = 0
[llm]
kind = "ollama"
url = "{ollama}"
model = "{ANSWER_MODEL}"
[judge]
enabled = true
model = "{JUDGE_MODEL}"
[[sources]]
id = "partage"
kind = "smb"
server = "{dc.host}"
share = "{dc.share}"
username = '{dc.admin_principal}'
password_env = "{PASSWORD_ENV}"
include = ["{FOLDER}/*"]
{extra}''',
        encoding="utf-8",
    )
    return cfg


@pytest.fixture(scope="module")
def dc(samba_dc: SambaDC) -> Iterator[SambaDC]:
    """The DC with a folder of two small text files, removed afterwards."""
    os.environ[PASSWORD_ENV] = samba_dc.admin_password
    src = samba_dc.root / "check-src"
    src.mkdir(exist_ok=True)
    (src / "a.txt").write_text("Le code du portail est 4711.\n", encoding="utf-8")
    (src / "b.txt").write_text("La salle de réunion est au deuxième étage.\n", encoding="utf-8")
    samba_dc.smbclient(f'mkdir "{FOLDER}"', f'put "{src / "a.txt"}" "{FOLDER}/a.txt"', f'put "{src / "b.txt"}" "{FOLDER}/b.txt"')
    yield samba_dc
    samba_dc.smbclient(f'rm "{FOLDER}/*"', f'rmdir "{FOLDER}"')
    os.environ.pop(PASSWORD_ENV, None)


@pytest.fixture(scope="module")
def ollama() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        script(srv, "OK", judge='{"ancree": true, "affirmations_non_sourcees": []}')
        yield srv


def _unc(dc: SambaDC, rel: str) -> str:
    return dc.unc_root + "\\" + rel.replace("/", "\\")


def _raw(dc: SambaDC, rel: str) -> bytes:
    return read_sd_raw(_unc(dc, rel), username=dc.admin_principal, password=dc.admin_password)


def _dacl_revision(raw: bytes) -> int:
    (off_dacl,) = struct.unpack_from("<I", raw, 16)
    return raw[off_dacl]


# ---------------------------------------------------------------- descriptors written by smbcacls
def test_descriptors_written_by_smbcacls_are_parsed(dc: SambaDC) -> None:
    rel = f"{FOLDER}/a.txt"
    rh, direction = dc.sid_of("GG_RH"), dc.sid_of("GG_Direction")
    revisions = {}
    try:
        for how, args in {
            "--set": ("--set", f"ACL:{rh}:ALLOWED/0/READ"),
            "--sddl --set": ("--sddl", "--set", f"D:(A;;0x001200a9;;;{rh})"),
            "--add": ("--add", f"ACL:{direction}:ALLOWED/0/READ"),
        }.items():
            dc.smbcacls(rel, *args)
            raw = _raw(dc, rel)
            revisions[how] = _dacl_revision(raw)
            acl = acl_from_descriptor(raw)
            assert acl.reason is None, (how, revisions[how], acl.reason)
            assert f"sid:{rh}" in acl.allow, how
            if how == "--add":
                assert f"sid:{direction}" in acl.allow
        assert 3 in revisions.values(), revisions  # revision 3, which the parser must accept
        assert set(revisions.values()) <= {2, 3, 4}, revisions

        # still closed on what is truly malformed
        raw = bytearray(_raw(dc, rel))
        (off_dacl,) = struct.unpack_from("<I", raw, 16)
        for bad in (bytes(raw[:off_dacl + 4]), bytes(raw[:off_dacl]) + b"\x01" + bytes(raw[off_dacl + 1 :]),
                    bytes(raw[:off_dacl]) + b"\x05" + bytes(raw[off_dacl + 1 :])):
            closed = acl_from_descriptor(bad)
            assert closed.allow == frozenset() and (closed.reason or "").startswith("acl_unreadable:"), closed
    finally:
        dc.smbcacls(rel, "--sddl", "--set", "D:(A;;0x001f01ff;;;S-1-5-32-544)(A;;0x001200a9;;;S-1-5-11)")


# ---------------------------------------------------------------- unreadable ACLs on Samba
def test_an_acl_the_engine_cannot_use_is_counted_and_listed(dc: SambaDC, ollama: ScriptedServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, dc, ollama.url)
    rel = f"{FOLDER}/b.txt"
    # an ACCESS_DENIED_OBJECT ACE (with an object type GUID): a deny the engine can't evaluate
    dc.smbcacls(rel, "--sddl", "--set",
                "D:(OD;;CR;00299570-246d-11d0-a768-00aa006e0529;;S-1-5-11)(A;;0x001200a9;;;S-1-5-11)")
    try:
        res = run("sync", "--json", "--config", str(cfg))
        assert res.exit_code == 0, res.output
        (rep,) = json.loads(res.stdout)
        assert rep["outcome"] == "ok" and rep["new"] == 2 and rep["acl_unreadable"] == 1, rep
        assert [p[:2] for p in rep["problems"]] == [[rel, "acl_unreadable"]]
        assert "ACCESS_DENIED_OBJECT" in rep["problems"][0][2]
        data = json.loads(run("status", "--json", "--config", str(cfg)).stdout)
        assert data["acl_unreadable"] == {"partage": 1}
        assert [(p["path"], p["problem"]) for p in data["problems"]] == [(rel, "acl_unreadable")]
        assert rel in run("status", "--config", str(cfg)).output
    finally:
        dc.smbcacls(rel, "--sddl", "--set", "D:(A;;0x001f01ff;;;S-1-5-32-544)(A;;0x001200a9;;;S-1-5-11)")


# ---------------------------------------------------------------- directory TLS
def test_dc_reached_by_another_name_needs_tls_server_name(dc: SambaDC) -> None:
    kw = {"bind_dn": dc.admin_bind_dn, "bind_password": dc.admin_password, "ca_file": str(dc.tls_ca_file)}
    for url in (f"ldaps://localhost:{dc.ldaps_port}", f"ldap://localhost:{dc.ldap_port}"):  # LDAPS and StartTLS
        d = LdapDirectory([url], dc.base_dn, **kw)
        with pytest.raises(DirectoryError) as err:
            d.principals("chloe")
        msg = str(err.value)
        assert "\n" not in msg and "{" not in msg, msg  # one line, no certificate dict
        assert "127.0.0.1" in msg and DC_NAME in msg and "'localhost'" in msg and "directory.tls_server_name" in msg
        assert LdapDirectory([url], dc.base_dn, tls_server_name=DC_NAME, **kw).principals("chloe")
    # a name the certificate does not hold is refused even when the URL's host would match
    d = LdapDirectory([f"ldaps://{dc.host}:{dc.ldaps_port}"], dc.base_dn, tls_server_name="wrong.axonix.test", **kw)
    with pytest.raises(DirectoryError, match=r"not 'wrong.axonix.test'"):
        d.principals("chloe")
    # an untrusted chain names ca_file
    d = LdapDirectory([f"ldaps://{dc.host}:{dc.ldaps_port}"], dc.base_dn, **{**kw, "ca_file": None})
    with pytest.raises(DirectoryError, match=r"not trusted .*directory.ca_file"):
        d.principals("chloe")


# ---------------------------------------------------------------- ancre check / sync
def test_check_passes_on_the_fixture(dc: SambaDC, ollama: ScriptedServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, dc, ollama.url)
    ollama.clear()
    res = run("check", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    lines = {ln.split()[1]: ln for ln in res.output.splitlines() if ln.startswith(("ok", "FAIL"))}
    assert set(lines) >= {"config", "directory", "source", "embedder", "store", "llm", "judge"}, res.output
    assert all(ln.startswith("ok") for ln in lines.values()), res.output
    assert "localhost" in lines["directory"] and "principals" in lines["directory"]
    assert "DACL read" in lines["source"]
    assert chats(ollama, ANSWER_MODEL) and chats(ollama, JUDGE_MODEL)
    res = run("check", "--as", "chloe", "--config", str(cfg))
    assert res.exit_code == 0 and "chloe resolves to" in res.output, res.output


@pytest.mark.parametrize("case", ["wrong-password", "wrong-tls-name", "unknown-user"])
def test_check_fails_with_a_clear_line(dc: SambaDC, ollama: ScriptedServer, tmp_path: Path, case: str) -> None:
    args: list[str] = []
    if case == "wrong-tls-name":
        cfg = write_config(tmp_path, dc, ollama.url, tls_server_name=None)
    else:
        cfg = write_config(tmp_path, dc, ollama.url)
    if case == "unknown-user":
        args = ["--as", "mallory"]
    env_before = os.environ[PASSWORD_ENV]
    if case == "wrong-password":
        os.environ[PASSWORD_ENV] = "not-the-password"
    try:
        res = run("check", *args, "--config", str(cfg))
    finally:
        os.environ[PASSWORD_ENV] = env_before
    assert res.exit_code == 1, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("FAIL")] if case != "wrong-password" else [
        ln for ln in res.output.splitlines() if ln.startswith("FAIL directory")
    ]
    assert line.startswith("FAIL directory"), res.output
    if case == "wrong-password":
        assert "refused" in line and "bind_password" in line and "not-the-password" not in res.output
        # the SMB source shares the password variable: its line says so too
        assert any(ln.startswith("FAIL source") and "password" in ln for ln in res.output.splitlines()), res.output
    elif case == "wrong-tls-name":
        assert "127.0.0.1" in line and DC_NAME in line and "tls_server_name" in line
    else:
        assert "'mallory' is unknown to the directory" in line and "--as" in line


def test_sync_stops_before_the_first_pass_on_a_broken_directory(dc: SambaDC, ollama: ScriptedServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, dc, ollama.url, tls_server_name=None)
    res = run("sync", "--config", str(cfg))
    assert res.exit_code == 2, res.output
    assert "tls_server_name" in res.stderr and "error:" in res.stderr
    assert not (tmp_path / "data" / "state.sqlite3").exists() or json.loads(
        run("status", "--json", "--config", str(cfg)).stdout
    )["passes"] == []


# ---------------------------------------------------------------- smbprotocol's chatter
def test_smbprotocol_info_lines_only_when_configured(dc: SambaDC, ollama: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    handlers, levels = list(root.handlers), {n: logging.getLogger(n).level for n in ("", "ancre", "smbprotocol", "smbclient", "spnego")}

    def smb_lines(extra: str) -> list[str]:
        s = load_settings(write_config(tmp_path / extra.count("=").__str__(), dc, ollama.url, extra=extra))
        setup_logging("json", s.daemon.log_level, s.logging.levels(s.daemon.log_level))
        capsys.readouterr()
        conn = SmbConnector(s.sources[0], directory=None, ignore=s.ignore)  # a fresh SMB session
        try:
            assert len(list(conn.list_items())) == 2
        finally:
            conn.close()
        out = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
        return [d["msg"] for d in out if d["logger"].startswith(("smbprotocol", "smbclient"))]

    try:
        assert smb_lines("") == []
        assert smb_lines("[logging]\nsmbprotocol = 'INFO'\n")  # the per-request lines come back
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        for n, lvl in levels.items():
            logging.getLogger(n).setLevel(lvl)


def test_check_warns_about_a_directory_address_with_a_trailing_nbsp(dc: SambaDC, ollama: ScriptedServer,
                                                                     tmp_path: Path) -> None:
    """Issue 40 on a real AD: a user whose ``mail`` the DC stores with a trailing NBSP can never be
    matched (ancre takes identities as they are; the DC's own matching would not find the clean
    address either). `ancre check` reads every account's names over LDAP and names that one; the
    account itself, asked exactly, still resolves, and the NBSP form designates nobody."""
    import ldap3

    sid = dc.ldap_add_user("nbsp.twin")
    try:
        with dc.ldap_connection() as conn:
            assert conn.modify(dc.user_dn("nbsp.twin"),
                               {"mail": [(ldap3.MODIFY_REPLACE, ["nbsp.twin@axonix.example\u00a0"])]}), conn.result
        res = run("check", "--as", "chloe", "--config", str(write_config(tmp_path, dc, ollama.url)))
        assert res.exit_code == 0, res.output
        warn = next(ln for ln in res.output.splitlines() if ln.startswith("warn identities"))
        assert ("mail 'nbsp.twin@axonix.example<U+00A0>' of 'nbsp.twin': U+00A0 (NO-BREAK SPACE) at position 25"
                in warn), warn
        d = LdapDirectory([f"ldaps://{dc.host}:{dc.ldaps_port}"], dc.base_dn, bind_dn=dc.admin_bind_dn,
                          bind_password=dc.admin_password, ca_file=str(dc.tls_ca_file), tls_server_name=DC_NAME)
        assert f"sid:{sid}" in d.principals("nbsp.twin")
        assert d.principals("nbsp.twin\u00a0") == frozenset() and d.principals(" nbsp.twin") == frozenset()
    finally:
        dc.ldap_delete("nbsp.twin")
