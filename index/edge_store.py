"""The embedded default :class:`~ancre.index.store.Store`: the Qdrant engine in process through
``qdrant-edge-py`` (module ``qdrant_edge``).

Layout under ``data_dir/qdrant/``::

    LOCK                  flock'ed by the owning process; holds its PID and command line
    ancre_meta.json       {"embedder": "e5-local:…", "dim": 384}, written before the shards
    documents/            one EdgeShard per collection (wal/, segments/, edge_config.json)
    documentation/

Durability (checked with strace and kill -9 on qdrant-edge-py 0.9): ``EdgeShard.update`` returns
once the operation is in the shard's write-ahead log, an mmap'ed file, so it survives a kill -9 of
the process (the page cache outlives it). ``EdgeShard.flush`` then msync/fsyncs the WAL and the
segments, so the write also survives an OS crash or power loss. Every write method here calls
``flush`` before returning (about 10 ms per call), so "``upsert`` returned" means "on disk".

One owning process: the engine itself locks its WAL, but with an opaque error; this store takes an
exclusive ``fcntl.flock`` on ``LOCK`` first and raises :class:`~ancre.errors.StoreLockedError`
naming the owner. Thread-safe for concurrent reads and one writer (the engine locks internally).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ancre.errors import EmbedderMismatchError, StoreError, StoreLockedError
from ancre.index._filters import INTEGER_INDEXES, mismatch_message
from ancre.index._qdrant_base import QdrantBackend
from ancre.index.store import PAYLOAD_INDEXES
from ancre.models import COLLECTIONS, ChunkPayload

META_FILE = "ancre_meta.json"
LOCK_FILE = "LOCK"
_UPSERT_BATCH = 512


class EdgeStore(QdrantBackend):
    """Embedded :class:`~ancre.index.store.Store` over ``data_dir/qdrant/`` (see module doc); the
    Store methods and the rights filter are :class:`~ancre.index._qdrant_base.QdrantBackend`'s.

    ``EdgeStore(data_dir)`` touches nothing; :meth:`open` takes the lock, checks or records the
    embedder and opens the shards. Every other method raises :class:`StoreError` before
    :meth:`open` or after :meth:`close`.
    """

    ENGINE = "embedded Qdrant"

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir) / "qdrant"
        self._dim = 0
        self._shards: dict[str, qe.EdgeShard] = {}
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- lifecycle

    def open(self, embedder_name: str, dim: int) -> None:
        """Lock, check/record the embedder, create or load one cosine shard of ``dim`` dims per
        collection with the payload indexes. Raises :class:`StoreLockedError` when another owner
        holds ``LOCK``, :class:`EmbedderMismatchError` when the store was built with another
        embedder name or dimension, :class:`StoreError` on an unreadable meta file or engine error."""
        if self._shards:
            raise StoreError(f"store under {self.root} is already open")
        if dim <= 0:
            raise StoreError(f"invalid embedding dimension {dim}")
        self.root.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            self._check_meta(embedder_name, dim)
            config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine))
            for name in COLLECTIONS:
                self._shards[name] = self._open_shard(self.root / name, config)
            self._dim = dim
        except BaseException:
            with contextlib.suppress(StoreError):  # keep the original error
                self._close_shards()
            self._release_lock()
            raise

    def close(self) -> None:
        """Flush and close the shards, release ``LOCK``. Idempotent."""
        try:
            self._close_shards(flush=True)
        finally:
            self._release_lock()

    def drop_all(self) -> None:
        """Delete the shards and the embedder record under ``data_dir/qdrant`` (reindex). Takes the
        lock for the duration: raises :class:`StoreLockedError` when another process owns it,
        :class:`StoreError` when the store is open in this object."""
        if self._shards:
            raise StoreError(f"store under {self.root} is open; close it before dropping it")
        if not self.root.exists():
            return
        self._acquire_lock()
        try:
            for child in self.root.iterdir():
                if child.name == LOCK_FILE:
                    continue
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        finally:
            self._release_lock()

    def optimize(self) -> None:
        """Run the engine's segment optimizers (HNSW build, vacuum) until done; blocking, can take
        seconds on a large index. Not part of the Store protocol: call after a big sync pass."""
        for name in COLLECTIONS:
            with self._errors(f"optimize {name}"):
                self._shard(name).optimize()

    # ---------------------------------------------------------------- internals

    def _shard(self, collection: str) -> qe.EdgeShard:
        self._check(collection)
        try:
            return self._shards[collection]
        except KeyError:  # closed by another thread since the check
            raise StoreError(f"store {self._where} is not open") from None

    @property
    def _where(self) -> str:
        return f"under {self.root}"

    @staticmethod
    def _filter(must: list[Any], must_not: list[Any] | None = None) -> qe.Filter:
        return qe.Filter(must=must, must_not=must_not)

    @staticmethod
    def _match_any(field: str, values: list[Any]) -> qe.FieldCondition:
        return qe.FieldCondition(field, match=qe.MatchAny(values))

    @staticmethod
    def _match_value(field: str, value: str) -> qe.FieldCondition:
        return qe.FieldCondition(field, match=qe.MatchValue(value))

    @staticmethod
    def _at_least(field: str, value: int) -> qe.FieldCondition:
        return qe.FieldCondition(field, range=qe.RangeFloat(gte=value))

    @staticmethod
    def _has_id(ids: list[str]) -> qe.HasIdCondition:
        return qe.HasIdCondition(set(ids))

    def _write(self, collection: str, rows: list[tuple[str, list[float], ChunkPayload]]) -> None:
        """In updates of 512 points, then flushed to disk."""
        shard = self._shard(collection)
        batch = [qe.Point(pid, vector, payload.to_dict()) for pid, vector, payload in rows]
        for i in range(0, len(batch), _UPSERT_BATCH):
            shard.update(qe.UpdateOperation.upsert_points(batch[i : i + _UPSERT_BATCH]))
        shard.flush()

    def _delete(self, collection: str, flt: qe.Filter) -> None:
        shard = self._shard(collection)
        shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
        shard.flush()

    def _set_payload(self, collection: str, flt: qe.Filter, payload: dict[str, Any]) -> None:
        shard = self._shard(collection)
        shard.update(qe.UpdateOperation.set_payload_by_filter(flt, payload))
        shard.flush()

    def _nearest(
        self, collection: str, vector: list[float], flt: qe.Filter, limit: int
    ) -> list[qe.ScoredPoint]:
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vector), filter=flt, with_payload=True, with_vector=False
        )
        return self._shard(collection).query(request)

    def _read(self, collection: str, flt: qe.Filter, limit: int) -> list[qe.Record]:
        request = qe.ScrollRequest(limit=limit, filter=flt, with_payload=True, with_vector=False)
        records, _ = self._shard(collection).scroll(request)
        return records

    def _page(self, collection: str, offset: Any, batch: int) -> tuple[list[qe.Record], Any]:
        request = qe.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=False)
        return self._shard(collection).scroll(request)

    def _count(self, collection: str) -> int:
        return int(self._shard(collection).count(qe.CountRequest(exact=True)))

    def _open_shard(self, path: Path, config: qe.EdgeConfig) -> qe.EdgeShard:
        with self._errors(f"open shard {path}"):
            if (path / "edge_config.json").exists():
                shard = qe.EdgeShard.load(str(path), config)
            else:
                shard = qe.EdgeShard.create(str(path), config)
            present = set(shard.info().payload_schema)
            for field in PAYLOAD_INDEXES:
                if field not in present:
                    schema = (
                        qe.PayloadSchemaType.Integer
                        if field in INTEGER_INDEXES
                        else qe.PayloadSchemaType.Keyword
                    )
                    shard.update(qe.UpdateOperation.create_field_index(field, schema))
            shard.flush()
        return shard

    def _check_meta(self, embedder_name: str, dim: int) -> None:
        """Compare with ``ancre_meta.json``, or write it (atomically) for a new store."""
        meta_path = self.root / META_FILE
        if meta_path.exists():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                built_name, built_dim = str(meta["embedder"]), int(meta["dim"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise StoreError(f"unreadable store metadata {meta_path}: {exc!r}") from exc
            if (built_name, built_dim) != (embedder_name, dim):
                raise EmbedderMismatchError(
                    mismatch_message(str(self.root), built_name, built_dim, embedder_name, dim)
                )
            return
        if any((self.root / name / "edge_config.json").exists() for name in COLLECTIONS):
            raise StoreError(
                f"the index under {self.root} has shards but no {META_FILE} (which embedder built "
                f"it is unknown); run `ancre reindex --config <file>` to rebuild it"
            )
        tmp = meta_path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"embedder": embedder_name, "dim": dim}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, meta_path)

    def _acquire_lock(self) -> None:
        lock_path = self.root / LOCK_FILE
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = os.pread(fd, 4096, 0).decode("utf-8", "replace").split("\n", 1)
            finally:
                os.close(fd)
            pid = owner[0].strip() or "unknown"
            cmd = owner[1].strip() if len(owner) > 1 else ""
            raise StoreLockedError(
                f"the index under {self.root} is owned by another process (PID {pid}"
                f"{': ' + cmd if cmd else ''}); an embedded store has one owner only. Stop that "
                f"process, or run the API inside `ancre serve` (which owns the store), or use a "
                f"Qdrant server (store.kind = \"qdrant\")"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{shlex.join(sys.orig_argv)}\n".encode(), 0)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _close_shards(self, flush: bool = False) -> None:
        shards, self._shards = self._shards, {}
        self._dim = 0
        errors: list[Exception] = []
        for shard in shards.values():
            try:
                if flush:
                    shard.flush()
                shard.close()
            except Exception as exc:  # close every shard even if one fails
                errors.append(exc)
        if errors:
            raise StoreError(f"embedded Qdrant: close failed: {errors[0]}") from errors[0]
