"""SQLite state DB of the sync engine (stdlib sqlite3, WAL): what was indexed, per item.

A row is the engine's memory of one source item: size, mtime, content hash, ACL hash, chunk
count, status (``indexed`` / ``failed`` / ``skipped`` / ``pending``) and a reason: why it failed or
was skipped, or, on an ``indexed`` row, why its ACL could not be read (readable by nobody).
``pending`` is written *before* the store is touched for a document, so that a crash between the
store write and the state write leaves a row that the next pass reconciles (no ghost points).

``attempts`` counts the consecutive tries of a document's current version that failed or died
half-way (the sync engine's poison-pill guard), ``retry_at`` is the earliest time the next try may
run, ``extractor`` the extractor version that produced a failure (a new one retries it). Passes
record the ``pid`` that ran them so that a pass left open by a dead process is closed as
``crashed``. Databases of an older schema are migrated in place on open (columns added).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ancre.models import ItemStatus, PassOutcome

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    source TEXT NOT NULL,
    native_id TEXT NOT NULL,
    path TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    collection TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL,
    etag TEXT,
    content_hash TEXT,
    acl_hash TEXT,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    reason TEXT,
    updated_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    retry_at REAL,
    extractor TEXT,
    PRIMARY KEY (source, native_id)
);
CREATE INDEX IF NOT EXISTS items_status ON items(status);
CREATE TABLE IF NOT EXISTS passes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    outcome TEXT,
    summary TEXT,
    pid INTEGER
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_ADDED_COLUMNS = {
    "items": (
        ("attempts", "INTEGER NOT NULL DEFAULT 0"),
        ("retry_at", "REAL"),
        ("extractor", "TEXT"),
    ),
    "passes": (("pid", "INTEGER"),),
}
"""Columns added after the first schema: ``ALTER TABLE … ADD COLUMN`` on an older database."""


@dataclass(frozen=True, kw_only=True)
class ItemState:
    """One row of ``items`` (see module docstring); ``mtime``/``updated_at`` in epoch seconds.
    Built by keyword only."""

    source: str
    native_id: str
    path: str
    doc_id: str
    collection: str
    size: int
    mtime: float
    etag: str | None
    content_hash: str | None
    acl_hash: str | None
    chunk_count: int
    status: ItemStatus
    reason: str | None
    updated_at: float
    attempts: int = 0
    retry_at: float | None = None
    extractor: str | None = None


class StateDB:
    """The state DB at ``path`` (created on first use). Thread-safe (one connection, one lock)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns a database created by an older ancre lacks (values: their defaults)."""
        with self._tx() as db:
            for table, columns in _ADDED_COLUMNS.items():
                have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                for name, decl in columns:
                    if name not in have:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def items(self, source: str) -> dict[str, ItemState]:
        """All rows of ``source`` keyed by ``native_id``."""
        with self._lock:
            cur = self._db.execute(f"SELECT {', '.join(ItemState.__dataclass_fields__)} FROM items WHERE source = ?", (source,))
            return {row[1]: _row(row) for row in cur.fetchall()}

    def all_items(self) -> list[ItemState]:
        """Every row of every source."""
        with self._lock:
            cur = self._db.execute(f"SELECT {', '.join(ItemState.__dataclass_fields__)} FROM items ORDER BY source, path")
            return [_row(row) for row in cur.fetchall()]

    def put(self, st: ItemState) -> None:
        """Insert or replace one row, durably (committed before returning)."""
        with self._tx() as db:
            db.execute(
                f"INSERT OR REPLACE INTO items ({', '.join(ItemState.__dataclass_fields__)}) "
                f"VALUES ({', '.join('?' * len(ItemState.__dataclass_fields__))})",
                tuple(getattr(st, f) for f in ItemState.__dataclass_fields__),
            )

    def get(self, source: str, native_id: str) -> ItemState | None:
        """One row, ``None`` if absent."""
        with self._lock:
            cur = self._db.execute(
                f"SELECT {', '.join(ItemState.__dataclass_fields__)} FROM items WHERE source = ? AND native_id = ?",
                (source, native_id),
            )
            row = cur.fetchone()
            return None if row is None else _row(row)

    def set_acl_hash(self, source: str, doc_id: str, acl_hash: str, *, reason: str | None = None) -> bool:
        """Record a new ACL digest for the *indexed* document ``doc_id`` of ``source`` (its new ACL
        was already written to the store: by the query core's live check, or the daemon's rights
        lane), so that the next pass sees no ACL-only change left to apply; ``reason``: why that
        ACL admits nobody when it could not be read (:func:`ancre.acl.engine.acl_problem`), else
        ``None``. One atomic UPDATE: a row a pass holds as ``pending`` (or failed/skipped) is left
        to that pass. Returns whether a row changed."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE items SET acl_hash = ?, reason = ?, updated_at = ? "
                "WHERE source = ? AND doc_id = ? AND status = ?",
                (acl_hash, reason, time.time(), source, doc_id, ItemStatus.INDEXED),
            )
            return cur.rowcount > 0

    def delete(self, source: str, native_id: str) -> None:
        """Forget one item."""
        with self._tx() as db:
            db.execute("DELETE FROM items WHERE source = ? AND native_id = ?", (source, native_id))

    def delete_source(self, source: str) -> None:
        """Forget every item of a source (reindex)."""
        with self._tx() as db:
            db.execute("DELETE FROM items WHERE source = ?", (source,))

    def begin_pass(self, source: str) -> int:
        """Record the start of a pass (with this process's pid); returns its id. Passes left open
        by a process that no longer runs are closed first (:meth:`close_stale_passes`)."""
        self.close_stale_passes()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO passes (source, started_at, pid) VALUES (?, ?, ?)", (source, time.time(), os.getpid())
            )
            return int(cur.lastrowid or 0)

    def close_stale_passes(self) -> int:
        """Close every pass without an end whose process is gone (killed, crashed, power cut):
        outcome ``crashed``, ended now. Returns how many were closed."""
        with self._tx() as db:
            rows = db.execute("SELECT id, pid FROM passes WHERE finished_at IS NULL").fetchall()
            stale = [pid_row for pid_row in rows if not _alive(pid_row[1])]
            summary = json.dumps({"outcome": PassOutcome.CRASHED, "reason": "the process running the pass ended before it did"})
            for pass_id, _pid in stale:
                db.execute(
                    "UPDATE passes SET finished_at = ?, outcome = ?, summary = ? WHERE id = ?",
                    (time.time(), PassOutcome.CRASHED, summary, pass_id),
                )
            return len(stale)

    def end_pass(self, pass_id: int, outcome: PassOutcome, summary: str) -> None:
        """Record the end of a pass (``outcome`` stored as its string; ``summary`` JSON)."""
        with self._tx() as db:
            db.execute(
                "UPDATE passes SET finished_at = ?, outcome = ?, summary = ? WHERE id = ?",
                (time.time(), outcome, summary, pass_id),
            )

    def last_passes(self, limit: int = 10) -> list[tuple[str, float, float | None, str | None, str | None]]:
        """The latest passes: ``(source, started_at, finished_at, outcome, summary)``, newest first."""
        with self._lock:
            cur = self._db.execute(
                "SELECT source, started_at, finished_at, outcome, summary FROM passes ORDER BY id DESC LIMIT ?",
                (limit,),
            )
            return list(cur.fetchall())

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``meta`` table."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def _row(row: tuple[Any, ...]) -> ItemState:
    """An ``items`` row (columns in :class:`ItemState` field order) as an :class:`ItemState`."""
    fields = dict(zip(ItemState.__dataclass_fields__, row, strict=True))
    fields["status"] = ItemStatus(fields["status"])
    return ItemState(**fields)


def _alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs (``None``, from a database older than the ``pid`` column,
    counts as gone). This process counts as alive: its own open pass is running."""
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
