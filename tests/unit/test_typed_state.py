"""Item statuses, pass outcomes and scopes, and change kinds are ``StrEnum``s whose values are the
strings the state DB, the JSON outputs and the metrics have always held: a state DB written
before them still reads, and what is written now reads the same to an older reader. ``ItemState``
is built by keyword only; one NFC normaliser serves the whole package."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from pathlib import Path

import pytest

from ancre.daemon.progress import index_status
from ancre.daemon.sync import PassReport
from ancre.index.state import ItemState, StateDB
from ancre.models import ChangeKind, ChunkPayload, ItemStatus, PassOutcome, PassScope, ReasonCode, SearchResult, nfc

PACKAGE = Path(__file__).resolve().parents[2]


def _row(**kw: object) -> ItemState:
    base: dict[str, object] = {
        "source": "s", "native_id": "n", "path": "a.md", "doc_id": "s:n", "collection": "documents", "size": 1,
        "mtime": 1.0, "etag": None, "content_hash": "h", "acl_hash": "a", "chunk_count": 1,
        "status": ItemStatus.INDEXED, "updated_at": 1.0,
    }
    return ItemState(**{**base, **kw})  # type: ignore[arg-type]


def test_item_status_values_are_the_stored_strings() -> None:
    assert {m.name: m.value for m in ItemStatus} == {
        "INDEXED": "indexed", "PENDING": "pending", "FAILED": "failed", "SKIPPED": "skipped",
    }


def test_pass_outcome_values_are_the_stored_strings() -> None:
    assert {m.name: m.value for m in PassOutcome} == {
        "OK": "ok", "PARTIAL": "partial", "SUSPECT": "suspect", "INTERRUPTED": "interrupted", "ERROR": "error",
        "CRASHED": "crashed", "DISK_FULL": "disk_full",
    }


def test_pass_scope_values_are_the_reported_strings() -> None:
    assert {m.name: m.value for m in PassScope} == {"FULL": "full", "PATHS": "paths", "ACL": "acl"}


def test_change_kind_values_are_the_event_strings() -> None:
    assert {m.name: m.value for m in ChangeKind} == {
        "CREATED": "created", "MODIFIED": "modified", "DELETED": "deleted", "MOVED": "moved", "ACL": "acl",
        "RESCAN": "rescan",
    }


def test_old_state_db_rows_read_as_members_and_new_rows_store_the_old_strings(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    StateDB(path).close()
    raw = sqlite3.connect(path)
    for status in ("indexed", "pending", "failed", "skipped"):  # as an older ancre wrote them
        raw.execute(
            "INSERT INTO items (source, native_id, path, doc_id, collection, size, mtime, chunk_count, status, updated_at)"
            " VALUES ('old', ?, ?, ?, 'documents', 1, 1.0, 0, ?, 1.0)",
            (status, f"{status}.md", f"old:{status}", status),
        )
    raw.commit()
    raw.close()
    db = StateDB(path)
    try:
        rows = db.items("old")
        assert {nid: (type(r.status), r.status.value) for nid, r in rows.items()} == {
            s: (ItemStatus, s) for s in ("indexed", "pending", "failed", "skipped")
        }
        db.put(_row(native_id="new", status=ItemStatus.FAILED, reason_code=ReasonCode.CORRUPT, detail="bad xref"))
        pass_id = db.begin_pass("s")
        db.end_pass(pass_id, PassOutcome.PARTIAL, PassReport(source="s", outcome=PassOutcome.PARTIAL).to_json())
        assert db.set_acl_hash("old", "old:indexed", "b") is True  # its WHERE status = indexed matches old rows
    finally:
        db.close()
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("SELECT status, typeof(status) FROM items WHERE native_id = 'new'").fetchone() == ("failed", "text")
        outcome, summary = raw.execute("SELECT outcome, summary FROM passes WHERE id = ?", (pass_id,)).fetchone()
        assert outcome == "partial" and json.loads(summary)["outcome"] == "partial" and json.loads(summary)["scope"] == "full"
    finally:
        raw.close()


def test_status_json_holds_the_old_strings(tmp_path: Path) -> None:
    db = StateDB(tmp_path / "state.sqlite3")
    try:
        db.put(_row(native_id="a", status=ItemStatus.SKIPPED, reason_code=ReasonCode.EMPTY, detail="no text found"))
        db.put(_row(native_id="b", acl_problem="acl_unreadable: truncated descriptor"))
        out = json.loads(json.dumps(index_status(db, 0)))
    finally:
        db.close()
    assert out["counts"] == [{"source": "s", "status": "indexed", "n": 1}, {"source": "s", "status": "skipped", "n": 1}]
    assert sorted((p["status"], p["problem"]) for p in out["problems"]) == [
        ("indexed", "acl_unreadable"), ("skipped", "skipped"),
    ]


def test_item_state_takes_keywords_only() -> None:
    with pytest.raises(TypeError):
        ItemState("s", "n", "a.md", "s:n", "documents", 1, 1.0, None, "h", "a", 1, "indexed", None, 1.0)  # type: ignore[misc]
    assert _row().status == "indexed"


def test_one_nfc_normaliser_in_the_package() -> None:
    decomposed = unicodedata.normalize("NFD", "RÉUNIONS/procès-verbal.docx")
    assert nfc(decomposed) == "RÉUNIONS/procès-verbal.docx" != decomposed
    copies = [
        f"{p.relative_to(PACKAGE)}:{n}"
        for p in PACKAGE.rglob("*.py")
        if not {"tests", ".venv", "build"} & set(p.relative_to(PACKAGE).parts) and p.name != "models.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if 'normalize("NFC"' in line
    ]
    assert copies == []


def test_wide_payload_dataclasses_take_keywords_only() -> None:
    with pytest.raises(TypeError):
        ChunkPayload("src", "K", "K.txt", "K.txt", "", 0, "t", ("g",), (), "h", 0.0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        SearchResult("p", "d", "f", "p", "", 0, 0.1, ("bm25",))  # type: ignore[misc]
