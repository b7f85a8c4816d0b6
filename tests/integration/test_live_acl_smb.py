"""Live rights before grounding, against the real Samba AD DC (tests/support/samba.py):

- a file-only ACL change made with ``smbcacls`` (Samba sends no change notification for a
  file's own security descriptor; no watcher runs here, no sync is made) stops the document from
  being returned at the very next query, ``search`` and ``ask`` alike, and updates the index;
- with the SMB server stopped, the default answer leaves the share's documents out and says so
  (control ``droits_non_verifies``, ``Answer.unverified``, the audit line), while
  ``live_acl_on_unreachable = "stored"`` falls back to the index.

Run under ``flock /tmp/ancre-samba.lock`` on shared machines (the DC binds fixed ports).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.samba import SambaDC, samba_dc  # noqa: F401 - the session fixture
from support.smb_config import PASSWORD_ENV, write_smb_config

from ancre.app.runtime import Runtime
from ancre.audit.record import AuditLog
from ancre.config import load_settings
from ancre.models import COLLECTIONS, Acl
from ancre.query.answer import CONTROL_RIGHTS_UNVERIFIED, AnswerService, unverified_note
from ancre.query.live_acl import LiveAclChecker
from ancre.query.retrieval import Retriever

DENY_FILE = "CLIENTS/test-deny-explicite.docx"
QUESTION = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"
WAIT_S = 60.0  # upper bound of a wait for the server to be back (not a speed assertion)


class World:
    def __init__(self, dc: SambaDC, rt: Runtime, audit: Path) -> None:
        self.dc, self.rt, self.audit_dir = dc, rt, audit
        self.service = AnswerService(rt.retriever, rt.store, rt.directory, rt.settings, audit=AuditLog(audit))
        self.doc_id = next(
            p.payload.doc_id for c in COLLECTIONS for p in rt.store.scroll(c) if p.payload.path == DENY_FILE
        )

    def paths(self, user: str, retriever: Retriever | None = None) -> list[str]:
        r = retriever or self.rt.retriever
        return [x.path for x in r.retrieve(QUESTION, self.rt.directory.principals(user), limit=20).results]

    def stored(self) -> set[Acl]:
        return {
            p.payload.acl()
            for c in COLLECTIONS for p in self.rt.store.scroll(c) if p.payload.doc_id == self.doc_id
        }

    def last_audit(self) -> dict:
        lines = [x for f in sorted(self.audit_dir.glob("audit-*.jsonl")) for x in f.read_text("utf-8").splitlines()]
        return json.loads(lines[-1])


@pytest.fixture(scope="module")
def world(samba_dc: SambaDC, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    samba_dc.start_smbd()
    os.environ[PASSWORD_ENV] = samba_dc.admin_password
    root = tmp_path_factory.mktemp("live-smb")
    cfg = write_smb_config(root, samba_dc, extra="[query]\nlive_acl_ttl_s = 0\n")
    rt = Runtime(load_settings(cfg))
    rep = rt.engine.run_pass(rt.connector(rt.settings.source("partage")))
    assert rep.outcome == "ok" and rep.failed == 0, rep
    yield World(samba_dc, rt, root / "audit")
    rt.close()
    os.environ.pop(PASSWORD_ENV, None)


def test_file_only_acl_change_stops_the_document_at_the_next_query(world: World) -> None:
    dc, rt = world.dc, world.rt
    assert DENY_FILE in world.paths("bruno")  # bruno reads CLIENTS through GG_Techniciens
    before = world.stored()
    ace = f"ACL:{dc.sid_of('GG_Techniciens')}:DENIED/0x0/READ"
    dc.smbcacls(DENY_FILE, "-a", ace)  # on the file only: Samba notifies nothing
    try:
        # the index alone still says yes (what a query with no live check would say)
        blind = Retriever(rt.store, rt.embedder, rt.bm25, rt.settings.query.model_copy(update={"live_acl": False}))
        assert DENY_FILE in world.paths("bruno", blind)

        # the very next question: ask, then search
        ans = world.service.ask(QUESTION, "bruno")
        assert DENY_FILE not in {s.path for s in ans.sources}
        assert CONTROL_RIGHTS_UNVERIFIED not in ans.controles
        rights = {r["doc_id"]: r for r in world.last_audit()["rights"]}
        assert rights[world.doc_id]["outcome"] == "changed" and rights[world.doc_id]["live"] is True
        assert rights[world.doc_id]["readable"] is False
        assert DENY_FILE not in world.paths("bruno")
        assert DENY_FILE in world.paths("alice")  # GG_Direction is not denied

        # the index followed at once: payloads and the state DB, so the next pass agrees
        (fresh,) = world.stored()
        assert {fresh} != before and f"sid:{dc.sid_of('GG_Techniciens')}" in fresh.deny
        (row,) = [st for st in rt.state.all_items() if st.doc_id == world.doc_id]
        assert row.acl_hash == fresh.digest()
        rep = rt.engine.run_pass(rt.connector(rt.settings.source("partage")))
        assert rep.outcome == "ok" and rep.acl_only == 0 and rep.embedded_chunks == 0, rep
    finally:
        dc.smbcacls(DENY_FILE, "-D", ace)
    # the live check only narrows what the index allows: the right given back reaches answers
    # through the sync (notifications, the ACL sweep), here one pass
    assert DENY_FILE not in world.paths("bruno")
    rep = rt.engine.run_pass(rt.connector(rt.settings.source("partage")))
    assert rep.outcome == "ok" and rep.acl_only == 1 and rep.embedded_chunks == 0, rep
    assert DENY_FILE in world.paths("bruno")
    assert world.stored() == before


def test_smb_server_stopped_leaves_the_document_out_and_says_so(world: World) -> None:
    dc, rt = world.dc, world.rt
    assert DENY_FILE in world.paths("alice")
    dc.stop_smbd()
    try:
        ans = world.service.ask(QUESTION, "alice")
        assert DENY_FILE not in {s.path for s in ans.sources}
        assert ans.sources == ()  # every document of the index is on the stopped share
        assert CONTROL_RIGHTS_UNVERIFIED in ans.controles
        (u,) = ans.unverified
        assert u.source == "partage" and u.outcome == "unreachable" and u.documents >= 1
        assert "injoignable" in unverified_note(ans.unverified) and "« partage »" in unverified_note(ans.unverified)
        line = world.last_audit()
        assert CONTROL_RIGHTS_UNVERIFIED in line["controls"]
        rights = {r["doc_id"]: r for r in line["rights"]}
        assert rights[world.doc_id]["outcome"] == "unreachable" and rights[world.doc_id]["live"] is False
        assert "unreachable" in rights[world.doc_id]["reason"]

        res = rt.retriever.retrieve(QUESTION, rt.directory.principals("alice"), limit=20)
        assert res.results == () and res.unverified[0].source == "partage"
        assert all(a.allow for a in world.stored())  # an outage revokes nothing in the index

        # availability chosen by the admin: the stored ACL decides
        cfg = rt.settings.query.model_copy(update={"live_acl_on_unreachable": "stored"})
        live = LiveAclChecker(lambda s: rt.connector(rt.settings.source(s)), rt.acl_writer, cfg)
        try:
            res = Retriever(rt.store, rt.embedder, rt.bm25, cfg, live).retrieve(
                QUESTION, rt.directory.principals("alice"), limit=20
            )
            assert DENY_FILE in [r.path for r in res.results] and res.unverified == ()
            assert {c.outcome for c in res.rights} == {"stored"}
        finally:
            live.close()
    finally:
        dc.start_smbd()
    deadline = time.monotonic() + WAIT_S  # the connector fails fast for a few seconds after an outage
    while DENY_FILE not in world.paths("alice") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert DENY_FILE in world.paths("alice")
