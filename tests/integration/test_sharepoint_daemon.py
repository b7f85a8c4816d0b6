"""The SharePoint source runs under the real ``ancre daemon`` (a subprocess)
like the others — startup pass, delta polling, the permission sweep, SIGHUP, status, metrics.

One ``kind = "sharepoint"`` source reads the Direction site of :class:`FakeMicrosoft` (HTTPS on
127.0.0.1; the connector verifies it with the source's ``ca_file`` and ignores
``REQUESTS_CA_BUNDLE``/``SSL_CERT_FILE``; the tests remove them from the daemon's environment so
the ``ca_file`` alone has to do). The corpus directory knows the users by account name and UPN; the daemon's principal
resolver adds the source's Entra provider (``aad:``/``sp:`` principals).

``[query] live_acl = false``: a search returns what the *index* says, so a permission removed in
the fake with no delta signal can only disappear from alice's results through the connector's
permission sweep (a round of its change feed, every ``permission_sweep_interval_s``) → ``acl`` events →
the daemon's rights lane (``refresh_acls``). The live check at query time is not what this file
tests (tests/integration/test_sharepoint.py ``test_read_acls_reads_live`` covers its reading).
SIGHUP (a forced pass) re-reads every permission too (``PermissionSweep``), sweep or not.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.corpus import CORPUS
from support.daemon_proc import DaemonProc
from support.fake_microsoft import FakeMicrosoft

ALICE = "alice.martin@axonix.ch"  # GG_Direction: reads the Direction site through its "Members" group
BRUNO = "bruno.favre@axonix.ch"  # GG_Techniciens: not a Direction member
EMMA = "emma.blanc@axonix.ch"  # GG_RH
DIRECTION = {
    "sites/Direction/Documents/Contrats/03_Contrat_Maintenance_Etude_Rochat.docx",
    "sites/Direction/Documents/Contrats/21_Contrat_Maintenance_Baumont_Industries.docx",
    "sites/Direction/Documents/Grille_Salariale_2026.docx",
    "sites/Direction/Documents/09-pipeline-llm.md",
}
PIPELINE = "sites/Direction/Documents/09-pipeline-llm.md"
PIPELINE_Q = "qwen2.5:14b température génération pipeline LLM"
NEW = "sites/Direction/Documents/Comite_Direction_Novembre.md"
NEW_WORD = "vorxqtzk"
WAIT = 180.0  # generous: 2 shared cores, e5 on CPU


@pytest.fixture()
def ms() -> Iterator[FakeMicrosoft]:
    with FakeMicrosoft.axonix() as fake:
        yield fake


def _toml(v: Any) -> str:
    return json.dumps(v)  # JSON strings, numbers, booleans and arrays are valid TOML values


def write_config(dest: Path, ms: FakeMicrosoft, *, sweep_s: float = 3.0) -> Path:
    """An ``ancre.toml`` in ``dest``: e5-local, edge store, the corpus directory, metrics on a free
    port, index-only rights at query time, and one SharePoint source on the Direction site (delta
    every second, permission sweep every ``sweep_s`` s, 0 = never); the daemon's own reconciliation and ACL sweep off so
    that only the connector's change feed moves things)."""
    shutil.copy2(CORPUS / "directory.json", dest / "directory.json")
    cert = ms.certificate
    source = {
        "id": "sp", "kind": "sharepoint", "tenant_id": ms.tenant_id, "client_id": ms.client_id,
        "certificate_path": str(cert.key_pem_path), "certificate_thumbprint": cert.thumbprint,
        "authority": ms.authority, "graph_url": ms.graph_url, "ca_file": str(ms.ca_path),
        "sites": [ms.site_url("Direction")], "delta_interval_s": 1.0, "permission_sweep_interval_s": sweep_s,
        "identity_cache_ttl_s": 0,
    }
    daemon = {"metrics_port": 0, "debounce_s": 0.5, "status_interval_s": 1.0,
              "reconcile_interval_s": 0, "acl_sweep_interval_s": 0}
    cfg = dest / "ancre.toml"
    cfg.write_text(
        'data_dir = "data"\n'
        '[embedder]\nkind = "e5-local"\n'
        '[store]\nkind = "edge"\n'
        '[directory]\nkind = "file"\npath = "directory.json"\ncache_ttl_s = 0\n'
        '[query]\nlive_acl = false\n'
        "[daemon]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in daemon.items())
        + "[[sources]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in source.items()),
        encoding="utf-8",
    )
    return cfg


def _remove_direction_members(ms: FakeMicrosoft, name: str) -> None:
    """Give ``name`` (Direction library root) its own permissions: GG_RH reads, the site's
    "Members" (GG_Direction) no longer do — with no delta signal."""
    ms.set_permissions(
        ms.drive("Direction"), name,
        [{"roles": ["read"], "grantedToV2": {"group": {"id": ms.group("GG_RH").id, "displayName": "GG_RH"}}}],
        signal=False,
    )


def _daemon(cfg: Path) -> DaemonProc:
    d = DaemonProc(cfg)
    for var in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        d.env.pop(var, None)  # the fake's CA comes from the source's ca_file only
    return d.start()


def _paths(d: DaemonProc, q: str, user: str) -> set[str]:
    return {h["path"] for h in d.search(q, user=user)}


def _ancre_status_json(cfg: Path) -> dict[str, Any]:
    """``ancre status --json`` run as the admin would, while the daemon owns the index (it asks
    the daemon over the control socket)."""
    exe = Path(sys.executable).with_name("ancre")
    out = subprocess.run(
        [str(exe), "status", "--json", "--config", str(cfg)], capture_output=True, text=True, cwd=cfg.parent,
        timeout=120, check=True,
    )
    return json.loads(out.stdout)


def test_sharepoint_source_under_the_daemon(tmp_path: Path, ms: FakeMicrosoft) -> None:
    cfg = write_config(tmp_path, ms)
    d = _daemon(cfg)
    docs = ms.drive("Direction")
    try:
        # --- first pass: the Direction documents, readable by GG_Direction only
        st = d.wait_idle(timeout=WAIT)
        first = st["sources"]["sp"]["last_full"]
        assert (first["trigger"], first["outcome"], first["new"]) == ("startup", "ok", len(DIRECTION)), first
        assert st["documents"]["sp"] == {"indexed": len(DIRECTION)}
        assert PIPELINE in d.wait_for(lambda: _paths(d, PIPELINE_Q, ALICE), "alice to find the pipeline page", WAIT)
        assert _paths(d, PIPELINE_Q, BRUNO) == set()  # outside GG_Direction: nothing of the site
        assert _paths(d, PIPELINE_Q, "bruno") == set()  # by account name too

        # --- a file added in the fake: delta polling brings it in (no SIGHUP, no reconciliation)
        ms.add_file(docs, NEW.rsplit("/", 1)[1], f"# Comité de direction\n\nOrdre du jour {NEW_WORD}.".encode())
        d.wait_for(lambda: NEW in _paths(d, NEW_WORD, ALICE), "the added file to be found after a delta poll", WAIT)
        assert NEW not in _paths(d, NEW_WORD, BRUNO)
        st = d.wait_idle(timeout=WAIT)
        assert st["passes"].get("sighup") is None and st["passes"].get("periodic") is None, st["passes"]

        # --- a permission removed with no delta signal: the connector's permission sweep revokes it
        _remove_direction_members(ms, "09-pipeline-llm.md")
        d.wait_for(lambda: PIPELINE not in _paths(d, PIPELINE_Q, ALICE), "alice to lose the pipeline page", WAIT)
        d.wait_for(lambda: PIPELINE in _paths(d, PIPELINE_Q, EMMA), "emma (GG_RH) to gain it", WAIT)
        st = d.wait_idle(timeout=WAIT)
        assert st["sources"]["sp"]["last_acl"]["trigger"] == "acl_event", st["sources"]["sp"]
        assert NEW in _paths(d, NEW_WORD, ALICE)  # the rest of the site still hers

        # --- SIGHUP: a forced full pass; nothing new to embed, the revoked right stays revoked
        d.signal(signal.SIGHUP)
        st = d.wait_for(lambda: (s := d.status()) and s["passes"].get("sighup") == 1 and s["idle"] and s, "SIGHUP pass", WAIT)
        hup = st["sources"]["sp"]["last_full"]
        assert (hup["trigger"], hup["outcome"], hup["embedded_chunks"]) == ("sighup", "ok", 0), hup
        assert PIPELINE not in _paths(d, PIPELINE_Q, ALICE)

        # --- status: the daemon's status file and `ancre status --json` list the source and its passes
        assert st["sources"]["sp"]["watch"] not in (None, "off"), st["sources"]["sp"]
        index = _ancre_status_json(cfg)
        assert {c["source"] for c in index["counts"]} == {"sp"}, index["counts"]
        assert sum(c["n"] for c in index["counts"] if c["status"] == "indexed") == len(DIRECTION) + 1
        assert any(p["source"] == "sp" and p["outcome"] == "ok" for p in index["passes"]), index["passes"]

        # --- metrics: the source's passes by trigger
        metrics = d.metrics()
        assert 'ancre_passes_total{outcome="ok",scope="full",source="sp",trigger="startup"} 1.0' in metrics, metrics
        assert 'ancre_passes_total{outcome="ok",scope="full",source="sp",trigger="sighup"} 1.0' in metrics, metrics
        assert 'ancre_documents{source="sp",status="indexed"} 5.0' in metrics, metrics

        rc, _ = d.stop(timeout=60)
        assert rc == 0, d.log_text()[-4000:]
    finally:
        d.kill()


def test_sighup_rereads_sharepoint_permissions(tmp_path: Path, ms: FakeMicrosoft) -> None:
    """SIGHUP is "resync everything now, content and ACLs" (README): for SharePoint, whose ACLs
    come from permissions read at the last delta or sweep, the forced pass re-reads them from
    Graph — a permission removed with no delta signal is revoked with no sweep configured."""
    cfg = write_config(tmp_path, ms, sweep_s=0)
    d = _daemon(cfg)
    try:
        d.wait_idle(timeout=WAIT)
        assert PIPELINE in d.wait_for(lambda: _paths(d, PIPELINE_Q, ALICE), "alice to find the pipeline page", WAIT)
        _remove_direction_members(ms, "09-pipeline-llm.md")
        d.signal(signal.SIGHUP)
        st = d.wait_for(lambda: (s := d.status()) and s["passes"].get("sighup") == 1 and s["idle"] and s, "SIGHUP pass", WAIT)
        hup = st["sources"]["sp"]["last_full"]
        assert (hup["outcome"], hup["acl_only"], hup["embedded_chunks"]) == ("ok", 1, 0), hup
        assert PIPELINE not in _paths(d, PIPELINE_Q, ALICE)
        assert PIPELINE in _paths(d, PIPELINE_Q, EMMA)
        rc, _ = d.stop(timeout=60)
        assert rc == 0, d.log_text()[-4000:]
    finally:
        d.kill()
