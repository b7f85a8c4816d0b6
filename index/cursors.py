"""The change-feed cursors the engine keeps (docs/ARCHITECTURE.md "Change detection").

A :class:`~ancre.connectors.base.ChangeFeed` returns its next cursor with every batch of changes;
the daemon keeps it here, one row per source, and hands it back at the next call (across
restarts too). Table ``source_cursors(source TEXT PRIMARY KEY, kind TEXT, value TEXT,
updated_at REAL)`` in the state DB's file, on a connection of its own: ``kind`` names the
cursor's pydantic model (``module.QualName``), ``value`` is its JSON, ``updated_at`` epoch
seconds. A row whose kind is not the feed's cursor model any more, or whose JSON no longer
validates against it (the source's config or ancre changed), is dropped and logged; the feed is
then called with ``None`` (a new baseline; the daemon's startup pass covers what came before).
No source reads or writes this table: the engine does.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

log = logging.getLogger("ancre.index.cursors")

SCHEMA = """
CREATE TABLE IF NOT EXISTS source_cursors (
    source TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""

M = TypeVar("M", bound=BaseModel)


def cursor_kind(model: type[BaseModel]) -> str:
    """The ``kind`` recorded for a cursor of pydantic model ``model``: ``module.QualName``."""
    return f"{model.__module__}.{model.__qualname__}"


@dataclass(frozen=True)
class StoredCursor:
    """One row of ``source_cursors``: ``kind`` (see :func:`cursor_kind`), ``value`` (JSON text)
    and ``updated_at`` (epoch seconds)."""

    source: str
    kind: str
    value: str
    updated_at: float


class CursorStore:
    """The ``source_cursors`` table of the SQLite file at ``path`` (the state DB's; created if
    missing). Thread-safe (one connection, one lock); :meth:`close` releases it."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def get(self, source: str) -> StoredCursor | None:
        """The row of ``source``, ``None`` when none is kept."""
        with self._lock:
            row = self._db.execute(
                "SELECT source, kind, value, updated_at FROM source_cursors WHERE source = ?", (source,)
            ).fetchone()
        return StoredCursor(*row) if row else None

    def set(self, source: str, kind: str, value: str) -> None:
        """Keep ``value`` (JSON text) of model ``kind`` as ``source``'s cursor (replacing any)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO source_cursors(source, kind, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(source) DO UPDATE SET kind = excluded.kind, value = excluded.value, "
                "updated_at = excluded.updated_at",
                (source, kind, value, time.time()),
            )

    def delete(self, source: str) -> None:
        """Forget ``source``'s cursor (nothing when none is kept)."""
        with self._lock:
            self._db.execute("DELETE FROM source_cursors WHERE source = ?", (source,))

    def sources(self) -> list[str]:
        """The sources that have a cursor, sorted."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT source FROM source_cursors ORDER BY source")]

    def load(self, source: str, model: type[M]) -> M | None:
        """``source``'s cursor as a ``model`` instance; ``None`` when none is kept, or when the
        kept one is of another model or no longer validates (then it is deleted and logged)."""
        row = self.get(source)
        if row is None:
            return None
        if row.kind != cursor_kind(model):
            log.warning("cursor of %s is a %s, not a %s: dropped", source, row.kind, cursor_kind(model))
            self.delete(source)
            return None
        try:
            return model.model_validate_json(row.value)
        except ValidationError as e:
            log.warning("cursor of %s no longer validates (%d error(s): %s): dropped", source, e.error_count(), e)
            self.delete(source)
            return None

    def save(self, source: str, cursor: BaseModel) -> None:
        """Keep ``cursor`` (any pydantic model) as ``source``'s cursor."""
        self.set(source, cursor_kind(type(cursor)), cursor.model_dump_json())

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._db.close()


__all__ = ["CursorStore", "StoredCursor", "cursor_kind"]
