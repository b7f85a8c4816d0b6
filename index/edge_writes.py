"""Writes to the embedded store's live shards: the write operations as plain data
(:class:`Upsert`, :class:`Delete`, :class:`SetPayload`, each applied to a shard by
``op.apply(shard)``), the :class:`Journal` that records them while an index build runs, and
:class:`ShardWriter`, the one way a write reaches a live shard.

A write is applied to the live shard and flushed under the writer's lock (so "returned" means "on
disk", see :mod:`ancre.index.edge_store`), then, while a build of its collection runs, appended to
that build's journal: the build replays the journal onto the shard it built before swapping it in
(:mod:`ancre.index.edge_build`), so no write made during a build is lost.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from ancre.index.disk_space import SpaceGuard, upsert_bytes
from ancre.index.edge_shards import LiveShards

UPSERT_BATCH = 512
"""Points per engine update of an upsert."""
_LEN = struct.Struct("<Q")


@dataclass(frozen=True)
class DocSelector:
    """The points of ``doc_id`` with ``chunk_index >= from_chunk_index`` (the edge store's
    ``_doc_filter``: plain data, so a write can be journaled and replayed)."""

    doc_id: str
    from_chunk_index: int = 0

    def to_filter(self) -> qe.Filter:
        """The engine's filter for these points."""
        must: list[Any] = [qe.FieldCondition("doc_id", match=qe.MatchValue(self.doc_id))]
        if self.from_chunk_index > 0:
            must.append(qe.FieldCondition("chunk_index", range=qe.RangeFloat(gte=self.from_chunk_index)))
        return qe.Filter(must=must)


@dataclass(frozen=True)
class Upsert:
    """Points to upsert: ids, ``(n, d)`` float32 vectors, payload dicts (keyword terms included)."""

    ids: tuple[str, ...]
    vectors: np.ndarray
    payloads: tuple[dict[str, Any], ...]

    def bytes_needed(self) -> int:
        """What writing these points may take on disk (:func:`~ancre.index.disk_space.upsert_bytes`)."""
        return upsert_bytes(self.vectors, self.payloads)

    def apply(self, shard: qe.EdgeShard) -> None:
        """Upsert the points into ``shard``, :data:`UPSERT_BATCH` per update (not flushed)."""
        points = [qe.Point(pid, vec.tolist(), pl) for pid, vec, pl in zip(self.ids, self.vectors, self.payloads, strict=True)]
        for i in range(0, len(points), UPSERT_BATCH):
            shard.update(qe.UpdateOperation.upsert_points(points[i : i + UPSERT_BATCH]))


@dataclass(frozen=True)
class Delete:
    """The points of a :class:`DocSelector` to delete."""

    selector: DocSelector

    def apply(self, shard: qe.EdgeShard) -> None:
        """Delete them from ``shard`` (not flushed)."""
        shard.update(qe.UpdateOperation.delete_points_by_filter(self.selector.to_filter()))


@dataclass(frozen=True)
class SetPayload:
    """Payload keys to set on the points of a :class:`DocSelector` (an ACL change)."""

    selector: DocSelector
    payload: dict[str, Any]

    def apply(self, shard: qe.EdgeShard) -> None:
        """Set them in ``shard`` (not flushed)."""
        shard.update(qe.UpdateOperation.set_payload_by_filter(self.selector.to_filter(), self.payload))


WriteOp = Upsert | Delete | SetPayload


class Journal:
    """Append-only log of the write operations (picklable values) made to a live shard while its
    copy is being built; entries are read back by position. Lives in one file for the duration of
    one build (no fsync: a crash discards the build anyway). Thread-safe: one writer (the store's
    write lock) and a reader may use it at once."""

    def __init__(self, path: Path) -> None:
        """Create (or truncate) the journal file at ``path``. Raises ``OSError``."""
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._ends: list[int] = []
        self._size = 0
        self._lock = threading.Lock()

    def append(self, op: object) -> None:
        """Add ``op`` (any picklable value) at the end. Raises ``OSError``."""
        blob = pickle.dumps(op, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            data = _LEN.pack(len(blob)) + blob
            os.pwrite(self._fd, data, self._size)
            self._size += len(data)
            self._ends.append(self._size)

    def __len__(self) -> int:
        """Number of entries appended so far."""
        with self._lock:
            return len(self._ends)

    def read(self, start: int, stop: int) -> Iterator[object]:
        """Entries ``start`` … ``stop - 1``, in order."""
        with self._lock:
            ends = self._ends[start:stop]
            offset = self._ends[start - 1] if 0 < start <= len(self._ends) else 0
        for end in ends:
            raw = os.pread(self._fd, end - offset, offset)
            (length,) = _LEN.unpack_from(raw)
            yield pickle.loads(raw[_LEN.size : _LEN.size + length])
            offset = end

    def close(self) -> None:
        """Close and delete the file. Idempotent."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        self.path.unlink(missing_ok=True)


class ShardWriter:
    """The one way a write reaches a live shard of ``shards``: applied and flushed under
    :attr:`lock`, and appended to the journal of a build of its collection while one runs. A
    build takes :attr:`lock` too, to copy the shard and to swap it (writes wait, reads do not)."""

    def __init__(self, shards: LiveShards, space: SpaceGuard) -> None:
        self._shards = shards
        self.space = space
        """Free space checked before each write."""
        self.lock = threading.RLock()
        """Serialises writes, and blocks them during a build's copy and swap."""
        self._journals: dict[str, Journal] = {}

    def apply(self, collection: str, op: WriteOp) -> None:
        """Apply ``op`` to the live shard of ``collection`` and flush it, under :attr:`lock`;
        journaled while a build of the collection runs. Raises
        :class:`~ancre.errors.DiskFullError` when the file system can't take the write (checked
        before it: :class:`~ancre.index.disk_space.SpaceGuard`), else the engine's error."""
        self.space.require(op.bytes_needed() if isinstance(op, Upsert) else 0, f"writing to {collection}")
        with self.lock, self._shards.use(collection) as shard:
            op.apply(shard)
            shard.flush()
            journal = self._journals.get(collection)
            if journal is not None:
                journal.append(op)

    def journal_to(self, collection: str, journal: Journal | None) -> None:
        """From now on, append the writes to ``collection`` to ``journal`` (``None``: stop). The
        caller holds :attr:`lock` where no write may fall between two steps."""
        with self.lock:
            if journal is None:
                self._journals.pop(collection, None)
            else:
                self._journals[collection] = journal

    @staticmethod
    def replay(journal: Journal, shard: qe.EdgeShard, start: int) -> int:
        """Apply ``journal``'s entries from ``start`` to ``shard``; returns the new position."""
        stop = len(journal)
        for op in journal.read(start, stop):
            op.apply(shard)  # type: ignore[attr-defined]  # the journal holds the WriteOp values apply() wrote
        return stop
