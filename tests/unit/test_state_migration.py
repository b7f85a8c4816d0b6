"""The state DB of an older ancre is migrated in place (retry columns, pass pid), and
a pass left open by a process that died is closed as ``crashed``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

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
