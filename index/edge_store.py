"""The embedded default :class:`~ancre.index.store.Store`: the Qdrant engine in process through
``qdrant-edge-py`` (module ``qdrant_edge``).

One EdgeShard per collection under ``data_dir/qdrant/`` (the layout: :mod:`ancre.index.edge_layout`).
:class:`EdgeStore` is the :class:`~ancre.index.store.Store` the rest of ancre sees; it is made of
parts, each in a module of its own, none importing the store:

- :mod:`~ancre.index.edge_config`: the shards' engine configuration and :class:`EdgeTuning`
  (imported by the store and by its build process alike);
- :mod:`~ancre.index.edge_layout`: the folder — lock, meta file, which folder is live;
- :mod:`~ancre.index.edge_shards`: the live shards and the reads in flight on them;
- :mod:`~ancre.index.edge_search`: the reads (vector, keyword, filtered, counts);
- :mod:`~ancre.index.edge_writes`: the writes, their lock and the build journal;
- :mod:`~ancre.index.edge_build` and :mod:`~ancre.index.edge_child`: index builds in a separate
  process, and the swap;
- :mod:`~ancre.index.edge_pages`: the page cache and the WAL release.

**Search at scale.** A shard holds immutable, *indexed* segments (HNSW graph over int8 scalar-
quantized vectors, the float32 originals for rescoring, payload and text indexes: all
memory-mapped) and one appendable segment that takes the writes, searched exactly. Vector search
is planned per question from the rights filter's estimated selectivity
(:func:`~ancre.index.edge_search.plan_search`): a segment where the filter keeps few points has
their int8 vectors scanned, elsewhere the graph is walked with a beam widened as the filter
narrows; then ``oversampling × limit`` candidates are rescored on the originals
(:class:`~ancre.index.edge_config.EdgeTuning`). The indexed segments are built **outside this
process** (:meth:`EdgeStore.maintain`, see :mod:`ancre.index.edge_build`): qdrant-edge-py's
``optimize()`` holds Python's GIL for its whole run, so a process that ran it would answer
nothing meanwhile. Until a build is swapped in, new points are found by the exact search of the
appendable segment: a question never waits for a build.

**Keywords in the engine** (``keywords=True``, ``[store] bm25 = "qdrant"``, the default): each
point's payload also holds its index terms (:data:`~ancre.index.keywords.KEYWORD_FIELD`, see
:mod:`ancre.index.keywords`) under a BM25-scoring text index, so :meth:`EdgeStore.keyword_search`
ranks by BM25 *with the rights filter in the same query*, over the points as they are now: an
upsert, a deletion or an ACL change is seen by the next query, whatever the size of the store.

Durability (checked with strace and kill -9 on qdrant-edge-py 0.9): ``EdgeShard.update`` returns
once the operation is in the shard's write-ahead log, an mmap'ed file, so it survives a kill -9 of
the process (the page cache outlives it). ``EdgeShard.flush`` then msync/fsyncs the WAL and the
segments, so the write also survives an OS crash or power loss. Every write method here calls
``flush`` before returning (about 10 ms per call), so "``upsert`` returned" means "on disk".

One owning process: the engine itself locks its WAL, but with an opaque error; this store takes an
exclusive ``fcntl.flock`` on ``LOCK`` first and raises :class:`~ancre.errors.StoreLockedError`
naming the owner. Thread-safe for concurrent reads and writes (writes are serialised by a lock of
their own, which an index build also takes for its copy and its swap).
"""
from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from ancre.errors import DiskFullError, EmbedderMismatchError, StoreError
from ancre.index._filters import mismatch_message, readable_now, to_stored
from ancre.index._qdrant_base import _MAX_OVERFETCH, QdrantBackend
from ancre.index.disk_space import SpaceGuard, open_bytes
from ancre.index.edge_build import BuildReport, IndexBuilder
from ancre.index.edge_config import EdgeTuning, ensure_payload_indexes, keyword_index_params, shard_config
from ancre.index.edge_health import check_after_crash, damaged, disk_errors, mark_closed, mark_open
from ancre.index.edge_layout import META_FILE, StoreFolder
from ancre.index.edge_pages import release_wal
from ancre.index.edge_search import ShardReader
from ancre.index.edge_shards import LiveShards
from ancre.index.edge_writes import Delete, DocSelector, SetPayload, ShardWriter, Upsert
from ancre.index.keywords import KEYWORD_FIELD, chunk_terms, joined, query_terms
from ancre.models import COLLECTIONS, ChunkPayload, StoredPoint

log = logging.getLogger("ancre.store")


class EdgeStore(QdrantBackend):
    """Embedded :class:`~ancre.index.store.Store` over ``data_dir/qdrant/`` (see module doc); the
    Store methods and the rights filter are :class:`~ancre.index._qdrant_base.QdrantBackend`'s.

    ``keywords``: keep BM25 in the engine (:meth:`keyword_search`); ``tuning``: index and search
    settings (:class:`~ancre.index.edge_config.EdgeTuning`). ``EdgeStore(data_dir)`` touches
    nothing; :meth:`open` takes the lock, checks or records the embedder and opens the shards.
    Every other method raises :class:`StoreError` before :meth:`open` or after :meth:`close`.
    """

    ENGINE = "embedded Qdrant"

    def __init__(
        self, data_dir: Path, *, keywords: bool = True, tuning: EdgeTuning | None = None, min_free_bytes: int = 256 * 2**20
    ) -> None:
        self.root = Path(data_dir) / "qdrant"
        self.keywords = keywords
        self.tuning = tuning or EdgeTuning()
        self._dim = 0
        self._folder = StoreFolder(self.root)
        self._shards = LiveShards(self._where)
        self._reader = ShardReader(self._shards, self.tuning)
        self._writer = ShardWriter(self._shards, SpaceGuard(self.root, min_free_bytes))
        self._builder = IndexBuilder(
            self._folder, self._shards, self._writer, self.tuning, keywords=keywords, space=self._writer.space
        )
        self._build_mu = threading.Lock()
        """One build at a time; :meth:`close` waits for the one running."""
        self._closing = threading.Event()
        self._meta: dict[str, Any] = {}
        self._keywords_ready = False
        self._backfilled: set[str] = set()
        self._index_current = False
        """Whether every shard was built with the index settings of ``tuning``
        (:meth:`~ancre.index.edge_config.EdgeTuning.index_settings`, recorded in the meta file)."""
        self._rebuilt: set[str] = set()

    @property
    def space(self) -> SpaceGuard:
        """Free space checked before every write and build (:mod:`ancre.index.disk_space`)."""
        return self._writer.space

    @space.setter
    def space(self, guard: SpaceGuard) -> None:
        self._writer.space = self._builder.space = guard

    # ---------------------------------------------------------------- lifecycle

    def open(self, embedder_name: str, dim: int) -> None:
        """Lock, check/record the embedder, create or load one cosine shard of ``dim`` dims per
        collection with the payload indexes (and the keyword text index). Raises
        :class:`StoreLockedError` when another owner holds ``LOCK``, :class:`EmbedderMismatchError`
        when the store was built with another embedder name or dimension,
        :class:`~ancre.errors.DiskFullError` when the file system can't take what loading writes
        (:func:`~ancre.index.disk_space.open_bytes`), :class:`~ancre.errors.StoreDamagedError`
        when a shard can't be loaded or, after a stop that was not clean, fails its probe
        (:mod:`ancre.index.edge_health`), :class:`StoreError` on an unreadable meta file or
        another engine error."""
        if self._shards:
            raise StoreError(f"store under {self.root} is already open")
        if dim <= 0:
            raise StoreError(f"invalid embedding dimension {dim}")
        self.root.mkdir(parents=True, exist_ok=True)
        self.space.require(open_bytes(self.root), "opening the index", margin=False)  # loading a shard writes
        self._folder.acquire_lock()
        self._closing.clear()
        try:
            crashed = mark_open(self.root)
            self._check_meta(embedder_name, dim)
            config = shard_config(dim, self.tuning)
            for name in COLLECTIONS:
                path = self._folder.current_path(name)
                self._folder.remove_leftovers(name, path)
                self._shards.put(name, self._open_shard(path, config), path)
                release_wal(path)  # read once by the load, never again
            self._dim = dim
            if crashed:
                shards = {name: self._shards.current(name).path for name in COLLECTIONS}
                check_after_crash(self, dim, self.root, shards, keywords=self.keywords)
            if not any(self._count(c) for c in COLLECTIONS):  # nothing to fill in or to rebuild
                self._write_meta(keywords=self.keywords, index=self.tuning.index_settings())
                self._keywords_ready = self.keywords
                self._index_current = True
        except BaseException:
            with contextlib.suppress(StoreError):  # keep the original error
                self._close_shards()
            self._folder.release_lock()
            raise

    def close(self) -> None:
        """Stop a build in progress (its copy is deleted), flush and close the shards, release
        ``LOCK``. Idempotent."""
        self._closing.set()
        with self._build_mu:
            try:
                opened = bool(self._shards)
                self._close_shards(flush=True)
                if opened:
                    mark_closed(self.root)
            finally:
                self._folder.release_lock()

    def drop_all(self) -> None:
        """Delete the shards and the embedder record under ``data_dir/qdrant`` (reindex). Takes the
        lock for the duration: raises :class:`StoreLockedError` when another process owns it,
        :class:`StoreError` when the store is open in this object."""
        if self._shards:
            raise StoreError(f"store under {self.root} is open; close it before dropping it")
        if not self.root.exists():
            return
        self._folder.acquire_lock()
        try:
            self._folder.drop_content()
        finally:
            self._folder.release_lock()

    # ---------------------------------------------------------------- index maintenance

    def unindexed_points(self, collection: str) -> int:
        """Points of ``collection`` not yet in an indexed segment (searched exactly)."""
        self._check(collection)
        return self._reader.index_state(collection)[1]

    def needs_build(self) -> bool:
        """Whether :meth:`maintain` would start a build: a collection has at least
        ``tuning.build_after_points`` points searched exactly, keywords are to be filled in, or
        the shards were built with other index settings (an upgrade: rebuilt once)."""
        if (self.keywords and not self._keywords_ready) or not self._index_current:
            return True
        return any(self.unindexed_points(c) >= self.tuning.build_after_points for c in COLLECTIONS)

    def maintain(
        self, *, force: bool = False, should_stop: Callable[[], bool] | None = None
    ) -> list[BuildReport]:
        """Build the indexes of each collection that needs it (``force``: every non-empty one)
        in a separate process, then swap the built shard in (see :mod:`ancre.index.edge_build`);
        blocking, one build at a time; reads and writes go on meanwhile. ``should_stop`` (and
        :meth:`close`) abandons a build: the live shard stays as it was. Returns one report per
        build done. Raises :class:`StoreError` when a build fails (the live shard is intact).
        Each call first gives back the WAL pages the writes since the last one left in this
        process (:func:`~ancre.index.edge_pages.release_wal`): the daemon calls it after every
        change and every 30 s."""
        reports: list[BuildReport] = []
        for path in self._shards.paths():
            release_wal(path)  # the writes since the last call flushed them to disk

        def stop() -> bool:
            return self._closing.is_set() or (should_stop is not None and should_stop())

        for name in COLLECTIONS:
            if stop():
                break
            self._check(name)
            points, pending = self._reader.index_state(name)
            backfill = self.keywords and not self._keywords_ready and name not in self._backfilled
            rebuild = not self._index_current and name not in self._rebuilt
            if points and (force or backfill or rebuild or pending >= self.tuning.build_after_points):
                with self._build_mu:
                    if self._closing.is_set():
                        break
                    reports.append(self._builder.build(name, self._dim, stop, backfill=backfill))
            elif points:
                continue
            if backfill:
                self._backfilled.add(name)
            self._rebuilt.add(name)  # a build rebuilds every segment made with other settings
        self._settle()
        return reports

    def _settle(self) -> None:
        """Record in the meta file what the builds so far completed: keywords filled in, every
        shard built with the current index settings."""
        if self.keywords and not self._keywords_ready and self._backfilled >= set(COLLECTIONS):
            self._write_meta(keywords=True)
            self._keywords_ready = True
            log.info("keyword index filled in: BM25 now answered by the store")
        if not self._index_current and self._rebuilt >= set(COLLECTIONS):
            self._write_meta(index=self.tuning.index_settings())
            self._index_current = True
            log.info("index rebuilt with the current index settings")

    def optimize(self) -> list[BuildReport]:
        """:meth:`maintain` with ``force``: every non-empty collection is rebuilt now (blocking;
        in a separate process, so queries go on)."""
        return self.maintain(force=True)

    # ---------------------------------------------------------------- keywords in the engine

    def keyword_search(
        self, collection: str, question: str, principals: frozenset[str], limit: int
    ) -> list[StoredPoint]:
        """Top-``limit`` points by BM25 over their index terms (the engine's text index: IDF and
        average length over the collection as it is now) under the rights filter, in one query,
        best first, ``score`` > 0 set; only points sharing a term with ``question``. A point whose
        ACL has grants is kept only if they admit ``principals`` now (asking the engine again for
        more when some were dropped, as :meth:`search`). ``[]`` for
        empty ``principals`` or a question of stop words. Raises :class:`StoreError` when the
        store keeps no keywords (``keywords=False``)."""
        self._check(collection)
        if not self.keywords:
            raise StoreError(f"store {self._where} keeps no BM25 (store.bm25 = 'snapshot')")
        flt = self._rights_filter(principals)
        terms = query_terms(question)
        if flt is None or limit <= 0 or not terms:
            return []
        asked = limit
        while True:
            with self._errors(f"keyword search {collection}"):
                hits = self._reader.keyword(collection, joined(terms), flt, asked)
            points = [to_stored(h.id, h.payload, float(h.score)) for h in hits if h.score > 0]
            kept = readable_now(points, principals)
            if len(kept) >= limit or len(hits) < asked or asked >= limit * _MAX_OVERFETCH:
                return kept[:limit]
            asked = min(asked * 4, limit * _MAX_OVERFETCH)

    def keyword_term_counts(
        self, terms: Sequence[str], cap: int, principals: frozenset[str] | None = None
    ) -> tuple[int, dict[str, int]]:
        """``(points, {term: points holding it, at most cap + 1})`` over both collections — all
        of them (``principals`` ``None``), or only those ``principals`` may read (the rights
        filter's allow/deny prefilter: an ACL's time-limited grants are not evaluated for a count;
        an empty set counts nothing) — the extractive gate's document frequencies, as the
        snapshot's :meth:`~ancre.index.bm25.Bm25Index.term_stats`: one exact count per term and
        collection on the text index. Raises :class:`~ancre.errors.StoreError`."""
        if not self.keywords:
            raise StoreError(f"store {self._where} keeps no BM25 (store.bm25 = 'snapshot')")
        if principals is not None and self._rights_filter(principals) is None:
            return 0, dict.fromkeys(terms, 0)

        def counted(*must: Any) -> int:
            flt = (self._rights_filter(principals, *must) if principals is not None
                   else self._filter(list(must)) if must else None)
            total = 0
            for coll in COLLECTIONS:
                self._check(coll)
                with self._errors(f"count in {coll}"):
                    total += self._reader.count(coll, flt)
            return total

        n = counted()
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            out[term] = min(counted(qe.FieldCondition(KEYWORD_FIELD, match=qe.MatchText(term))), cap + 1)
        return n, out

    @property
    def keywords_ready(self) -> bool:
        """Whether :meth:`keyword_search` sees every point: keywords are on and every point carries
        its index terms (a store written without them gets them from the next build)."""
        return self._keywords_ready

    # ---------------------------------------------------------------- QdrantBackend's library hooks

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

    def _doc_filter(self, doc_id: str, from_chunk_index: int = 0) -> DocSelector:
        return DocSelector(doc_id, from_chunk_index)

    def _write(self, collection: str, rows: list[tuple[str, list[float], ChunkPayload]]) -> None:
        """In updates of 512 points (each payload with its index terms when ``keywords``), then
        flushed to disk."""
        payloads = []
        for _, _, payload in rows:
            d = payload.to_dict()
            if self.keywords:
                d[KEYWORD_FIELD] = joined(chunk_terms(payload.filename, payload.text, payload.header))
            payloads.append(d)
        vectors = np.asarray([v for _, v, _ in rows], dtype=np.float32).reshape(len(rows), self._dim)
        self._writer.apply(collection, Upsert(tuple(pid for pid, _, _ in rows), vectors, tuple(payloads)))

    def _delete(self, collection: str, flt: DocSelector) -> None:
        self._writer.apply(collection, Delete(flt))

    def _set_payload(self, collection: str, flt: DocSelector, payload: dict[str, Any]) -> None:
        self._writer.apply(collection, SetPayload(flt, payload))

    def _nearest(
        self, collection: str, vector: list[float], flt: qe.Filter, limit: int, exact: bool = False
    ) -> list[qe.ScoredPoint]:
        return self._reader.nearest(collection, vector, flt, limit, exact)

    def _read(self, collection: str, flt: qe.Filter, limit: int) -> list[qe.Record]:
        return self._reader.read(collection, flt, limit)

    def _page(self, collection: str, offset: Any, batch: int) -> tuple[list[qe.Record], Any]:
        return self._reader.page(collection, offset, batch)

    def _vector_page(
        self, collection: str, flt: qe.Filter, offset: Any, batch: int
    ) -> tuple[list[tuple[Any, Any]], Any]:
        return self._reader.vector_page(collection, flt, offset, batch)

    def _count(self, collection: str) -> int:
        return self._reader.count(collection)

    # ---------------------------------------------------------------- internals

    @contextlib.contextmanager
    def _use(self, collection: str) -> Iterator[qe.EdgeShard]:
        """The live shard of ``collection`` for the length of the block (tests and tools that
        read a shard directly)."""
        self._check(collection)
        with self._shards.use(collection) as shard:
            yield shard

    def _open_shard(self, path: Path, config: qe.EdgeConfig) -> qe.EdgeShard:
        try:
            with self._errors(f"open shard {path}"):
                if (path / "edge_config.json").exists():
                    shard = qe.EdgeShard.load(str(path), config)
                else:
                    shard = qe.EdgeShard.create(str(path), config)
                ensure_payload_indexes(shard, keywords=self.keywords, tuning=self.tuning)
        except DiskFullError:
            raise
        except StoreError as e:
            raise damaged(self.root, path, e) from e
        return shard

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        """Engine failures as :class:`StoreError`; one that quotes ``ENOSPC`` as
        :class:`~ancre.errors.DiskFullError` (:func:`~ancre.index.edge_health.disk_errors`)."""
        return disk_errors(self.space, self.ENGINE, action)

    def _check_meta(self, embedder_name: str, dim: int) -> None:
        """Compare with ``ancre_meta.json``, or write it (atomically) for a new store. Reads the
        ``keywords`` record: a store written while keywords were off (or by an ancre without them)
        has points without index terms, so its keywords are not ready until a build filled them in
        (:meth:`maintain`); and the ``index`` record: shards built with other index settings (or
        by an ancre that did not record them) are rebuilt by the next :meth:`maintain`."""
        meta = self._folder.read_meta()
        if meta is not None:
            if (meta["embedder"], meta["dim"]) != (embedder_name, dim):
                raise EmbedderMismatchError(
                    mismatch_message(str(self.root), meta["embedder"], meta["dim"], embedder_name, dim)
                )
            self._meta = meta
            if not self.keywords and meta.get("keywords") is not False:
                self._write_meta(keywords=False)  # points written from now on carry no terms
            self._keywords_ready = self.keywords and meta.get("keywords") is True
            self._index_current = meta.get("index") == self.tuning.index_settings()
            return
        if self._folder.has_shards(COLLECTIONS):
            raise StoreError(
                f"the index under {self.root} has shards but no {META_FILE} (which embedder built "
                f"it is unknown); run `ancre reindex --config <file>` to rebuild it"
            )
        self._meta = {"embedder": embedder_name, "dim": dim}
        self._write_meta(keywords=self.keywords, index=self.tuning.index_settings())
        self._keywords_ready = self.keywords
        self._index_current = True

    def _write_meta(self, **fields: Any) -> None:
        """Update ``ancre_meta.json`` with ``fields``, atomically."""
        self._meta = {**self._meta, **fields}
        self._folder.write_meta(self._meta)

    def _close_shards(self, flush: bool = False) -> None:
        try:
            self._shards.close_all(flush=flush)
        finally:
            self._dim = 0


__all__ = ["BuildReport", "EdgeStore", "EdgeTuning", "ensure_payload_indexes", "keyword_index_params", "shard_config"]
