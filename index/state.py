"""SQLite state DB of the sync engine (stdlib sqlite3, WAL): what was indexed, per item.

A row is the engine's memory of one source item: size, mtime, content hash, ACL hash, chunk
count, status (``indexed`` / ``failed`` / ``skipped`` / ``pending``), why it failed or was skipped
(``reason_code``, a :class:`~ancre.models.ReasonCode`, and ``detail``, the per-file prose) and, on an
``indexed`` row, why its ACL could not be read (``acl_problem``: readable by nobody).
``pending`` is written *before* the store is touched for a document, so that a crash between the
store write and the state write leaves a row that the next pass reconciles (no ghost points).

``attempts`` counts the consecutive tries of a document's current version that failed or died
half-way (the sync engine's poison-pill guard), ``retry_at`` is the earliest time the next try may
run, ``extractor`` the extractor version that produced a failure (a new one retries it),
``chunking`` the chunk format an indexed row's points were written in
(:data:`~ancre.models.CHUNK_FORMAT`: an older one is re-indexed by the next pass). Passes
record the ``pid`` that ran them so that a pass left open by a dead process is closed as
``crashed``. Databases of an older schema are migrated in place on open (columns added; the
single ``reason`` column of old databases split once into those three, see :func:`split_legacy_reason`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ancre.errors import DiskFullError, StateDamagedError
from ancre.index.disk_space import free_bytes, is_disk_full
from ancre.models import ItemStatus, PassOutcome, ReasonCode

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
    reason_code TEXT,
    detail TEXT,
    acl_problem TEXT,
    updated_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    retry_at REAL,
    extractor TEXT,
    chunking TEXT,
    PRIMARY KEY (source, native_id)
);
CREATE INDEX IF NOT EXISTS items_status ON items(status);
CREATE INDEX IF NOT EXISTS items_content ON items(content_hash);
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
        ("reason_code", "TEXT"),
        ("detail", "TEXT"),
        ("acl_problem", "TEXT"),
        ("chunking", "TEXT"),
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
    reason_code: ReasonCode | None = None
    """Why a ``failed`` / ``skipped`` row is so; ``None`` on other rows."""
    detail: str | None = None
    """The per-file prose of ``reason_code`` (sizes, page counts, the try count…)."""
    acl_problem: str | None = None
    """On an ``indexed`` row: why its ACL admits nobody (:func:`ancre.acl.engine.acl_problem`)."""
    updated_at: float
    attempts: int = 0
    retry_at: float | None = None
    extractor: str | None = None
    chunking: str | None = None
    """On an ``indexed`` row: the chunk format its points were written in
    (:data:`~ancre.models.CHUNK_FORMAT`); ``None``: written before subjects (re-indexed by the
    next pass)."""

    @property
    def reason(self) -> str | None:
        """The human-readable reason shown to admins: ``"<code>: <detail>"`` on a ``failed`` /
        ``skipped`` row (:meth:`ReasonCode.text <ancre.models.ReasonCode.text>`), the ACL problem
        on an ``indexed`` one, else ``None``. For display only: code reads the columns."""
        if self.reason_code is not None:
            return self.reason_code.text(self.detail)
        return self.acl_problem


class StateDB:
    """The state DB at ``path`` (created on first use). Thread-safe (one connection, one lock)."""

    def __init__(self, path: Path) -> None:
        """Open (or create) the database; checks it first (``PRAGMA quick_check``: a tenth of a
        second for 200,000 rows). Raises :class:`~ancre.errors.StateDamagedError` when it is
        damaged, :class:`~ancre.errors.DiskFullError` when it can't be written for want of space."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        except sqlite3.OperationalError as e:
            raise denied_or(e, path) from e
        try:
            with sqlite_errors(path):
                try:
                    self._db.execute("PRAGMA journal_mode=WAL")
                except sqlite3.OperationalError as e:
                    raise denied_or(e, path) from e
                self._db.execute("PRAGMA synchronous=FULL")
                check = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(5)").fetchall()]
                if check != ["ok"]:
                    raise StateDamagedError(damaged_message(path, "; ".join(check)))
                self._db.executescript(SCHEMA)
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _migrate(self) -> None:
        """Add the columns a database created by an older ancre lacks (values: their defaults),
        then move its ``reason`` column into ``reason_code`` / ``detail`` / ``acl_problem`` and
        drop it (:meth:`_split_reasons`), and delete the SharePoint snapshots an older ancre kept
        in ``meta``. One transaction: a crash leaves the old schema."""
        with self._tx() as db:
            for table, columns in _ADDED_COLUMNS.items():
                have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                for name, decl in columns:
                    if name not in have:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
            if "reason" in {row[1] for row in db.execute("PRAGMA table_info(items)")}:
                _split_reasons(db)
            # SharePoint drive snapshots and delta links an older ancre kept here: the connector
            # keeps its own now (connectors/sharepoint/snapshot.py) and reads each library anew
            db.execute("DELETE FROM meta WHERE key LIKE 'sharepoint:%'")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, sqlite_errors(self.path):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                with suppress(sqlite3.Error):  # a failed COMMIT (disk full) may have ended it
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """The connection's lock, SQLite's errors translated (:func:`sqlite_errors`)."""
        with self._lock, sqlite_errors(self.path):
            yield

    def items(self, source: str) -> dict[str, ItemState]:
        """All rows of ``source`` keyed by ``native_id``."""
        with self._reading():
            cur = self._db.execute(f"SELECT {', '.join(ItemState.__dataclass_fields__)} FROM items WHERE source = ?", (source,))
            return {row[1]: _row(row) for row in cur.fetchall()}

    def all_items(self) -> list[ItemState]:
        """Every row of every source."""
        with self._reading():
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
        with self._reading():
            cur = self._db.execute(
                f"SELECT {', '.join(ItemState.__dataclass_fields__)} FROM items WHERE source = ? AND native_id = ?",
                (source, native_id),
            )
            row = cur.fetchone()
            return None if row is None else _row(row)

    def indexed_copy(self, content_hash: str, doc_id: str) -> ItemState | None:
        """An *indexed* row of another document than ``doc_id`` whose file has the same content
        (``content_hash``, SHA-256 of the bytes) and chunks, ``None`` if there is none: the sync's
        writer reuses its stored vectors for a copy of that file. One indexed lookup."""
        with self._reading():
            cur = self._db.execute(
                f"SELECT {', '.join(ItemState.__dataclass_fields__)} FROM items "
                "WHERE content_hash = ? AND status = ? AND doc_id != ? AND chunk_count > 0 LIMIT 1",
                (content_hash, ItemStatus.INDEXED.value, doc_id),
            )
            row = cur.fetchone()
            return None if row is None else _row(row)

    def set_acl_hash(self, source: str, doc_id: str, acl_hash: str, *, acl_problem: str | None = None) -> bool:
        """Record a new ACL digest for the *indexed* document ``doc_id`` of ``source`` (its new ACL
        was already written to the store: by the query core's live check, or the daemon's rights
        lane), so that the next pass sees no ACL-only change left to apply; ``acl_problem``: why
        that ACL admits nobody when it could not be read (:func:`ancre.acl.engine.acl_problem`),
        else ``None``. One atomic UPDATE: a row a pass holds as ``pending`` (or failed/skipped) is
        left to that pass. Returns whether a row changed."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE items SET acl_hash = ?, acl_problem = ?, updated_at = ? "
                "WHERE source = ? AND doc_id = ? AND status = ?",
                (acl_hash, acl_problem, time.time(), source, doc_id, ItemStatus.INDEXED),
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
        with self._reading():
            cur = self._db.execute(
                "SELECT source, started_at, finished_at, outcome, summary FROM passes ORDER BY id DESC LIMIT ?",
                (limit,),
            )
            return list(cur.fetchall())

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table."""
        with self._reading():
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


def denied_or(e: sqlite3.OperationalError, path: Path) -> Exception:
    """The error to raise when SQLite can't open the database ``path``: a :class:`PermissionError`
    naming the file or the folder this user may not use (sqlite3 only says "unable to open
    database file"), else ``e`` itself."""
    for where, mode in ((path.parent, os.X_OK | os.W_OK), (path, os.R_OK | os.W_OK)):
        if where.exists() and not os.access(where, mode):
            return PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(where))
    return e


_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 11, 13, 26
"""SQLite's primary result codes (https://www.sqlite.org/rescode.html): a damaged file, a full
disk, a file that is not a database."""


def damaged_message(path: Path, detail: str) -> str:
    """What :class:`~ancre.errors.StateDamagedError` says: the file, SQLite's finding, the way back."""
    return (
        f"the state database {path} is damaged ({detail[:300]}): run `ancre reindex --config <file>` (stop the service "
        "first; copy the file elsewhere first to keep it) — it replaces the state database and rebuilds the index "
        "from the sources, reading and embedding every document again"
    )


@contextmanager
def sqlite_errors(path: Path) -> Iterator[None]:
    """SQLite's errors on the state database at ``path`` as ancre's: a damaged file (``SQLITE_CORRUPT``,
    ``SQLITE_NOTADB``: "database disk image is malformed") as
    :class:`~ancre.errors.StateDamagedError` naming it and the way back, a full disk
    (``SQLITE_FULL``, or an I/O error quoting ``ENOSPC``) as :class:`~ancre.errors.DiskFullError`;
    the others pass."""
    try:
        yield
    except sqlite3.DatabaseError as e:
        code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in str(e) or "not a database" in str(e):
            raise StateDamagedError(damaged_message(path, str(e))) from None
        if code == _SQLITE_FULL or is_disk_full(e):
            raise DiskFullError(path.parent, free=_free(path.parent), needed=0, what="the state database's writes") from e
        raise


def _free(folder: Path) -> int:
    try:
        return free_bytes(folder)
    except OSError:
        return 0


def _row(row: tuple[Any, ...]) -> ItemState:
    """An ``items`` row (columns in :class:`ItemState` field order) as an :class:`ItemState`."""
    fields = dict(zip(ItemState.__dataclass_fields__, row, strict=True))
    fields["status"] = ItemStatus(fields["status"])
    if fields["reason_code"] is not None:
        fields["reason_code"] = ReasonCode(fields["reason_code"])
    return ItemState(**fields)


_CODES = frozenset(c.value for c in ReasonCode)


def split_legacy_reason(reason: str) -> tuple[ReasonCode, str | None]:
    """The ``(reason_code, detail)`` of a ``failed`` / ``skipped`` row's ``reason`` written by an
    older ancre (``"<code>: <detail>"``, ``"<code> (try 1 of 3)"`` or a source's own words such as
    ``"symlink"``): its leading word when that is a :class:`~ancre.models.ReasonCode`, the rest as
    detail (``None`` when empty); otherwise :attr:`~ancre.models.ReasonCode.NOT_READ` with the
    whole text. Used once, by the migration; ``"corrupt: bad xref"`` → ``(CORRUPT, "bad xref")``."""
    m = re.match(r"\s*([a-z_]+)(?=:|\s|$)[:\s]*(.*)", reason, re.DOTALL)
    if m is not None and m.group(1) in _CODES:
        return ReasonCode(m.group(1)), m.group(2).strip() or None
    return ReasonCode.NOT_READ, reason


def _split_reasons(db: sqlite3.Connection) -> None:
    """Move each row's old ``reason`` into the new columns — ``acl_problem`` on ``indexed`` rows,
    ``reason_code`` + ``detail`` (:func:`split_legacy_reason`) on ``failed`` / ``skipped`` ones,
    ``detail`` on any other — then drop the ``reason`` column."""
    rows = db.execute("SELECT source, native_id, status, reason FROM items WHERE reason IS NOT NULL").fetchall()
    for source, native_id, status, reason in rows:
        code: ReasonCode | None = None
        detail: str | None = None
        problem: str | None = None
        if status == ItemStatus.INDEXED:
            problem = reason
        elif status in (ItemStatus.FAILED, ItemStatus.SKIPPED):
            code, detail = split_legacy_reason(reason)
        else:
            detail = reason
        db.execute(
            "UPDATE items SET reason_code = ?, detail = ?, acl_problem = ? WHERE source = ? AND native_id = ?",
            (code, detail, problem, source, native_id),
        )
    if sqlite3.sqlite_version_info >= (3, 35, 0):
        db.execute("ALTER TABLE items DROP COLUMN reason")
    else:  # no DROP COLUMN before SQLite 3.35: the emptied column stays, unread
        db.execute("UPDATE items SET reason = NULL")


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
