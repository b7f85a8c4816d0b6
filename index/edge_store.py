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
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import qdrant_edge as qe

from ancre.errors import AncreError, EmbedderMismatchError, StoreError, StoreLockedError
from ancre.index._filters import (
    ALLOW_FIELD,
    CHUNK_FIELD,
    DENY_FIELD,
    DOC_FIELD,
    INTEGER_INDEXES,
    as_vector,
    mismatch_message,
    rights_terms,
    to_stored,
    valid_point_ids,
)
from ancre.index.store import PAYLOAD_INDEXES, PointWrite
from ancre.models import COLLECTIONS, Acl, StoredPoint

META_FILE = "ancre_meta.json"
LOCK_FILE = "LOCK"
_UPSERT_BATCH = 512


@contextlib.contextmanager
def _engine(action: str) -> Iterator[None]:
    """Turn the engine's plain ``Exception`` into :class:`StoreError` (ancre errors pass through)."""
    try:
        yield
    except AncreError:
        raise
    except Exception as exc:  # qdrant_edge raises bare Exception
        raise StoreError(f"embedded Qdrant: {action} failed: {exc}") from exc


def _rights_filter(
    principals: frozenset[str], *must: object
) -> qe.Filter | None:
    """The rights filter plus extra ``must`` conditions; ``None`` for an empty principal set
    (the caller then returns ``[]`` without touching the store)."""
    terms = rights_terms(principals)
    if terms is None:
        return None
    return qe.Filter(
        must=[*must, qe.FieldCondition(ALLOW_FIELD, match=qe.MatchAny(terms))],
        must_not=[qe.FieldCondition(DENY_FIELD, match=qe.MatchAny(terms))],
    )


def _doc_filter(doc_id: str, from_chunk_index: int = 0) -> qe.Filter:
    must: list[object] = [qe.FieldCondition(DOC_FIELD, match=qe.MatchValue(doc_id))]
    if from_chunk_index > 0:
        must.append(qe.FieldCondition(CHUNK_FIELD, range=qe.RangeFloat(gte=from_chunk_index)))
    return qe.Filter(must=must)


class EdgeStore:
    """Embedded :class:`~ancre.index.store.Store` over ``data_dir/qdrant/`` (see module doc).

    ``EdgeStore(data_dir)`` touches nothing; :meth:`open` takes the lock, checks or records the
    embedder and opens the shards. Every other method raises :class:`StoreError` before
    :meth:`open` or after :meth:`close`.
    """

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
            with _engine(f"optimize {name}"):
                self._shard(name).optimize()

    # ---------------------------------------------------------------- writes

    def upsert(self, collection: str, points: Sequence[PointWrite]) -> None:
        """Insert or replace ``points`` (same id = replaced), flushed to disk before returning.
        Raises :class:`StoreError` on a bad id, wrong vector shape or engine error."""
        shard = self._shard(collection)
        batch: list[qe.Point] = []
        for p in points:
            ids = valid_point_ids([p.id])
            if not ids:
                raise StoreError(f"point id {p.id!r} is not a UUID string")
            batch.append(qe.Point(ids[0], as_vector(p.vector, self._dim), p.payload.to_dict()))
        with _engine(f"upsert into {collection}"):
            for i in range(0, len(batch), _UPSERT_BATCH):
                shard.update(qe.UpdateOperation.upsert_points(batch[i : i + _UPSERT_BATCH]))
            shard.flush()

    def delete_doc(self, collection: str, doc_id: str, from_chunk_index: int = 0) -> None:
        """Delete the points of ``doc_id`` with ``chunk_index >= from_chunk_index``; flushed."""
        shard = self._shard(collection)
        with _engine(f"delete {doc_id} from {collection}"):
            flt = _doc_filter(doc_id, from_chunk_index)
            shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
            shard.flush()

    def set_acl(self, collection: str, doc_id: str, acl: Acl) -> None:
        """Overwrite ``acl_allow``/``acl_deny`` on every point of ``doc_id`` (vectors and text
        untouched); flushed."""
        shard = self._shard(collection)
        payload = {ALLOW_FIELD: sorted(acl.allow), DENY_FIELD: sorted(acl.deny)}
        with _engine(f"set ACL of {doc_id} in {collection}"):
            shard.update(qe.UpdateOperation.set_payload_by_filter(_doc_filter(doc_id), payload))
            shard.flush()

    # ---------------------------------------------------------------- reads

    def search(
        self, collection: str, vector: np.ndarray, principals: frozenset[str], limit: int
    ) -> list[StoredPoint]:
        """Top-``limit`` by cosine similarity to ``vector`` ``(d,)`` under the rights filter,
        best first, ``score`` in [-1, 1]. Empty ``principals`` → ``[]``."""
        shard = self._shard(collection)
        flt = _rights_filter(principals)
        if flt is None or limit <= 0:
            return []
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(as_vector(vector, self._dim)),
            filter=flt,
            with_payload=True,
            with_vector=False,
        )
        with _engine(f"search {collection}"):
            hits = shard.query(request)
        return [to_stored(h.id, h.payload, float(h.score)) for h in hits]

    def retrieve(
        self, collection: str, ids: Sequence[str], principals: frozenset[str]
    ) -> list[StoredPoint]:
        """The points among ``ids`` that exist and pass the rights filter, in one engine call
        (a scroll filtered on ``HasId`` + rights). Non-UUID ids are ignored. Empty
        ``principals`` → ``[]``."""
        shard = self._shard(collection)
        wanted = valid_point_ids(ids)
        flt = _rights_filter(principals, qe.HasIdCondition(set(wanted)))
        if flt is None or not wanted:
            return []
        return self._scroll_once(shard, collection, flt, len(wanted))

    def chunks_of(
        self,
        collection: str,
        doc_id: str,
        chunk_indexes: Sequence[int],
        principals: frozenset[str],
    ) -> list[StoredPoint]:
        """Points of ``doc_id`` with the given chunk indexes under the rights filter, sorted by
        ``chunk_index``. Empty ``principals`` → ``[]``."""
        shard = self._shard(collection)
        wanted = sorted({int(i) for i in chunk_indexes})
        flt = _rights_filter(
            principals,
            qe.FieldCondition(DOC_FIELD, match=qe.MatchValue(doc_id)),
            qe.FieldCondition(CHUNK_FIELD, match=qe.MatchAny(wanted)),
        )
        if flt is None or not wanted:
            return []
        points = self._scroll_once(shard, collection, flt, len(wanted))
        return sorted(points, key=lambda p: p.payload.chunk_index)

    def scroll(self, collection: str, batch: int = 1024) -> Iterator[StoredPoint]:
        """Every point of ``collection`` (unfiltered, payload only), ``batch`` per engine call,
        in point-id order. For index maintenance only (BM25 rebuild)."""
        shard = self._shard(collection)
        offset: object = None
        while True:
            with _engine(f"scroll {collection}"):
                records, offset = shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=False)
                )
            for r in records:
                yield to_stored(r.id, r.payload, None)
            if offset is None:
                return

    def count(self, collection: str) -> int:
        """Exact number of points in ``collection``."""
        shard = self._shard(collection)
        with _engine(f"count {collection}"):
            return int(shard.count(qe.CountRequest(exact=True)))

    # ---------------------------------------------------------------- internals

    def _shard(self, collection: str) -> qe.EdgeShard:
        if collection not in COLLECTIONS:
            raise StoreError(f"unknown collection {collection!r}; expected one of {COLLECTIONS}")
        try:
            return self._shards[collection]
        except KeyError:
            raise StoreError(f"store under {self.root} is not open") from None

    @staticmethod
    def _scroll_once(
        shard: qe.EdgeShard, collection: str, flt: qe.Filter, limit: int
    ) -> list[StoredPoint]:
        with _engine(f"read {collection}"):
            records, _ = shard.scroll(
                qe.ScrollRequest(limit=limit, filter=flt, with_payload=True, with_vector=False)
            )
        return [to_stored(r.id, r.payload, None) for r in records]

    @staticmethod
    def _open_shard(path: Path, config: qe.EdgeConfig) -> qe.EdgeShard:
        with _engine(f"open shard {path}"):
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
