"""``ancre check`` passes on ``examples/production/ancre.toml`` with every server it names faked on
127.0.0.1 (issue 45, point 2): the Samba AD DC of the tests for LDAPS and the SMB share, the fake
Microsoft tenant (Graph, SharePoint REST, Entra token endpoint, over TLS) for the SharePoint
source, a scripted Ollama for the answering model and the judge.

The example is read as it is; only the *values* that name this deployment's servers, files and
accounts are pointed at the fakes (the key names, the tables, the secret forms stay the
example's), plus the three keys a tenant on 127.0.0.1 needs (``authority``, ``graph_url``,
``ca_file`` of the SharePoint source). The secrets come the way the example says: the environment
(LDAP, SMB, API key), a file (Open WebUI's JWT secret) and a systemd credential (the PFX
passphrase, from ``$CREDENTIALS_DIRECTORY``). Needs root and Samba (the DC fixture): run it
under ``flock /tmp/ancre-samba.lock``.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from support.fake_microsoft import FakeMicrosoft
from support.httpserver import ScriptedServer
from support.samba import SambaDC, samba_dc  # noqa: F401 - the session fixture
from support.scripted_ollama import ANSWER_MODEL, JUDGE_MODEL, chats, script

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "production" / "ancre.toml"
ADDED = {"sources.1.authority", "sources.1.graph_url", "sources.1.ca_file"}
"""Keys the test adds: a tenant on 127.0.0.1 instead of Microsoft's."""


def _keys(table: Any, prefix: str = "") -> set[str]:
    if isinstance(table, dict):
        return {k for name, v in table.items() for k in _keys(v, f"{prefix}{name}.")} | {prefix.rstrip(".")}
    if isinstance(table, list) and table and isinstance(table[0], dict):
        return {k for i, v in enumerate(table) for k in _keys(v, f"{prefix}{i}.")}
    return {prefix.rstrip(".")}


@pytest.fixture()
def ollama() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        script(srv, "OK")
        yield srv


def test_ancre_check_passes_on_the_production_example_with_every_server_faked(
    samba_dc: SambaDC, ollama: ScriptedServer, tmp_path: Path
) -> None:
    raw = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    keys = _keys(raw)
    dc = samba_dc
    jwt = tmp_path / "owui-jwt-secret"
    jwt.write_text(secrets.token_hex(32) + "\n", encoding="utf-8")
    chain = tmp_path / "audit-chain.key"
    chain.write_bytes(os.urandom(32))
    creds = tmp_path / "credentials"
    creds.mkdir()
    with FakeMicrosoft.axonix() as ms:
        (creds / raw["sources"][1]["pfx_passphrase"]["credential"]).write_text(ms.certificate.pfx_passphrase,
                                                                              encoding="utf-8")
        raw["data_dir"] = str(tmp_path / "data")
        raw["directory"].update(url=f"ldaps://{dc.host}:{dc.ldaps_port}", urls=[f"ldaps://{dc.host}:{dc.ldaps_port}"],
                                base_dn=dc.base_dn, bind_dn=dc.admin_bind_dn, ca_file=str(dc.tls_ca_file))
        smb, sp = raw["sources"]
        smb.update(server=dc.host, share=dc.share, username=dc.admin_principal)
        sp.update(tenant_id=ms.tenant_id, client_id=ms.client_id, pfx_path=str(ms.certificate.pfx_path),
                  sites=[ms.site_url("Direction")], authority=ms.authority, graph_url=ms.graph_url,
                  ca_file=str(ms.ca_path))
        raw["llm"]["url"] = ollama.url
        raw["audit"]["chain_key_file"] = str(chain)
        raw["api"]["user_jwt_secret"]["file"] = str(jwt)
        assert _keys(raw) == keys | ADDED, _keys(raw) ^ keys  # values changed, not the keys
        cfg = tmp_path / "ancre.toml"
        cfg.write_text(tomli_w.dumps(raw), encoding="utf-8")

        env = {k: v for k, v in os.environ.items() if not k.startswith("ANCRE_") and k != "NOTIFY_SOCKET"}
        env.update(ANCRE_LDAP_PASSWORD=dc.admin_password, ANCRE_SMB_PASSWORD=dc.admin_password,
                   ANCRE_API_KEY=secrets.token_hex(32), CREDENTIALS_DIRECTORY=str(creds))
        exe = Path(sys.executable).with_name("ancre")
        res = subprocess.run([str(exe), "check", "--config", str(cfg)], capture_output=True, text=True, env=env,
                             timeout=600, check=False)
    out = res.stdout
    assert res.returncode == 0 and "all checks passed" in out, out + res.stderr
    parts = ("config", "files", "api", "directory", "source partage", "source sharepoint", "embedder", "store", "llm",
             "judge")
    lines = {p: ln for p in parts for ln in out.splitlines() if ln[5:].startswith(f"{p} ")}
    assert set(lines) == set(parts) and not [ln for ln in lines.values() if ln.startswith("FAIL")], out
    assert "user JWT secret from " + str(jwt) in lines["api"], lines["api"]
    assert "alice.martin@axonix.ch resolves to" in lines["directory"], lines["directory"]
    assert len(chats(ollama, ANSWER_MODEL)) == 1 and len(chats(ollama, JUDGE_MODEL)) == 1
