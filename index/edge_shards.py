"""The live shards of the embedded store: the shard serving each collection, its folder, and the
reads in flight on it (:class:`LiveShards`). A read holds its shard for the length of one engine
call; an index build swaps a new shard in and retires the old one only once its last reader is
done (:mod:`ancre.index.edge_build`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import qdrant_edge as qe

from ancre.errors import StoreError
from ancre.index.edge_pages import release_pages

log = logging.getLogger("ancre.store")


class LiveShard:
    """The shard serving one collection, its folder, and the reads in flight on it."""

    def __init__(self, shard: qe.EdgeShard, path: Path) -> None:
        self.shard = shard
        self.path = path
        self.readers = 0


class LiveShards:
    """The shard of each collection (:class:`LiveShard`), counted while in use. Thread-safe.
    ``where`` names the store in error messages (``"under <dir>"``)."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._live: dict[str, LiveShard] = {}
        self._cv = threading.Condition()
        """Guards ``_live`` and the reader counts."""

    def __bool__(self) -> bool:
        """Whether any shard is open."""
        with self._cv:
            return bool(self._live)

    def put(self, name: str, shard: qe.EdgeShard, path: Path) -> LiveShard | None:
        """Make ``shard`` (in folder ``path``) the live shard of ``name``; returns the one it
        replaces (still open: :meth:`retire` it), ``None`` for the first."""
        with self._cv:
            old = self._live.get(name)
            self._live[name] = LiveShard(shard, path)
        return old

    def current(self, name: str) -> LiveShard:
        """The live shard of ``name``. Raises :class:`StoreError` when none is open."""
        with self._cv:
            live = self._live.get(name)
        if live is None:
            raise StoreError(f"store {self._where} is not open")
        return live

    def paths(self) -> list[Path]:
        """The folders of the live shards."""
        with self._cv:
            return [live.path for live in self._live.values()]

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[qe.EdgeShard]:
        """The live shard of ``name``, counted as in use until the block ends. Raises
        :class:`StoreError` when none is open (closed by another thread meanwhile)."""
        with self._cv:
            live = self._live.get(name)
            if live is None:
                raise StoreError(f"store {self._where} is not open")
            live.readers += 1
        try:
            yield live.shard
        finally:
            with self._cv:
                live.readers -= 1
                if not live.readers:
                    self._cv.notify_all()

    def retire(self, old: LiveShard) -> None:
        """Close ``old`` (no longer live) once no read runs on it — its pages released first,
        without the GIL (:func:`~ancre.index.edge_pages.release_pages`) — and delete its folder."""
        with self._cv:
            while old.readers:
                self._cv.wait()
        release_pages(old.path)
        try:
            old.shard.close()
        except Exception as exc:  # its folder goes anyway: the new shard is live
            log.warning("closing a replaced shard: %s", exc)
        shutil.rmtree(old.path, ignore_errors=True)

    def close_all(self, *, flush: bool = False) -> None:
        """Forget every shard, wait for the reads in flight, then (``flush`` first) close each.
        Raises :class:`StoreError` with the first failure, after trying them all."""
        with self._cv:
            lives, self._live = list(self._live.values()), {}
            while any(live.readers for live in lives):
                self._cv.wait()
        errors: list[Exception] = []
        for live in lives:
            try:
                if flush:
                    live.shard.flush()
                live.shard.close()
            except Exception as exc:  # close every shard even if one fails; the first error is raised
                errors.append(exc)
        if errors:
            raise StoreError(f"embedded Qdrant: close failed: {errors[0]}") from errors[0]
