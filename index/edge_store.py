"""The embedded default :class:`~ancre.index.store.Store`: the Qdrant engine in process through
``qdrant-edge-py`` (module ``qdrant_edge``).

Layout under ``data_dir/qdrant/``::

    LOCK                  flock'ed by the owning process; holds its PID and command line
    ancre_meta.json       {"embedder": "e5-local:…", "dim": 384}, written before the shards
    documents/            one EdgeShard per collection (wal/, segments/, edge_config.json)
    documents.current     after an index build: the folder of the live shard (``documents@3``)
    documents@3/          a built shard (:mod:`ancre.index.edge_build`)
    documentation/        (the same for the other collection)

**Search at scale.** A shard holds immutable, *indexed* segments (HNSW graph over int8 scalar-
quantized vectors, the float32 originals for rescoring, payload and text indexes: all
memory-mapped) and one appendable segment that takes the writes, searched exactly. Vector search
walks the graph with the rights filter (ACORN for a filter that keeps less than
``acorn_max_selectivity`` of the points, so a narrow one does not cut the graph into islands)
over the quantized vectors, then rescores ``oversampling × limit``
candidates on the originals (:class:`EdgeTuning`). The indexed segments are built **outside this
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
import fcntl
import json
import logging
import os
import re
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from ancre.errors import DiskFullError, EmbedderMismatchError, StoreError, StoreLockedError
from ancre.index._filters import INTEGER_INDEXES, mismatch_message, readable_now, to_stored
from ancre.index._qdrant_base import _MAX_OVERFETCH, QdrantBackend
from ancre.index.disk_space import SpaceGuard, build_bytes, open_bytes, upsert_bytes
from ancre.index.edge_build import (
    LOAD_FILES_MAX,
    BuildReport,
    Journal,
    copy_tree,
    prewarm,
    refresh_copy,
    release_pages,
    release_wal,
    run_child,
)
from ancre.index.edge_health import check_after_crash, damaged, disk_errors, mark_closed, mark_open
from ancre.index.keywords import KEYWORD_FIELD, chunk_terms, joined, query_terms
from ancre.index.store import PAYLOAD_INDEXES
from ancre.models import COLLECTIONS, ChunkPayload, StoredPoint

log = logging.getLogger("ancre.store")

META_FILE = "ancre_meta.json"
LOCK_FILE = "LOCK"
_UPSERT_BATCH = 512
_POINTER_SUFFIX = ".current"
_BUILT = re.compile(r"^(?P<coll>[a-z]+)@(?P<gen>\d+)$")
_JOURNAL_PREFIX = ".journal-"
_PAYLOAD = qe.PayloadSelector.Exclude([KEYWORD_FIELD])
"""What reads return: the payload without the index terms (no one reads them back)."""
_TEXT_ONLY = qe.PayloadSelector.Include(["text", "header"])
"""What :meth:`~ancre.index.store.Store.vectors_of` reads beside the vectors."""
_CATCH_UP_LOCKED = 64
"""Journal entries left when the build's replay takes the write lock for the rest."""


@dataclass(frozen=True)
class EdgeTuning:
    """How the embedded engine indexes and searches. The defaults were measured on 2 cores with
    384-dim vectors and ancre's rights filter at 100k–1M points (README "Benchmarks", scale table).

    - ``hnsw_m`` / ``hnsw_ef_construct``: the graph's edges per node and build beam; ``hnsw_ef``:
      the search beam; ``acorn``: ACORN filtered search (neighbours of filtered-out nodes are
      explored, so a selective rights filter still finds its nearest points), used only for a
      filter the engine estimates to keep less than ``acorn_max_selectivity`` (0–1) of the points
      — 0.1. ACORN costs more the more points the filter keeps: at 1M points (scale bench, 2
      cores) a user who may read 20–36 % of them waited ~240 ms for the vector search with
      ACORN against ~26 ms without, for the same recall@30 (1.000), and the vector search's
      p50 / p95 / p99 went from 37 / 283 / 315 ms at the engine's default 0.4 to 33 / 41 / 43 ms
      at 0.1; users who read 1–2 % (where ACORN applies) kept recall@30 1.000 at 28 ms p50. ACORN
      on every search (1.0) had made it 3× slower at 100k already;
    - ``oversampling``: candidates taken from the int8-quantized vectors, as a multiple of the
      limit, then rescored on the float32 originals;
    - ``max_segment_points``: the largest indexed segment a build makes. A build indexes the
      new points into segments of their own and merges only segments smaller than this (the
      engine's merge optimizer, once there are more than ``segments``), so one build costs at
      most a segment of this size, never the whole store; the segments of a query are searched in
      parallel by the engine's search threads (one per core);
    - ``build_after_points``: points not yet in an indexed segment (searched exactly) that make
      :meth:`EdgeStore.maintain` start a build; below it the exact search is fast enough.
    """

    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    hnsw_ef: int = 64
    acorn: bool = True
    acorn_max_selectivity: float = 0.1
    oversampling: float = 2.0
    segments: int = 8
    max_segment_points: int = 250_000
    build_after_points: int = 20_000

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (what the build process receives)."""
        return asdict(self)


def shard_config(dim: int, tuning: EdgeTuning) -> qe.EdgeConfig:
    """The engine configuration of every shard: cosine ``dim``-dim vectors, HNSW and int8 scalar
    quantization for the indexed segments, payload on disk. Everything of an indexed segment is
    memory-mapped, none of it read in at load (``Memory.Cold``: the float32 originals, the
    quantized vectors, the graph, the payload and its indexes). The engine drops these files from
    the page cache when it opens them and reads its payload-index flags page by page, holding
    the GIL, so a build reads the built shard into the page cache before and after loading it
    (:func:`~ancre.index.edge_build.prewarm`): at 840k points the load then holds the GIL
    0.4-0.7 s instead of 1.45 s, and the first questions on it find their pages in memory. The
    engine never optimizes by itself: only a build does (:mod:`ancre.index.edge_build`)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine, memory=qe.Memory.Cold),
        hnsw_config=qe.HnswIndexConfig(
            m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construct, full_scan_threshold=10_000,
            max_indexing_threads=0, memory=qe.Memory.Cold,
        ),
        quantization_config=qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Cold),
        optimizers=qe.EdgeOptimizersConfig(
            default_segment_number=tuning.segments, indexing_threshold=1, prevent_unoptimized=False,
            max_segment_size=max(1, tuning.max_segment_points * dim * 4 // 1024),  # KB of float32 vectors
        ),
        payload_memory=qe.Memory.Cold,
    )


def keyword_index_params() -> qe.TextIndexParams:
    """The text index of :data:`KEYWORD_FIELD`: whitespace tokens taken as they are (ancre's own
    tokenizer made them), BM25 scoring, on disk in indexed segments."""
    return qe.TextIndexParams(
        tokenizer=qe.TokenizerType.Whitespace, lowercase=False, ascii_folding=False,
        stopwords=qe.StopwordsSet(languages=set(), custom=set()), stemmer=qe.DisabledStemmer(),
        phrase_matching=False, scoring=True, memory=qe.Memory.Cold,
    )


def _field_params(field: str) -> qe.KeywordIndexParams | qe.IntegerIndexParams:
    """A payload index of :data:`~ancre.index.store.PAYLOAD_INDEXES`, memory-mapped in indexed
    segments (an appendable segment keeps its own in RAM)."""
    if field in INTEGER_INDEXES:
        return qe.IntegerIndexParams(lookup=True, range=True, memory=qe.Memory.Cold)
    return qe.KeywordIndexParams(memory=qe.Memory.Cold)


def ensure_payload_indexes(shard: qe.EdgeShard, *, keywords: bool, upgrade: bool = False) -> None:
    """Create the payload indexes a shard lacks (:data:`~ancre.index.store.PAYLOAD_INDEXES`, and
    the keyword text index when ``keywords``), then flush. ``upgrade`` (a build process only: it
    re-reads every point) also re-creates the indexes made with another memory placement than
    :func:`_field_params` (by an older ancre)."""
    schema = shard.info().payload_schema
    for field in PAYLOAD_INDEXES:
        info = schema.get(field)
        if info is not None and upgrade and getattr(info.params, "memory", None) != qe.Memory.Cold:
            shard.update(qe.UpdateOperation.delete_field_index(field))
            info = None
        if info is None:
            shard.update(qe.UpdateOperation.create_field_index(field, _field_params(field)))
    if keywords and KEYWORD_FIELD not in schema:
        shard.update(qe.UpdateOperation.create_field_index(KEYWORD_FIELD, keyword_index_params()))
    shard.flush()


# ------------------------------------------------------------------------------------ writes
@dataclass(frozen=True)
class _DocSelector:
    """The points of ``doc_id`` with ``chunk_index >= from_chunk_index`` (the edge store's
    ``_doc_filter``: plain data, so a write can be journaled and replayed)."""

    doc_id: str
    from_chunk_index: int = 0

    def to_filter(self) -> qe.Filter:
        must: list[Any] = [qe.FieldCondition("doc_id", match=qe.MatchValue(self.doc_id))]
        if self.from_chunk_index > 0:
            must.append(qe.FieldCondition("chunk_index", range=qe.RangeFloat(gte=self.from_chunk_index)))
        return qe.Filter(must=must)


@dataclass(frozen=True)
class _Upsert:
    """Points to upsert: ids, ``(n, d)`` float32 vectors, payload dicts (keyword terms included)."""

    ids: tuple[str, ...]
    vectors: np.ndarray
    payloads: tuple[dict[str, Any], ...]

    def bytes_needed(self) -> int:
        """What writing these points may take on disk (:func:`~ancre.index.disk_space.upsert_bytes`)."""
        return upsert_bytes(self.vectors, self.payloads)

    def apply(self, shard: qe.EdgeShard) -> None:
        points = [qe.Point(pid, vec.tolist(), pl) for pid, vec, pl in zip(self.ids, self.vectors, self.payloads, strict=True)]
        for i in range(0, len(points), _UPSERT_BATCH):
            shard.update(qe.UpdateOperation.upsert_points(points[i : i + _UPSERT_BATCH]))


@dataclass(frozen=True)
class _Delete:
    selector: _DocSelector

    def apply(self, shard: qe.EdgeShard) -> None:
        shard.update(qe.UpdateOperation.delete_points_by_filter(self.selector.to_filter()))


@dataclass(frozen=True)
class _SetPayload:
    selector: _DocSelector
    payload: dict[str, Any]

    def apply(self, shard: qe.EdgeShard) -> None:
        shard.update(qe.UpdateOperation.set_payload_by_filter(self.selector.to_filter(), self.payload))


_Op = _Upsert | _Delete | _SetPayload


class _Live:
    """The shard serving one collection, its folder, and the reads in flight on it."""

    def __init__(self, shard: qe.EdgeShard, path: Path) -> None:
        self.shard = shard
        self.path = path
        self.readers = 0


class EdgeStore(QdrantBackend):
    """Embedded :class:`~ancre.index.store.Store` over ``data_dir/qdrant/`` (see module doc); the
    Store methods and the rights filter are :class:`~ancre.index._qdrant_base.QdrantBackend`'s.

    ``keywords``: keep BM25 in the engine (:meth:`keyword_search`); ``tuning``: index and search
    settings (:class:`EdgeTuning`). ``EdgeStore(data_dir)`` touches nothing; :meth:`open` takes
    the lock, checks or records the embedder and opens the shards. Every other method raises
    :class:`StoreError` before :meth:`open` or after :meth:`close`.
    """

    ENGINE = "embedded Qdrant"

    def __init__(
        self, data_dir: Path, *, keywords: bool = True, tuning: EdgeTuning | None = None, min_free_bytes: int = 256 * 2**20
    ) -> None:
        self.root = Path(data_dir) / "qdrant"
        self.space = SpaceGuard(self.root, min_free_bytes)
        """Free space checked before every write and build (:mod:`ancre.index.disk_space`)."""
        self.keywords = keywords
        self.tuning = tuning or EdgeTuning()
        self._dim = 0
        self._live: dict[str, _Live] = {}
        self._cv = threading.Condition()
        """Guards ``_live`` and the reader counts."""
        self._write_mu = threading.RLock()
        """Serialises writes, and blocks them during a build's copy and swap."""
        self._journals: dict[str, Journal] = {}
        self._build_mu = threading.Lock()
        self._closing = threading.Event()
        self._lock_fd: int | None = None
        self._meta: dict[str, Any] = {}
        self._keywords_ready = False
        self._backfilled: set[str] = set()
        self._search_params = qe.SearchParams(
            hnsw_ef=self.tuning.hnsw_ef,
            quantization=qe.QuantizationSearchParams(rescore=True, oversampling=self.tuning.oversampling),
            acorn=(qe.AcornSearchParams(enable=True, max_selectivity=self.tuning.acorn_max_selectivity)
                   if self.tuning.acorn else None),
        )

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
        if self._live:
            raise StoreError(f"store under {self.root} is already open")
        if dim <= 0:
            raise StoreError(f"invalid embedding dimension {dim}")
        self.root.mkdir(parents=True, exist_ok=True)
        self.space.require(open_bytes(self.root), "opening the index", margin=False)  # loading a shard writes
        self._acquire_lock()
        self._closing.clear()
        try:
            crashed = mark_open(self.root)
            self._check_meta(embedder_name, dim)
            config = shard_config(dim, self.tuning)
            for name in COLLECTIONS:
                path = self._current_path(name)
                self._remove_leftovers(name, path)
                shard = self._open_shard(path, config)
                with self._cv:
                    self._live[name] = _Live(shard, path)
                release_wal(path)  # read once by the load, never again
            self._dim = dim
            if crashed:
                check_after_crash(self, self.root, {name: live.path for name, live in self._live.items()})
            if self.keywords and not self._keywords_ready and not any(self._count(c) for c in COLLECTIONS):
                self._write_meta(keywords=True)  # nothing to fill in
                self._keywords_ready = True
        except BaseException:
            with contextlib.suppress(StoreError):  # keep the original error
                self._close_shards()
            self._release_lock()
            raise

    def close(self) -> None:
        """Stop a build in progress (its copy is deleted), flush and close the shards, release
        ``LOCK``. Idempotent."""
        self._closing.set()
        with self._build_mu:
            try:
                opened = bool(self._live)
                self._close_shards(flush=True)
                if opened:
                    mark_closed(self.root)
            finally:
                self._release_lock()

    def drop_all(self) -> None:
        """Delete the shards and the embedder record under ``data_dir/qdrant`` (reindex). Takes the
        lock for the duration: raises :class:`StoreLockedError` when another process owns it,
        :class:`StoreError` when the store is open in this object."""
        if self._live:
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

    # ---------------------------------------------------------------- index maintenance

    def unindexed_points(self, collection: str) -> int:
        """Points of ``collection`` not yet in an indexed segment (searched exactly)."""
        with self._use(collection) as shard:
            info = shard.info()
        return max(0, int(info.points_count) - int(info.indexed_vectors_count))

    def needs_build(self) -> bool:
        """Whether :meth:`maintain` would start a build: a collection has at least
        ``tuning.build_after_points`` points searched exactly, or keywords are to be filled in."""
        if self.keywords and not self._keywords_ready:
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
        process (:func:`~ancre.index.edge_build.release_wal`): the daemon calls it after every
        change and every 30 s."""
        reports: list[BuildReport] = []
        self._release_wal()
        for name in COLLECTIONS:
            stop = self._stopper(should_stop)
            if stop():
                break
            with self._use(name) as shard:
                info = shard.info()
            pending = int(info.points_count) - int(info.indexed_vectors_count)
            backfill = self.keywords and not self._keywords_ready and name not in self._backfilled
            if backfill and info.points_count == 0:
                self._backfilled.add(name)
            elif info.points_count and (force or backfill or pending >= self.tuning.build_after_points):
                with self._build_mu:
                    if self._closing.is_set():
                        break
                    reports.append(self._build(name, stop, backfill=backfill))
                if backfill:
                    self._backfilled.add(name)
        if self.keywords and not self._keywords_ready and self._backfilled >= set(COLLECTIONS):
            self._write_meta(keywords=True)
            self._keywords_ready = True
            log.info("keyword index filled in: BM25 now answered by the store")
        return reports

    def _release_wal(self) -> None:
        """The WAL pages the writes since the last call left in this process, given back
        (:func:`~ancre.index.edge_build.release_wal`; the writes flushed them to disk)."""
        with self._cv:
            paths = [live.path for live in self._live.values()]
        for path in paths:
            release_wal(path)

    def optimize(self) -> list[BuildReport]:
        """:meth:`maintain` with ``force``: every non-empty collection is rebuilt now (blocking;
        in a separate process, so queries go on)."""
        return self.maintain(force=True)

    def _stopper(self, should_stop: Callable[[], bool] | None) -> Callable[[], bool]:
        def stop() -> bool:
            return self._closing.is_set() or (should_stop is not None and should_stop())

        return stop

    def _build(self, name: str, stop: Callable[[], bool], *, backfill: bool = False) -> BuildReport:
        """One build of collection ``name`` (caller holds ``_build_mu``): copy, child, catch up,
        swap, retire the old shard. ``backfill``: the child also gives every point without index
        terms its terms (a store written while keywords were off)."""
        old = self._live[name]
        gen = 1 + max([0, *(int(m["gen"]) for p in self.root.iterdir() if (m := _BUILT.match(p.name)))])
        target = self.root / f"{name}@{gen}"
        journal: Journal | None = None
        built: qe.EdgeShard | None = None
        t0 = time.perf_counter()
        try:
            self.space.require(build_bytes(old.path), f"the index build of {name}")
            manifest = copy_tree(old.path, target)
            t_copy = time.perf_counter()
            with self._write_mu:
                old.shard.flush()
                refreshed = refresh_copy(old.path, target, manifest)
                journal = Journal(self.root / f"{_JOURNAL_PREFIX}{name}@{gen}")
                self._journals[name] = journal
            t1 = time.perf_counter()
            spec = {"dim": self._dim, "tuning": self.tuning.to_dict(), "keywords": self.keywords, "backfill": backfill}
            child = run_child(target, spec, stop)
            t2 = time.perf_counter()
            if stop():
                raise StoreError(f"index build of {name} stopped")
            warmed = prewarm(target, max_file_bytes=LOAD_FILES_MAX, should_stop=stop)
            t_warm = time.perf_counter()
            built = qe.EdgeShard.load(str(target), shard_config(self._dim, self.tuning))
            t_load = time.perf_counter()
            warmed += prewarm(target, skip=("wal",), should_stop=stop)
            if stop():
                raise StoreError(f"index build of {name} stopped")
            t3 = time.perf_counter()
            done = self._replay(journal, built, 0)
            while len(journal) - done > _CATCH_UP_LOCKED:
                done = self._replay(journal, built, done)
            t4 = time.perf_counter()
            with self._write_mu:
                done = self._replay(journal, built, done)
                built.flush()
                self._write_pointer(name, target.name)
                with self._cv:
                    self._live[name] = _Live(built, target)
                del self._journals[name]
                t5 = time.perf_counter()
            release_wal(target)
            built = None
        except BaseException:
            self._journals.pop(name, None)
            if built is not None:
                with contextlib.suppress(Exception):
                    built.close()
            shutil.rmtree(target, ignore_errors=True)
            raise
        finally:
            if journal is not None:
                journal.close()
        self._retire(old)
        report = BuildReport(
            collection=name, copy_s=round(t_copy - t0, 3), freeze_s=round(t1 - t_copy, 3),
            refreshed_mib=round(refreshed / 2**20, 1), build_s=round(t2 - t1, 3), load_s=round(t_load - t_warm, 3),
            warm_s=round((t_warm - t2) + (t3 - t_load), 3), warmed_mib=round(warmed / 2**20, 1),
            replay_s=round(t4 - t3, 3), swap_s=round(t5 - t4, 3), replayed=done, child=child,
        )
        log.info("index build swapped in", extra={"build": report.to_dict()})
        return report

    @staticmethod
    def _replay(journal: Journal, shard: qe.EdgeShard, start: int) -> int:
        """Apply the journal's entries from ``start`` to ``shard``; returns the new position."""
        stop = len(journal)
        for op in journal.read(start, stop):
            op.apply(shard)  # type: ignore[attr-defined]  # the journal holds the _Upsert/_Delete values _apply wrote
        return stop

    def _retire(self, old: _Live) -> None:
        """Close ``old`` once no read runs on it (its pages released first, without the GIL:
        :func:`~ancre.index.edge_build.release_pages`), and delete its folder."""
        with self._cv:
            while old.readers:
                self._cv.wait()
        release_pages(old.path)
        try:
            old.shard.close()
        except Exception as exc:  # its folder goes anyway: the new shard is live
            log.warning("closing a replaced shard: %s", exc)
        shutil.rmtree(old.path, ignore_errors=True)

    def _current_path(self, name: str) -> Path:
        """The folder of ``name``'s live shard: the one ``<name>.current`` names, else ``<name>``."""
        pointer = self.root / f"{name}{_POINTER_SUFFIX}"
        try:
            target = pointer.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return self.root / name
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"unreadable shard pointer {pointer}: {exc}") from exc
        m = _BUILT.match(target)
        if m is None or m["coll"] != name or not (self.root / target).is_dir():
            raise StoreError(f"shard pointer {pointer} names no shard of {name!r}: {target[:60]!r}")
        return self.root / target

    def _write_pointer(self, name: str, target: str) -> None:
        pointer = self.root / f"{name}{_POINTER_SUFFIX}"
        tmp = pointer.with_suffix(".tmp")
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(f"{target}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, pointer)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _remove_leftovers(self, name: str, live: Path) -> None:
        """Delete what an interrupted build left for ``name``: other built folders, journals, and
        the generation-0 folder once a built shard is live."""
        for p in self.root.iterdir():
            m = _BUILT.match(p.name)
            stale = (m is not None and m["coll"] == name and p != live) or (
                p.name.startswith(f"{_JOURNAL_PREFIX}{name}@")
            ) or (p.name == name and p != live)
            if stale:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)

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
            request = qe.QueryRequest(
                limit=asked, query=qe.TextQuery(KEYWORD_FIELD, joined(terms)), filter=flt,
                with_payload=_PAYLOAD, with_vector=False,
            )
            with self._errors(f"keyword search {collection}"), self._use(collection) as shard:
                hits = shard.query(request)
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
        rights: Any | None = None
        if principals is not None:
            rights = self._rights_filter(principals)
            if rights is None:
                return 0, dict.fromkeys(terms, 0)

        def counted(coll: str, *must: Any) -> int:
            flt = (self._rights_filter(principals, *must) if principals is not None
                   else self._filter(list(must)) if must else None)
            with self._errors(f"count in {coll}"), self._use(coll) as shard:
                return int(shard.count(qe.CountRequest(exact=True, filter=flt)))

        n = sum(counted(c) for c in COLLECTIONS) if rights is not None else sum(self.count(c) for c in COLLECTIONS)
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            cond = qe.FieldCondition(KEYWORD_FIELD, match=qe.MatchText(term))
            out[term] = min(sum(counted(c, cond) for c in COLLECTIONS), cap + 1)
        return n, out

    # ---------------------------------------------------------------- internals

    @contextlib.contextmanager
    def _use(self, collection: str) -> Iterator[qe.EdgeShard]:
        """The live shard of ``collection``, counted as in use until the block ends (a swap
        closes a replaced shard only after its last reader)."""
        self._check(collection)
        with self._cv:
            live = self._live.get(collection)
            if live is None:  # closed by another thread since the check
                raise StoreError(f"store {self._where} is not open")
            live.readers += 1
        try:
            yield live.shard
        finally:
            with self._cv:
                live.readers -= 1
                if not live.readers:
                    self._cv.notify_all()

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

    def _doc_filter(self, doc_id: str, from_chunk_index: int = 0) -> _DocSelector:
        return _DocSelector(doc_id, from_chunk_index)

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
        self._apply(collection, _Upsert(tuple(pid for pid, _, _ in rows), vectors, tuple(payloads)))

    def _delete(self, collection: str, flt: _DocSelector) -> None:
        self._apply(collection, _Delete(flt))

    def _set_payload(self, collection: str, flt: _DocSelector, payload: dict[str, Any]) -> None:
        self._apply(collection, _SetPayload(flt, payload))

    def _apply(self, collection: str, op: _Op) -> None:
        """Apply ``op`` to the live shard and flush, under the write lock; journaled while a build
        of the collection runs."""
        self.space.require(op.bytes_needed() if isinstance(op, _Upsert) else 0, f"writing to {collection}")
        with self._write_mu, self._use(collection) as shard:
            op.apply(shard)
            shard.flush()
            journal = self._journals.get(collection)
            if journal is not None:
                journal.append(op)

    def _nearest(
        self, collection: str, vector: list[float], flt: qe.Filter, limit: int, exact: bool = False
    ) -> list[qe.ScoredPoint]:
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vector), filter=flt, with_payload=_PAYLOAD, with_vector=False,
            params=qe.SearchParams(exact=True) if exact else self._search_params,
        )
        with self._use(collection) as shard:
            return shard.query(request)

    def _read(self, collection: str, flt: qe.Filter, limit: int) -> list[qe.Record]:
        request = qe.ScrollRequest(limit=limit, filter=flt, with_payload=_PAYLOAD, with_vector=False)
        with self._use(collection) as shard:
            records, _ = shard.scroll(request)
        return records

    def _page(self, collection: str, offset: Any, batch: int) -> tuple[list[qe.Record], Any]:
        request = qe.ScrollRequest(offset=offset, limit=batch, with_payload=_PAYLOAD, with_vector=False)
        with self._use(collection) as shard:
            return shard.scroll(request)

    def _vector_page(
        self, collection: str, flt: qe.Filter, offset: Any, batch: int
    ) -> tuple[list[tuple[Any, Any]], Any]:
        request = qe.ScrollRequest(
            offset=offset, limit=batch, filter=flt, with_payload=_TEXT_ONLY, with_vector=True
        )
        with self._use(collection) as shard:
            records, after = shard.scroll(request)
        return [(r.payload, r.vector) for r in records], after

    def _count(self, collection: str) -> int:
        with self._use(collection) as shard:
            return int(shard.count(qe.CountRequest(exact=True)))

    def _open_shard(self, path: Path, config: qe.EdgeConfig) -> qe.EdgeShard:
        try:
            with self._errors(f"open shard {path}"):
                if (path / "edge_config.json").exists():
                    shard = qe.EdgeShard.load(str(path), config)
                else:
                    shard = qe.EdgeShard.create(str(path), config)
                ensure_payload_indexes(shard, keywords=self.keywords)
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
        (:meth:`maintain`)."""
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
            self._meta = meta
            if not self.keywords and meta.get("keywords") is not False:
                self._write_meta(keywords=False)  # points written from now on carry no terms
            self._keywords_ready = self.keywords and meta.get("keywords") is True
            return
        if any((self.root / name / "edge_config.json").exists() for name in COLLECTIONS):
            raise StoreError(
                f"the index under {self.root} has shards but no {META_FILE} (which embedder built "
                f"it is unknown); run `ancre reindex --config <file>` to rebuild it"
            )
        self._meta = {"embedder": embedder_name, "dim": dim}
        self._write_meta(keywords=self.keywords)
        self._keywords_ready = self.keywords

    def _write_meta(self, **fields: Any) -> None:
        """Update ``ancre_meta.json`` with ``fields``, atomically (tmp, fsync, rename)."""
        self._meta = {**self._meta, **fields}
        meta_path = self.root / META_FILE
        tmp = meta_path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self._meta, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, meta_path)

    @property
    def keywords_ready(self) -> bool:
        """Whether :meth:`keyword_search` sees every point: keywords are on and every point carries
        its index terms (a store written without them gets them from the next build)."""
        return self._keywords_ready

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
        with self._cv:
            lives, self._live = list(self._live.values()), {}
            while any(live.readers for live in lives):
                self._cv.wait()
        self._dim = 0
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


__all__ = ["BuildReport", "EdgeStore", "EdgeTuning", "ensure_payload_indexes", "keyword_index_params", "shard_config"]
