"""The SharePoint connector's cache of each document library: a *snapshot* of the drive — every
driveItem's name, parent, kind, size, ``quickXorHash``, permissions and labels — with the Graph
``deltaLink`` ("driveItem: delta") it was last brought to, so that a listing asks Graph only for
what changed. The snapshot caches listings; it never decides where the change feed resumes: the
feed resumes from the link the engine kept in its cursor, and the snapshot serves that cursor
only when it has handed that link out itself (:meth:`Drive.serves`: it is then at or past it).

:class:`Entry` is one driveItem, :class:`Drive` one library with its items and the tree walks
over them (:meth:`Drive.path`, :meth:`Drive.ancestors`, :meth:`Drive.attached`).
:class:`DriveSnapshotStore` keeps the snapshots in a SQLite file of the connector's own,
``<data_dir>/sharepoint.sqlite3``, table ``sharepoint_drive_snapshots(source, drive_id,
snapshot_json, updated_at)`` (WAL: the query side's connector reads what the daemon's writes,
while it writes). It is not the sync state DB: the engine's tables are not the connector's.
An install whose snapshots were kept in the state DB's ``meta`` table finds none here: its first
pass reads its libraries again from an empty delta (a full enumeration, as at installation).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ancre.models import nfc

FILE_NAME = "sharepoint.sqlite3"
"""The store's file name inside ancre's data directory."""

SERVED_MAX = 16
"""Delta links a snapshot remembers having handed to the change feed's cursor (the engine keeps
the last; a crash between a round and its cursor being kept replays an older one)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS sharepoint_drive_snapshots (
    source TEXT NOT NULL,
    drive_id TEXT NOT NULL,
    snapshot_json TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (source, drive_id)
);
"""


@dataclass
class Entry:
    """One driveItem of a snapshot. ``kind``: ``file`` / ``folder`` / ``package`` / ``root``.
    ``perms``: its Graph permission entries, or a ``str`` (why they could not be read), or
    ``None`` (not read yet). ``labels``: label ids and names (lower case), or a ``str`` (why
    they could not be read), or ``None`` (not read). ``size`` in bytes, ``mtime`` epoch seconds."""

    name: str
    parent: str | None
    kind: str
    size: int = 0
    qxh: str | None = None
    mtime: float = 0.0
    url: str = ""
    perms: list[dict[str, Any]] | str | None = None
    labels: list[str] | str | None = None
    ctag: str | None = None
    """Graph ``cTag`` (else ``eTag``): changes with the content *and* its embedded metadata (a
    label applied). Delta omits ``cTag`` in OneDrive for Business ("driveItem: delta", Remarks)."""
    package: str | None = None
    """``package.type`` of a package (``oneNote``)."""

    def dump(self) -> list[Any]:
        """The entry as a JSON list (field order)."""
        return [self.name, self.parent, self.kind, self.size, self.qxh, self.mtime, self.url, self.perms, self.labels,
                self.ctag, self.package]

    @classmethod
    def load(cls, row: list[Any]) -> Entry:
        """The entry :meth:`dump` wrote."""
        return cls(*row)


@dataclass
class Drive:
    """A document library: its site (Graph id, web URL, path segment), drive id, name, web URL,
    list id, root item id, snapshot ``items`` (item id → :class:`Entry`) and ``delta_link``, the
    link the snapshot was last brought to."""

    site_id: str
    site_url: str
    site_seg: str
    drive_id: str
    name: str
    url: str
    list_id: str | None = None
    root: str | None = None
    items: dict[str, Entry] = field(default_factory=dict)
    delta_link: str | None = None
    library: list[dict[str, Any]] | str | None = None
    """The library's role assignments (dumped), or why they could not be read."""
    rest_refused: str | None = None
    """Why the site's SharePoint REST refused the app (its site groups can't be resolved)."""
    served: list[str] = field(default_factory=list)
    """The delta links this snapshot handed to the change feed's cursor, oldest first (at most
    :data:`SERVED_MAX`): the snapshot is at or past each of them."""

    def serves(self, link: str) -> bool:
        """Whether this snapshot may answer a change-feed round resumed from ``link``: it handed
        that link out (or stands at it), so it holds every change up to it — a delta since
        ``link`` applied to it makes it current. A snapshot lost, restored from an older copy or
        written by another cursor's rounds does not serve it."""
        return link == self.delta_link or link in self.served

    def hand_out(self) -> bool:
        """Record :attr:`delta_link` as handed to the change feed's cursor; ``True`` when that
        changed the snapshot (to be saved)."""
        if self.delta_link is None or (self.served and self.served[-1] == self.delta_link):
            return False
        self.served = [*self.served, self.delta_link][-SERVED_MAX:]
        return True

    @property
    def prefix(self) -> str:
        """``<site segment>/<library name>`` (NFC): how its items' paths start."""
        return "/".join(x for x in (self.site_seg, nfc(self.name)) if x)

    def path(self, iid: str) -> str | None:
        """``<site>/<library>/<folders>/<name>`` of item ``iid``; ``None`` when not under the
        root or under a package."""
        parts: list[str] = []
        cur: str | None = iid
        seen: set[str] = set()
        while cur is not None and cur not in seen:
            seen.add(cur)
            e = self.items.get(cur)
            if e is None:
                return None
            if e.kind == "root":
                return "/".join([self.prefix, *reversed(parts)])
            if e.kind == "package" and cur != iid:
                return None
            parts.append(e.name)
            cur = e.parent
        return None

    def attached(self, iid: str) -> bool:
        """Whether ``iid``'s parents lead to the root (not under a deleted folder, no cycle)."""
        seen = set()
        cur: str | None = iid
        while cur is not None and cur not in seen:
            e = self.items.get(cur)
            if e is None:
                return False
            if e.kind == "root":
                return True
            seen.add(cur)
            cur = e.parent
        return False

    def ancestors(self, iid: str) -> list[str]:
        """The parent folders of ``iid``, nearest first, up to (not including) the root."""
        out: list[str] = []
        e = self.items.get(iid)
        cur = e.parent if e is not None else None
        while cur is not None and cur not in out:
            p = self.items.get(cur)
            if p is None or p.kind == "root":
                break
            out.append(cur)
            cur = p.parent
        return out

    def dumps(self) -> str:
        """The drive and its snapshot as compact JSON (read back by :meth:`loads`)."""
        snap = {
            "site_id": self.site_id, "site_url": self.site_url, "site_seg": self.site_seg, "name": self.name,
            "url": self.url, "root": self.root, "delta": self.delta_link, "list_id": self.list_id,
            "library": self.library, "rest_refused": self.rest_refused, "served": self.served,
            "items": {k: v.dump() for k, v in self.items.items()},
        }
        return json.dumps(snap, separators=(",", ":"))

    def restore(self, raw: str) -> None:
        """Take the snapshot (items, root, delta link, list id, library, REST refusal) of the JSON
        :meth:`dumps` wrote. Raises ``ValueError`` (``json.JSONDecodeError``) / ``KeyError`` /
        ``TypeError`` for a malformed one."""
        snap = json.loads(raw)
        self.root = snap.get("root")
        self.delta_link = snap.get("delta")
        self.list_id = snap.get("list_id")
        self.library = snap.get("library")
        self.rest_refused = snap.get("rest_refused")
        self.served = [str(x) for x in snap.get("served") or ()]
        self.items = {k: Entry.load(v) for k, v in snap.get("items", {}).items()}

    @classmethod
    def loads(cls, drive_id: str, raw: str) -> Drive:
        """The drive ``drive_id`` as :meth:`dumps` wrote it. Raises as :meth:`restore`."""
        snap = json.loads(raw)
        d = cls(snap["site_id"], snap["site_url"], snap["site_seg"], drive_id, snap["name"], snap["url"])
        d.restore(raw)
        return d


class DriveSnapshotStore:
    """The drive snapshots of every SharePoint source, in the SQLite file ``path`` (created if
    missing; WAL, so a reader in another process never blocks the writer). Thread-safe (one
    connection, one lock); :meth:`close` releases it (idempotent). Raises ``sqlite3.Error`` when
    the file can't be opened or written."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise sqlite3.ProgrammingError(f"{self.path}: snapshot store closed")
        return self._db

    def load(self, source: str, drive_id: str) -> str | None:
        """The snapshot JSON of drive ``drive_id`` of source ``source``, ``None`` if none kept."""
        with self._lock:
            row = self._conn().execute(
                "SELECT snapshot_json FROM sharepoint_drive_snapshots WHERE source = ? AND drive_id = ?",
                (source, drive_id),
            ).fetchone()
        return None if row is None else str(row[0])

    def save(self, source: str, drive_id: str, snapshot_json: str) -> None:
        """Keep (insert or replace) the snapshot of drive ``drive_id`` of source ``source``."""
        with self._lock:
            self._conn().execute(
                "INSERT OR REPLACE INTO sharepoint_drive_snapshots (source, drive_id, snapshot_json, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (source, drive_id, snapshot_json, time.time()),
            )

    def drive_ids(self, source: str) -> list[str]:
        """The drive ids of source ``source`` with a kept snapshot, sorted."""
        with self._lock:
            rows = self._conn().execute(
                "SELECT drive_id FROM sharepoint_drive_snapshots WHERE source = ? ORDER BY drive_id", (source,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        """Close the connection; calling it twice is harmless."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


__all__ = ["FILE_NAME", "SERVED_MAX", "Drive", "DriveSnapshotStore", "Entry"]
