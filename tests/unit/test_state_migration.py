"""The state DB of an older ancre is migrated in place (retry columns, pass pid), and
a pass left open by a process that died is closed as ``crashed``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from ancre.daemon.metrics import DaemonMetrics
from ancre.daemon.progress import index_status
from ancre.index.state import ItemState, StateDB
from ancre.models import ItemStatus, PassOutcome, ReasonCode

OLD_SCHEMA = """
CREATE TABLE items (
    source TEXT NOT NULL, native_id TEXT NOT NULL, path TEXT NOT NULL, doc_id TEXT NOT NULL,
    collection TEXT NOT NULL, size INTEGER NOT NULL, mtime REAL NOT NULL, etag TEXT,
    content_hash TEXT, acl_hash TEXT, chunk_count INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL,
    reason TEXT, updated_at REAL NOT NULL, PRIMARY KEY (source, native_id)
);
CREATE INDEX items_status ON items(status);
CREATE TABLE passes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, started_at REAL NOT NULL,
    finished_at REAL, outcome TEXT, summary TEXT
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def test_old_database_is_migrated_and_its_open_pass_closed(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute(
        "INSERT INTO items VALUES ('s', 'a.docm', 'a.docm', 's:a.docm', 'documents', 10, 1.0, NULL, 'h', NULL, 0,"
        " 'skipped', 'unsupported: extension ''.docm''', 2.0)"
    )
    db.execute("INSERT INTO passes (source, started_at) VALUES ('s', 1.0)")  # killed mid-pass, long ago
    db.commit()
    db.close()

    state = StateDB(path)
    try:
        (row,) = state.all_items()
        assert row == ItemState(
            source="s", native_id="a.docm", path="a.docm", doc_id="s:a.docm", collection="documents", size=10,
            mtime=1.0, etag=None, content_hash="h", acl_hash=None, chunk_count=0, status=ItemStatus.SKIPPED,
            reason_code=ReasonCode.UNSUPPORTED, detail="extension '.docm'", updated_at=2.0, attempts=0, retry_at=None, extractor=None,
        )
        state.put(ItemState(**{**row.__dict__, "attempts": 2, "retry_at": 5.0, "extractor": "2:x"}))
        assert state.all_items()[0].attempts == 2
        new_id = state.begin_pass("s")
        passes = state.last_passes(5)
        assert passes[0][2] is None  # the new pass, running
        old = passes[1]
        assert old[3] == "crashed" and old[2] is not None and "ended before" in json.loads(old[4])["reason"]
        state.end_pass(new_id, PassOutcome.OK, "{}")
    finally:
        state.close()
    StateDB(path).close()  # opening a migrated database again changes nothing


def test_open_pass_of_a_live_process_is_left_alone(tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state.sqlite3")
    try:
        mine = state.begin_pass("a")  # this process: running
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=False, capture_output=True, text=True)
        try:
            with state._tx() as db:
                db.execute("INSERT INTO passes (source, started_at, pid) VALUES ('b', 1.0, ?)", (sleeper.pid,))
                db.execute("INSERT INTO passes (source, started_at, pid) VALUES ('c', 1.0, ?)", (int(dead.stdout),))
            assert state.close_stale_passes() == 1
            by_source = {p[0]: p for p in state.last_passes(10)}
            assert by_source["a"][3] is None and by_source["b"][3] is None  # alive: still running
            assert by_source["c"][3] == "crashed"
        finally:
            sleeper.kill()
            sleeper.wait()
        state.end_pass(mine, PassOutcome.OK, "{}")
    finally:
        state.close()


REASON_SCHEMA = """
CREATE TABLE items (
    source TEXT NOT NULL, native_id TEXT NOT NULL, path TEXT NOT NULL, doc_id TEXT NOT NULL,
    collection TEXT NOT NULL, size INTEGER NOT NULL, mtime REAL NOT NULL, etag TEXT,
    content_hash TEXT, acl_hash TEXT, chunk_count INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL,
    reason TEXT, updated_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, retry_at REAL, extractor TEXT,
    PRIMARY KEY (source, native_id)
);
CREATE INDEX items_status ON items(status);
CREATE TABLE passes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, started_at REAL NOT NULL,
    finished_at REAL, outcome TEXT, summary TEXT, pid INTEGER
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
"""The schema with one ``reason`` column for both failures and ACL problems."""

# (file, status, old reason) -> (reason_code, detail, acl_problem) after the migration
OLD_REASONS = {
    ("scan.pdf", "skipped", "no_text_layer: 3 of 3 pages are images without text; OCR disabled"):
        (ReasonCode.NO_TEXT_LAYER, "3 of 3 pages are images without text; OCR disabled", None),
    ("img.png", "skipped", "unsupported: extension '.png'"): (ReasonCode.UNSUPPORTED, "extension '.png'", None),
    ("lien", "skipped", "symlink"): (ReasonCode.NOT_READ, "symlink", None),
    ("boucle", "skipped", "symlink: loop"): (ReasonCode.NOT_READ, "symlink: loop", None),
    ("dfs", "skipped", "dfs link (dfs = false)"): (ReasonCode.NOT_READ, "dfs link (dfs = false)", None),
    ("lent.pdf", "failed", "timeout: 30 s (try 1 of 3)"): (ReasonCode.TIMEOUT, "30 s (try 1 of 3)", None),
    ("mort.pdf", "failed", "crashed (gave up after 3 tries; tried again when the file changes)"):
        (ReasonCode.CRASHED, "(gave up after 3 tries; tried again when the file changes)", None),
    ("casse.docx", "failed", "corrupt: bad zip: File is not a zip file"):
        (ReasonCode.CORRUPT, "bad zip: File is not a zip file", None),
    ("ferme.docx", "indexed", "acl_unreadable: truncated descriptor"):
        (None, None, "acl_unreadable: truncated descriptor"),
    ("ace.docx", "indexed", "unsupported allowed-object ACE for S-1-5-21-1: applied to nobody"):
        (None, None, "unsupported allowed-object ACE for S-1-5-21-1: applied to nobody"),
    ("ok.docx", "indexed", None): (None, None, None),
    ("encours.docx", "pending", None): (None, None, None),
}


def _old_reason_db(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(REASON_SCHEMA)
    for name, status, reason in OLD_REASONS:
        db.execute(
            "INSERT INTO items VALUES ('s', ?, ?, ?, 'documents', 10, 1.0, NULL, 'h', 'a', 1, ?, ?, 2.0, 0, NULL, '7:x')",
            (name, name, f"s:{name}", status, reason),
        )
    db.commit()
    db.close()


def test_old_reason_column_is_split_into_code_detail_and_acl_problem(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    _old_reason_db(path)
    state = StateDB(path)
    try:
        rows = {r.path: r for r in state.all_items()}
        assert {
            (name, status, reason): (rows[name].reason_code, rows[name].detail, rows[name].acl_problem)
            for name, status, reason in OLD_REASONS
        } == OLD_REASONS
        assert all(type(r.reason_code) is ReasonCode for r in rows.values() if r.reason_code is not None)
        # what admins read is the text they read before
        assert {name: rows[name].reason for name, _, _ in OLD_REASONS} == {name: r for name, _, r in OLD_REASONS}
    finally:
        state.close()
    raw = sqlite3.connect(path)
    try:
        columns = {row[1] for row in raw.execute("PRAGMA table_info(items)")}
        assert "reason" not in columns and {"reason_code", "detail", "acl_problem"} <= columns
    finally:
        raw.close()
    again = StateDB(path)  # opening a migrated database again changes nothing
    try:
        assert {r.path: r for r in again.all_items()} == rows
    finally:
        again.close()


def test_status_and_metrics_read_the_columns_of_a_migrated_db(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    _old_reason_db(path)
    state = StateDB(path)
    try:
        out = index_status(state, 0)
        metrics = DaemonMetrics()
        metrics.refresh_state(state.all_items())
    finally:
        state.close()
    assert {(p["path"], p["problem"], p["reason"]) for p in out["problems"]} == {
        (name, status if status != "indexed" else "acl_unreadable", reason)
        for name, status, reason in OLD_REASONS if status != "indexed" or reason
    }
    assert out["acl_unreadable"] == {"s": 2}
    assert {(k["reason"], k["n"]) for k in out["skipped"]} == {
        ("no_text_layer", 1), ("unsupported: extension '.png'", 1), ("symlink", 1), ("symlink: loop", 1),
        ("dfs link (dfs = false)", 1),
    }
    labels = {
        (s.labels["status"], s.labels["reason"]): s.value
        for m in metrics.registry.collect() if m.name == "ancre_item_problems" for s in m.samples
    }
    assert labels == {
        ("skipped", "no_text_layer"): 1, ("skipped", "unsupported"): 1, ("skipped", "not_read"): 3,
        ("failed", "timeout"): 1, ("failed", "crashed"): 1, ("failed", "corrupt"): 1,
        ("acl_unreadable", "acl_problem"): 2, ("pending", "none"): 1,
    }


def test_acl_digest_update_writes_the_acl_problem_column(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    _old_reason_db(path)
    state = StateDB(path)
    try:
        assert state.set_acl_hash("s", "s:ok.docx", "b", acl_problem="acl_unreadable: gone") is True
        assert state.set_acl_hash("s", "s:ferme.docx", "c") is True
        rows = {r.path: r for r in state.all_items()}
        assert (rows["ok.docx"].acl_problem, rows["ok.docx"].reason_code) == ("acl_unreadable: gone", None)
        assert rows["ferme.docx"].acl_problem is None and rows["ferme.docx"].reason is None
        assert state.set_acl_hash("s", "s:casse.docx", "d", acl_problem="x") is False  # failed rows: left alone
    finally:
        state.close()


def test_sharepoint_snapshots_an_older_ancre_kept_in_meta_are_deleted(tmp_path: Path) -> None:
    """The SharePoint connector keeps its drive snapshots in a store of its own: the copies an
    older ancre wrote in the state DB's ``meta`` table go at the next open, other keys stay."""
    path = tmp_path / "state.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("sharepoint:sp:b!drive1", json.dumps({"items": {}})), ("sharepoint:sp:drives", '["b!drive1"]'),
        ("bm25_dirty", "1"),
    ])
    db.commit()
    db.close()
    state = StateDB(path)
    try:
        assert state.get_meta("sharepoint:sp:b!drive1") is None and state.get_meta("sharepoint:sp:drives") is None
        assert state.get_meta("bm25_dirty") == "1"
    finally:
        state.close()
