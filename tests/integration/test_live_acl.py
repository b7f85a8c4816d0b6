"""Live rights before grounding, on folder sources (the real synced Axonix corpus,
e5-local, embedded store): an ACL manifest change is seen at the next question without any sync,
the index is updated at once (store payload and state DB, so the next pass finds nothing to do),
the TTL cache, an unreachable source (default: left out and said; ``stored``: the index decides),
and the audit's per-document rights. The SMB side is in ``test_live_acl_smb.py``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.corpus import copy_corpus, write_config
from typer.testing import CliRunner

from ancre.app.cli import app
from ancre.app.runtime import Runtime
from ancre.audit.record import AuditLog
from ancre.config import load_settings
from ancre.errors import SourceUnavailableError
from ancre.models import COLLECTIONS, Acl
from ancre.query.answer import CONTROL_RIGHTS_UNVERIFIED, AnswerService, unverified_note
from ancre.query.live_acl import LiveAclChecker
from ancre.query.retrieval import Retriever

DENY_FILE = "CLIENTS/test-deny-explicite.docx"
DOC_ID = f"partage:{DENY_FILE}"
QUESTION = "Quel est le code d'accès de la salle serveur de Baumont Industries ?"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, Runtime]]:
    root = copy_corpus(tmp_path / "corpus")
    config = write_config(root, extra="[query]\nlive_acl_ttl_s = 0\n")
    rt = Runtime(load_settings(config))
    for conn in rt.connectors():
        rep = rt.engine.run_pass(conn)
        assert rep.outcome == "ok" and rep.failed == 0, rep
    yield root, rt
    rt.close()


def deny_in_manifest(root: Path, group: str) -> None:
    """Add a DENY READ for ``group`` on the deny file's own entry of acl.json (a file-only change)."""
    manifest = root / "acl.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["entries"][DENY_FILE]["aces"].insert(0, ["DENY", group, "READ", ""])
    manifest.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def paths(rt: Runtime, user: str, retriever: Retriever | None = None) -> list[str]:
    r = retriever or rt.retriever
    return [x.path for x in r.retrieve(QUESTION, rt.directory.principals(user), limit=20).results]


def stored_acl(rt: Runtime) -> set[Acl]:
    return {
        Acl(frozenset(p.payload.acl_allow), frozenset(p.payload.acl_deny))
        for c in COLLECTIONS for p in rt.store.scroll(c) if p.payload.doc_id == DOC_ID
    }


def audit_lines(d: Path) -> list[dict]:
    return [json.loads(x) for f in sorted(d.glob("audit-*.jsonl")) for x in f.read_text("utf-8").splitlines()]


def test_manifest_change_reaches_the_next_question_and_the_index_without_a_sync(
    world: tuple[Path, Runtime], tmp_path: Path
) -> None:
    root, rt = world
    assert DENY_FILE in paths(rt, "bruno")
    before = stored_acl(rt)
    service = AnswerService(rt.retriever, rt.store, rt.directory, rt.settings, audit=AuditLog(tmp_path / "audit"))

    deny_in_manifest(root, "GG_Techniciens")  # no sync, no daemon: only the manifest changed

    ans = service.ask(QUESTION, "bruno")
    assert DENY_FILE not in {s.path for s in ans.sources}
    assert CONTROL_RIGHTS_UNVERIFIED not in ans.controles and ans.unverified == ()
    (line,) = audit_lines(tmp_path / "audit")
    rights = {r["doc_id"]: r for r in line["rights"]}
    assert rights[DOC_ID]["live"] is True and rights[DOC_ID]["outcome"] == "changed"
    assert rights[DOC_ID]["readable"] is False
    assert all(r["live"] for r in line["rights"])
    assert all(s["rights"] in ("live", "changed") for s in line["sources"])
    assert DOC_ID not in {s["doc_id"] for s in line["sources"]}
    assert "live_acl" in line["timings_ms"]

    # the index was updated at once: every chunk's payload, and the state DB's digest
    (fresh,) = stored_acl(rt)
    assert {fresh} != before and f"sid:{rt.directory.sid_of('GG_Techniciens')}" in fresh.deny
    (row,) = [st for st in rt.state.all_items() if st.doc_id == DOC_ID]
    assert row.acl_hash == fresh.digest()

    # search agrees (also for chloe, denied before and after); alice, not in GG_Techniciens, keeps it
    assert DENY_FILE not in paths(rt, "bruno") and DENY_FILE not in paths(rt, "chloe")
    assert DENY_FILE in paths(rt, "alice")

    # the next sync finds nothing left to apply
    rep = rt.engine.run_pass(rt.connector(rt.settings.source("partage")))
    assert rep.outcome == "ok" and rep.acl_only == 0 and rep.new == rep.changed == 0, rep


def test_ttl_cache_reuses_a_reading_and_never_overrides_a_newer_index_acl(world: tuple[Path, Runtime]) -> None:
    root, rt = world
    clock = Clock()
    cfg = rt.settings.query.model_copy(update={"live_acl_ttl_s": 10.0})
    live = LiveAclChecker(lambda s: rt.connector(rt.settings.source(s)), rt.acl_writer, cfg, clock=clock)
    retriever = Retriever(rt.store, rt.embedder, rt.bm25, cfg, live)
    try:
        assert DENY_FILE in paths(rt, "bruno", retriever)
        reads = live.reads
        assert reads > 0
        deny_in_manifest(root, "GG_Techniciens")

        clock.t += 5  # within the TTL: the earlier reading is reused, nothing is read
        res = retriever.retrieve(QUESTION, rt.directory.principals("bruno"), limit=20)
        assert DENY_FILE in [r.path for r in res.results] and live.reads == reads
        check = next(c for c in res.rights if c.doc_id == DOC_ID)
        assert check.outcome == "live" and check.age_s == pytest.approx(5.0)

        clock.t += 6  # past the TTL: read again, the change is seen
        res = retriever.retrieve(QUESTION, rt.directory.principals("bruno"), limit=20)
        assert DENY_FILE not in [r.path for r in res.results] and live.reads > reads
        assert next(c for c in res.rights if c.doc_id == DOC_ID).outcome == "changed"

        # a sync writes a newer ACL (here: the manifest reverted and the file synced) within the
        # TTL: the cached reading disagrees with the index, so the source is read again instead
        # of writing the stale reading back
        data = json.loads((root / "acl.json").read_text(encoding="utf-8"))
        data["entries"][DENY_FILE]["aces"].pop(0)
        (root / "acl.json").write_text(json.dumps(data), encoding="utf-8")
        rep = rt.engine.sync_paths(rt.connector(rt.settings.source("partage")), [DENY_FILE])
        assert rep.acl_only == 1, rep
        clock.t += 1
        reads = live.reads
        res = retriever.retrieve(QUESTION, rt.directory.principals("bruno"), limit=20)
        assert DENY_FILE in [r.path for r in res.results] and live.reads > reads
        assert next(c for c in res.rights if c.doc_id == DOC_ID).outcome == "live"
    finally:
        live.close()


def test_unreachable_source_leaves_its_documents_out_and_says_so_or_falls_back_to_stored(
    world: tuple[Path, Runtime], tmp_path: Path
) -> None:
    root, rt = world
    service = AnswerService(rt.retriever, rt.store, rt.directory, rt.settings, audit=AuditLog(tmp_path / "audit"))
    assert DENY_FILE in paths(rt, "alice")
    share = root / "share"
    share.rename(root / "share-unmounted")  # the source's root is gone: unreachable, not deleted
    try:
        res = rt.retriever.retrieve(QUESTION, rt.directory.principals("alice"), limit=20)
        assert res.results  # the other source still answers
        assert all(r.doc_id.startswith("sharepoint-direction:") for r in res.results)
        (u,) = res.unverified
        assert u.source == "partage" and u.documents >= 1 and u.outcome == "unreachable"
        assert "missing" in u.reason

        ans = service.ask(QUESTION, "alice")
        assert CONTROL_RIGHTS_UNVERIFIED in ans.controles
        assert all(not s.doc_id.startswith("partage:") for s in ans.sources)
        assert ans.unverified and ans.unverified[0].source == "partage"
        note = unverified_note(ans.unverified)
        assert "écarté" in note and "« partage »" in note and "test-deny" not in note
        (line,) = audit_lines(tmp_path / "audit")
        assert CONTROL_RIGHTS_UNVERIFIED in line["controls"]
        left = [r for r in line["rights"] if r["doc_id"].startswith("partage:")]
        assert left and all(r["outcome"] == "unreachable" and r["live"] is False and not r["readable"] for r in left)
        assert any(r["doc_id"] == DOC_ID for r in left)

        # nothing was written to the index by the outage
        assert stored_acl(rt) and all(a.allow for a in stored_acl(rt))

        # the CLI says so too (search, on stderr; ask, after the answer)
        rt.store.close()
        try:
            runner = CliRunner()
            cfg = str(root / "ancre.toml")
            out = runner.invoke(app, ["search", QUESTION, "--as", "alice", "--config", cfg])
            assert out.exit_code == 0, out.output
            assert "left out" in out.output and "'partage'" in out.output
            out = runner.invoke(app, ["ask", QUESTION, "--as", "alice", "--config", cfg, "--json"])
            assert out.exit_code == 0, out.output
            body = json.loads(out.stdout.strip().splitlines()[-1])
            assert CONTROL_RIGHTS_UNVERIFIED in body["controles"]
            assert body["documents_ecartes"][0]["source"] == "partage"
            assert body["documents_ecartes"][0]["raison"] == "unreachable"
        finally:
            rt.store.open(rt.embedder.name, rt.embedder.dim)

        # availability chosen by the admin: the stored ACL decides, and the audit says so
        cfg = rt.settings.query.model_copy(update={"live_acl_on_unreachable": "stored"})
        live = LiveAclChecker(lambda s: rt.connector(rt.settings.source(s)), rt.acl_writer, cfg)
        try:
            res = Retriever(rt.store, rt.embedder, rt.bm25, cfg, live).retrieve(
                QUESTION, rt.directory.principals("alice"), limit=20
            )
            assert DENY_FILE in [r.path for r in res.results] and res.unverified == ()
            check = next(c for c in res.rights if c.doc_id == DOC_ID)
            assert check.outcome == "stored" and check.live is False and check.readable
            # ...but the stored ACL still refuses whom it refuses
            res = Retriever(rt.store, rt.embedder, rt.bm25, cfg, live).retrieve(
                QUESTION, rt.directory.principals("chloe"), limit=20
            )
            assert DENY_FILE not in [r.path for r in res.results]
        finally:
            live.close()
    finally:
        (root / "share-unmounted").rename(share)
    # back: checked live again
    res = rt.retriever.retrieve(QUESTION, rt.directory.principals("alice"), limit=20)
    assert DENY_FILE in [r.path for r in res.results] and res.unverified == ()


def test_a_deleted_file_is_left_out_before_the_sync_purges_it(world: tuple[Path, Runtime]) -> None:
    root, rt = world
    assert DENY_FILE in paths(rt, "alice")
    (root / "share" / DENY_FILE).unlink()
    res = rt.retriever.retrieve(QUESTION, rt.directory.principals("alice"), limit=20)
    assert DENY_FILE not in [r.path for r in res.results]
    assert next(c for c in res.rights if c.doc_id == DOC_ID).outcome == "gone"
    assert stored_acl(rt)  # purging is the sync's job


def test_live_check_off_trusts_the_index(world: tuple[Path, Runtime]) -> None:
    root, rt = world
    deny_in_manifest(root, "GG_Techniciens")
    cfg = rt.settings.query.model_copy(update={"live_acl": False})
    res = Retriever(rt.store, rt.embedder, rt.bm25, cfg).retrieve(QUESTION, rt.directory.principals("bruno"), limit=20)
    assert DENY_FILE in [r.path for r in res.results]  # until a sync (or the sweep) applies it
    assert {c.outcome for c in res.rights} == {"off"} and not any(c.live for c in res.rights)


def test_missing_share_root_is_not_read_as_deletions(tmp_path: Path) -> None:
    """Guard for the helper above: renaming the root makes the folder connector's read_acls
    raise, never return an empty mapping (which would read as 'every document gone')."""
    root = copy_corpus(tmp_path / "c")
    rt = Runtime(load_settings(write_config(root)))
    try:
        conn = rt.connector(rt.settings.source("partage"))
        got = conn.read_acls([DENY_FILE, "nope/absent.docx"])
        assert set(got) == {DENY_FILE}
        shutil.move(str(root / "share"), str(root / "moved"))
        with pytest.raises(SourceUnavailableError):
            conn.read_acls([DENY_FILE])
    finally:
        rt.close()
