"""Hybrid retrieval with rights re-checked on a fresh read (docs/ARCHITECTURE.md "Data flow of a question" steps 1–3).

1. the question is embedded; vector top ``candidates`` (30) in each collection *with* the rights
   filter;
2. BM25 top ``candidates`` over the in-memory snapshot, scoring only the chunks the snapshot's ACL
   columns say the user may read (:meth:`~ancre.index.bm25.Bm25Index.search`), so a user who reads
   a small part of the index still gets his best keyword matches; every hit is then re-read from
   the store by id *with* the rights filter, in one call per collection — hits that are gone or now
   forbidden are dropped: the snapshot never decides rights;
3. Reciprocal Rank Fusion, ``score = Σ 1 / (k + rank)`` with ``k = 60`` and 1-based ranks
   (Cormack, Clarke & Büttcher, SIGIR 2009), so scores lie in [0, 2/61 ≈ 0.033];
4. with a :class:`~ancre.query.live_acl.LiveAclChecker` (``query.live_acl``), the documents of the
   best fused results have their ACL re-read from their source before they are returned: a
   document the fresh ACL (or an unreachable source) refuses is dropped and the next results
   move up — in rounds, so only the documents that may be shown are read (usually one round).

Steps 1 and 2 overlap: the keyword side (it needs no query vector) runs on a worker thread of
the retriever's pool while the calling thread embeds the question and searches the vectors, so a
question costs about the longer of the two, not their sum (the engines release the GIL while
they search; docs/BENCHMARKS.md, scale table).

An empty principal set returns ``[]`` before anything is searched.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ancre.index.bm25 import Bm25Hit, Bm25Manager
from ancre.index.embedders import Embedder
from ancre.index.store import KeywordStore, Store
from ancre.models import COLLECTIONS, SearchResult, StoredPoint
from ancre.query.live_acl import LiveAclChecker, RightsCheck, Unverified, unchecked, unverified
from ancre.query.relevance import RARE_FRACTION, RARE_MIN_DF
from ancre.settings import QueryConfig

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class RetrievalTimings:
    """Wall-clock milliseconds of each step (the query embedding timed apart). ``bm25_ms`` and
    ``reread_ms`` (the keyword side) run on a pool thread at the same time as ``embed_ms`` +
    ``vector_ms``: they overlap, they do not add up."""

    embed_ms: float = 0.0
    vector_ms: float = 0.0
    bm25_ms: float = 0.0
    reread_ms: float = 0.0
    fuse_ms: float = 0.0
    live_acl_ms: float = 0.0


@dataclass(frozen=True)
class Retrieval:
    """Fused results (best first) plus what was dropped by the rights re-read."""

    results: tuple[SearchResult, ...]
    bm25_dropped: int = 0
    """BM25 hits the fresh read refused (deleted or no longer readable by this user)."""
    timings: RetrievalTimings = field(default_factory=RetrievalTimings)
    rights: tuple[RightsCheck, ...] = ()
    """The rights decision on every document considered for the results, in order (those
    dropped included): live checks, or ``off`` ones when the live check is disabled."""

    @property
    def unverified(self) -> tuple[Unverified, ...]:
        """Documents left out because their rights could not be checked live, per source."""
        return unverified(self.rights)


def _best_first(p: StoredPoint) -> tuple[float, str, int]:
    """Sort key of a candidate list: best score first; equal scores (a copy of a document in
    another source scores exactly as the original) by document id, then chunk index, so that the
    order — and which copy the context keeps — never depends on the engine's internal order."""
    return -(p.score or 0.0), p.payload.doc_id, p.payload.chunk_index


def rrf(lists: dict[str, Sequence[str]], k: int = 60) -> dict[str, tuple[float, dict[str, int]]]:
    """Reciprocal Rank Fusion of ranked id lists: ``{id: (Σ 1/(k + rank), {list: rank})}``,
    ranks 1-based. Source: Cormack et al., "Reciprocal Rank Fusion outperforms Condorcet and
    individual rank learning methods", SIGIR 2009."""
    fused: dict[str, tuple[float, dict[str, int]]] = {}
    for name, ids in lists.items():
        for rank, pid in enumerate(ids, start=1):
            score, ranks = fused.get(pid, (0.0, {}))
            if name in ranks:
                continue
            ranks = {**ranks, name: rank}
            fused[pid] = (score + 1.0 / (k + rank), ranks)
    return fused


_Ranked = tuple[str, tuple[float, dict[str, int]]]
"""One fused result: ``(point id, (RRF score, {list: 1-based rank}))``."""

KEYWORD_WORKERS = 4
"""Threads of a retriever's keyword pool: keyword searches of that many questions run at once,
each beside its own question's embedding and vector search (more questions queue for a thread
while their vector side goes on)."""


@dataclass(frozen=True)
class _KeywordSide:
    """The keyword side of one question: the hits best first, ``{point id: fresh point}`` of
    those the store still lets the user read, and its durations (milliseconds)."""

    hits: list[Bm25Hit]
    fresh: dict[str, StoredPoint]
    search_ms: float
    reread_ms: float


def _store_keyword_hits(
    kstore: KeywordStore, question: str, principals: frozenset[str], k: int
) -> tuple[list[Bm25Hit], dict[str, StoredPoint]]:
    """The best ``k`` keyword hits of the store itself over every collection (its rights filter
    is inside the query, so the points are a fresh read), best first, and ``{point id: point}``."""
    kw: list[StoredPoint] = []
    for coll in COLLECTIONS if k else ():
        kw.extend(kstore.keyword_search(coll, question, principals, k))
    kw.sort(key=_best_first)
    hits = [Bm25Hit(p.id, p.payload.collection, p.score or 0.0) for p in kw[:k]]
    return hits, {p.id: p for p in kw[:k]}


def _results(order: list[_Ranked], by_id: dict[str, StoredPoint]) -> tuple[SearchResult, ...]:
    """The :class:`~ancre.models.SearchResult` of each fused result of ``order``, in order."""
    results = []
    for pid, (score, ranks) in order:
        pl = by_id[pid].payload
        results.append(
            SearchResult(
                point_id=pid, doc_id=pl.doc_id, filename=pl.filename, path=pl.path,
                location=pl.location, chunk_index=pl.chunk_index, score=score,
                found_by=tuple(name for name in ("vector", "bm25") if name in ranks),
                text=pl.text, collection=pl.collection, ranks=ranks, subject=pl.subject,
                heading_path=tuple(pl.heading_path),
            )
        )
    return tuple(results)


class Retriever:
    """The query core's retrieval step; thread-safe as long as the store and embedder are."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        bm25: Bm25Manager,
        cfg: QueryConfig,
        live: LiveAclChecker | None = None,
        *,
        keyword_in_store: bool = False,
    ) -> None:
        """``keyword_in_store``: the keyword side is the store's ``keyword_search`` (BM25 kept in
        the engine, ``[store] bm25 = "qdrant"``: the embedded store's text index, a server's sparse
        vectors) instead of the ``bm25`` snapshot — once the store says its keywords are ready
        (:class:`~ancre.index.store.KeywordStore`); until then the snapshot answers."""
        self.store = store
        self.embedder = embedder
        self.bm25 = bm25
        self.cfg = cfg
        self.live = live
        """The live rights check (step 4); ``None``: the index's ACLs decide alone."""
        self.keyword_in_store = keyword_in_store
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _keyword_pool(self) -> ThreadPoolExecutor:
        """The pool the keyword side runs on (made at the first question, ``KEYWORD_WORKERS``
        threads, named ``ancre-keywords``)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(KEYWORD_WORKERS, thread_name_prefix="ancre-keywords")
            return self._pool

    def term_stats(self, terms: Sequence[str], principals: frozenset[str]) -> tuple[int, dict[str, int]]:
        """Document frequencies of index ``terms`` over the chunks a user holding ``principals``
        may read: ``(chunks, {term: chunks containing it})`` from the BM25 snapshot under its
        rights mask (:meth:`~ancre.index.bm25.Bm25Index.term_stats`), or, with BM25 in the store,
        counted by the store under the rights filter up to just past the rarity limit (enough to
        tell rare from common). Used by the extractive gate (:mod:`ancre.query.relevance`): never
        over the whole index, so that whether a word is rare — which can turn an answer into a
        refusal — says nothing about documents the user may not read. An empty set: ``(0, 0…)``."""
        store = self._keyword_store()
        if store is not None:
            n = sum(self.store.count(c) for c in COLLECTIONS)
            cap = int(max(RARE_MIN_DF, RARE_FRACTION * n)) + 1
            return store.keyword_term_counts(terms, cap, principals)
        return self.bm25.get().term_stats(terms, principals)

    def _keyword_store(self) -> KeywordStore | None:
        """The store, when it answers the keyword side now (see ``keyword_in_store``)."""
        store = self.store
        if self.keyword_in_store and isinstance(store, KeywordStore) and store.keywords_ready:
            return store
        return None

    def retrieve(
        self,
        question: str,
        principals: frozenset[str],
        limit: int | None = None,
        *,
        lists: tuple[str, ...] = ("vector", "bm25"),
        candidates: int | None = None,
    ) -> Retrieval:
        """Top ``limit`` (default ``cfg.limit``) fused results readable by ``principals``.
        ``lists``: the candidate lists to fuse (``"vector"``, ``"bm25"``); one alone for the
        retrieval evaluation's vector-only and BM25-only rows. ``candidates``: taken from each
        list before fusion (default ``cfg.candidates``; a list question asks for more).

        Raises :class:`~ancre.errors.EmbedderError` / :class:`~ancre.errors.StoreError` from the
        backends; never returns a result that the store's rights filter refused.
        """
        if not principals:
            return Retrieval(())
        limit = self.cfg.limit if limit is None else limit
        n = self.cfg.candidates if candidates is None else candidates
        keyword: Future[_KeywordSide] | None = None
        if "bm25" in lists:  # started first: it needs no query vector
            keyword = self._keyword_pool().submit(self._keyword_side, question, principals, n)
        t0 = time.perf_counter()
        try:
            qvec = self.embedder.embed_query(question) if "vector" in lists else None
            t1 = time.perf_counter()
            vec_hits = self._vector_hits(qvec, principals, n)
            t2 = time.perf_counter()
        except BaseException:
            if keyword is not None:
                keyword.cancel()
            raise
        side = keyword.result() if keyword is not None else _KeywordSide([], {}, 0.0, 0.0)
        t4 = time.perf_counter()
        by_id: dict[str, StoredPoint] = {p.id: p for p in vec_hits}
        bm25_hits, fresh = side.hits, side.fresh
        bm25_ids = [h.point_id for h in bm25_hits if h.point_id in fresh]
        for pid in bm25_ids:
            by_id.setdefault(pid, fresh[pid])

        fused = rrf({"vector": [p.id for p in vec_hits], "bm25": bm25_ids}, k=self.cfg.rrf_k)
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[0]))
        t_fused = time.perf_counter()
        order, rights = self._allowed(ranked, by_id, principals, limit)
        t_live = time.perf_counter()
        results = _results(order, by_id)
        t5 = time.perf_counter()
        ms = 1000.0
        return Retrieval(
            results,
            bm25_dropped=len(bm25_hits) - len(bm25_ids),
            timings=RetrievalTimings(
                (t1 - t0) * ms, (t2 - t1) * ms, side.search_ms, side.reread_ms,
                (t5 - t4 - (t_live - t_fused)) * ms, (t_live - t_fused) * ms,
            ),
            rights=rights,
        )

    def _keyword_side(self, question: str, principals: frozenset[str], k: int) -> _KeywordSide:
        """The best ``k`` keyword hits of ``question`` and a fresh read of them under the rights
        filter: the store's own keyword search when it keeps BM25 (the rights filter inside the
        query), else the snapshot's masked search then a re-read by id (step 2). Runs on the
        keyword pool; raises what the store or snapshot raise."""
        t0 = time.perf_counter()
        kstore = self._keyword_store()
        if kstore is not None:  # rights filter inside the query: the hits are a fresh read
            hits, fresh = _store_keyword_hits(kstore, question, principals, k)
            return _KeywordSide(hits, fresh, (time.perf_counter() - t0) * 1000.0, 0.0)
        hits = self.bm25.get().search(question, k, principals)
        t1 = time.perf_counter()
        fresh = self._reread(hits, principals)
        return _KeywordSide(hits, fresh, (t1 - t0) * 1000.0, (time.perf_counter() - t1) * 1000.0)

    def _vector_hits(self, qvec: np.ndarray | None, principals: frozenset[str], n: int) -> list[StoredPoint]:
        """The best ``n`` vector hits for ``qvec`` (``(d,)`` float32) over every collection, under the store's rights
        filter, best first (none without a query vector)."""
        hits: list[StoredPoint] = []
        if qvec is not None:
            for coll in COLLECTIONS:
                hits.extend(self.store.search(coll, qvec, principals, n))
        hits.sort(key=_best_first)
        return hits[:n]

    def _reread(self, hits: list[Bm25Hit], principals: frozenset[str]) -> dict[str, StoredPoint]:
        """``{point id: point}`` of the snapshot's ``hits`` re-read from the store under the
        rights filter, one call per collection: a hit gone or now forbidden is absent."""
        wanted: dict[str, list[str]] = defaultdict(list)
        for h in hits:
            wanted[h.collection].append(h.point_id)
        fresh: dict[str, StoredPoint] = {}
        for coll, ids in wanted.items():
            for p in self.store.retrieve(coll, ids, principals):
                fresh[p.id] = p
        return fresh

    def _allowed(
        self,
        ranked: list[_Ranked],
        by_id: dict[str, StoredPoint],
        principals: frozenset[str],
        limit: int,
    ) -> tuple[list[_Ranked], tuple[RightsCheck, ...]]:
        """The first ``limit`` of ``ranked`` whose document passes the live check, and every
        check made. Each round checks the unchecked documents among the current top ``limit``;
        a refused document lets the next results move up (the loop ends when the top is made
        of checked, readable documents or the candidates run out)."""
        if self.live is None:
            top = ranked[:limit]
            return top, tuple(unchecked((by_id[pid].payload for pid, _ in top), principals).values())
        checks: dict[str, RightsCheck] = {}
        while True:
            top = []
            need: dict[str, StoredPoint] = {}
            for item in ranked:
                pl = by_id[item[0]].payload
                check = checks.get(pl.doc_id)
                if check is not None and not check.readable:
                    continue
                top.append(item)
                if check is None:
                    need.setdefault(pl.doc_id, by_id[item[0]])
                if len(top) == limit:
                    break
            if not need:
                return top, tuple(checks.values())
            checks.update(self.live.check([p.payload for p in need.values()], principals))
