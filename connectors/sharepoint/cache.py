"""The SharePoint connector's libraries in memory (:class:`DriveCache`): each drive's snapshot, read
from and written to the connector's own store (:class:`~ancre.connectors.sharepoint.snapshot.DriveSnapshotStore`),
and the lookups over them — an item by its path, by its native id. A cache of listings: where the
change feed resumes is the engine's cursor, never this (module doc of
:mod:`ancre.connectors.sharepoint.connector`)."""

from __future__ import annotations

import threading

from ancre.connectors.sharepoint.snapshot import Drive, DriveSnapshotStore


class DriveCache:
    """The drives of source ``source_id`` kept in ``store``. Not locked itself: its owner (the
    connector) holds ``lock`` (reentrant) around every use."""

    def __init__(self, source_id: str, store: DriveSnapshotStore) -> None:
        self.source_id = source_id
        self.store = store
        self.lock = threading.RLock()
        self.drives: dict[str, Drive] = {}
        """Drive id → its snapshot, as this connector last read or refreshed it."""
        self.listed: list[str] = []
        """The drive ids the last listing refreshed (the others were refused or not selected)."""
        self._paths: dict[str, tuple[str, str]] | None = None
        self._loaded = False

    def adopt(self, drive: Drive) -> Drive:
        """``drive`` as discovered, with the snapshot kept for it (the one in memory, else the
        store's)."""
        have = self.drives.get(drive.drive_id)
        if have is not None:
            return have
        raw = self.store.load(self.source_id, drive.drive_id)
        if raw:
            drive.restore(raw)
        self.drives[drive.drive_id] = drive
        self._paths = None
        return drive

    def save(self, drive: Drive) -> None:
        """Keep ``drive``'s snapshot in the store (and forget the path index: it may have moved)."""
        self._paths = None
        self.store.save(self.source_id, drive.drive_id, drive.dumps())

    def changed(self) -> None:
        """Forget the path index (a snapshot changed in memory)."""
        self._paths = None

    def load_saved(self, *, again: bool = False) -> None:
        """Every drive snapshot of this source kept in the store (a connector that has not
        listed yet — the query side's — finds items by path through them). ``again``: re-read
        them (another process — the daemon — may have applied deltas since), except the drives
        this connector refreshed itself."""
        if self._loaded and not again:
            return
        self._loaded = True
        self._paths = None
        for drive_id in self.store.drive_ids(self.source_id):
            if drive_id in self.drives and (not again or drive_id in self.listed):
                continue
            self.drives.pop(drive_id, None)
            raw = self.store.load(self.source_id, drive_id)
            if raw:
                self.drives[drive_id] = Drive.loads(drive_id, raw)

    def path_index(self) -> dict[str, tuple[str, str]]:
        """path → (drive id, item id) of every item, rebuilt after any snapshot change."""
        if self._paths is None:
            index: dict[str, tuple[str, str]] = {}
            for d in self.drives.values():
                for iid in d.items:
                    p = d.path(iid)
                    if p is not None:
                        index[p] = (d.drive_id, iid)
            self._paths = index
        return self._paths

    def find(self, path: str) -> tuple[Drive, str] | None:
        """The drive and item id at ``path``; a miss re-reads the saved snapshots once (a
        connector of the query side finds what the daemon listed since)."""
        with self.lock:
            self.load_saved()
            hit = self.path_index().get(path)
            if hit is None:
                self.load_saved(again=True)
                hit = self.path_index().get(path)
            if hit is None or hit[0] not in self.drives:
                return None
            return self.drives[hit[0]], hit[1]

    def locate(self, native_id: str) -> tuple[Drive, str] | None:
        """The drive and item id of ``<drive id>/<item id>``, ``None`` when not in a snapshot."""
        drive_id, _, iid = native_id.partition("/")
        with self.lock:
            self.load_saved()
            d = self.drives.get(drive_id)
            return (d, iid) if d is not None and iid in d.items else None

    def close(self) -> None:
        """Close the snapshot store; idempotent."""
        self.store.close()


__all__ = ["DriveCache"]
