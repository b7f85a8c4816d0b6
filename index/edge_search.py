"""Reads of the embedded store's live shards (:class:`ShardReader`): the vector search with the
store's search settings, the keyword search on the engine's BM25 text index, filtered reads,
pages and counts — each one engine call on the live shard of one collection, holding that shard
(:class:`~ancre.index.edge_shards.LiveShards`) only for the call. The rights filter is built by
the caller (:class:`~ancre.index._qdrant_base.QdrantBackend`), never here.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import qdrant_edge as qe

from ancre.index.edge_config import EdgeTuning
from ancre.index.edge_shards import LiveShards
from ancre.index.keywords import KEYWORD_FIELD

PAYLOAD = qe.PayloadSelector.Exclude([KEYWORD_FIELD])
"""What reads return: the payload without the index terms (no one reads them back)."""
_TEXT_ONLY = qe.PayloadSelector.Include(["text", "header"])
"""What :meth:`~ancre.index.store.Store.vectors_of` reads beside the vectors."""
_EXACT = qe.SearchParams(exact=True)


@dataclass(frozen=True)
class SearchPlan:
    """How one vector search runs on one shard: ``selectivity``, the rights filter's estimated
    share of the shard's points (0–1; 1 without a filter), and ``hnsw_ef``, the beam of the
    graph search in the segments where the engine walks the graph."""

    selectivity: float
    hnsw_ef: int


def plan_search(tuning: EdgeTuning, kept: int, total: int) -> SearchPlan:
    """The :class:`SearchPlan` for a filter the engine estimates to keep ``kept`` of ``total``
    points: the beam widened as the filter narrows, ``hnsw_ef / selectivity``, between
    ``hnsw_ef`` and ``hnsw_ef_max`` (:class:`~ancre.index.edge_config.EdgeTuning`).

    Why: a graph search expands only the neighbours the filter keeps, so a filter keeping a share
    ``s`` of the points leaves each node about ``s·m`` of its ``m`` links, and on clustered
    embeddings the paths to a question's nearest readable chunks break; a wider beam keeps more
    of them. Narrower filters never reach the graph: a segment where the filter keeps fewer
    points than the full-scan threshold (``full_scan_kb``) is scanned instead, on its int8
    vectors (the engine decides per segment, from the same estimate)."""
    selectivity = 1.0 if total <= 0 else min(1.0, max(kept, 0) / total)
    ef = math.ceil(tuning.hnsw_ef / max(selectivity, 1e-6))
    return SearchPlan(selectivity, int(min(tuning.hnsw_ef_max, max(tuning.hnsw_ef, ef))))


def search_params(tuning: EdgeTuning, hnsw_ef: int | None = None) -> qe.SearchParams:
    """The engine's search parameters for ``tuning`` with the beam ``hnsw_ef`` (default
    ``tuning.hnsw_ef``): int8 candidates rescored on the originals (``oversampling`` × the
    limit), ACORN under ``acorn_max_selectivity`` (the engine decides per segment)."""
    return qe.SearchParams(
        hnsw_ef=hnsw_ef or tuning.hnsw_ef,
        quantization=qe.QuantizationSearchParams(rescore=True, oversampling=tuning.oversampling),
        acorn=(qe.AcornSearchParams(enable=True, max_selectivity=tuning.acorn_max_selectivity)
               if tuning.acorn else None),
    )


class ShardReader:
    """One engine read per call on the live shard of a collection of ``shards``, searched with
    ``tuning``'s settings. Raises the engine's errors (the store turns them into
    :class:`~ancre.errors.StoreError`) and :class:`~ancre.errors.StoreError` when the store is
    not open."""

    def __init__(self, shards: LiveShards, tuning: EdgeTuning) -> None:
        self._shards = shards
        self._tuning = tuning
        self._params: dict[int, qe.SearchParams] = {}
        self._params_mu = threading.Lock()

    def plan(self, shard: qe.EdgeShard, flt: qe.Filter | None) -> SearchPlan:
        """The :class:`SearchPlan` of a search under ``flt`` on ``shard``, from the engine's
        estimates of the points it keeps and of all points (two reads of the payload index's
        counts, a few microseconds each)."""
        total = int(shard.count(qe.CountRequest(exact=False)))
        kept = total if flt is None else int(shard.count(qe.CountRequest(exact=False, filter=flt)))
        return plan_search(self._tuning, kept, total)

    def _search_params(self, plan: SearchPlan) -> qe.SearchParams:
        with self._params_mu:
            params = self._params.get(plan.hnsw_ef)
            if params is None:
                params = self._params[plan.hnsw_ef] = search_params(self._tuning, plan.hnsw_ef)
        return params

    def nearest(
        self, collection: str, vector: list[float], flt: qe.Filter, limit: int, exact: bool = False
    ) -> list[qe.ScoredPoint]:
        """Top-``limit`` points by cosine similarity under ``flt``, best first; ``exact``: by a
        full scan of the filtered points (no graph, no quantization); else with the beam
        :func:`plan_search` gives for the filter's estimated selectivity."""
        with self._shards.use(collection) as shard:
            params = _EXACT if exact else self._search_params(self.plan(shard, flt))
            request = qe.QueryRequest(
                limit=limit, query=qe.Query.Nearest(vector), filter=flt, with_payload=PAYLOAD, with_vector=False,
                params=params,
            )
            return shard.query(request)

    def keyword(self, collection: str, text: str, flt: qe.Filter, limit: int) -> list[qe.ScoredPoint]:
        """Top-``limit`` points by BM25 of the whitespace-separated terms ``text`` over
        :data:`~ancre.index.keywords.KEYWORD_FIELD` under ``flt``, best first."""
        request = qe.QueryRequest(
            limit=limit, query=qe.TextQuery(KEYWORD_FIELD, text), filter=flt, with_payload=PAYLOAD, with_vector=False,
        )
        with self._shards.use(collection) as shard:
            return shard.query(request)

    def read(self, collection: str, flt: qe.Filter, limit: int) -> list[qe.Record]:
        """Up to ``limit`` records matching ``flt``."""
        request = qe.ScrollRequest(limit=limit, filter=flt, with_payload=PAYLOAD, with_vector=False)
        with self._shards.use(collection) as shard:
            records, _ = shard.scroll(request)
        return records

    def page(self, collection: str, offset: Any, batch: int) -> tuple[list[qe.Record], Any]:
        """One unfiltered page of ``batch`` records from ``offset`` and the next offset."""
        request = qe.ScrollRequest(offset=offset, limit=batch, with_payload=PAYLOAD, with_vector=False)
        with self._shards.use(collection) as shard:
            return shard.scroll(request)

    def vector_page(
        self, collection: str, flt: qe.Filter, offset: Any, batch: int
    ) -> tuple[list[tuple[Any, Any]], Any]:
        """One page of ``(payload with "text", vector)`` pairs matching ``flt`` and the next offset."""
        request = qe.ScrollRequest(offset=offset, limit=batch, filter=flt, with_payload=_TEXT_ONLY, with_vector=True)
        with self._shards.use(collection) as shard:
            records, after = shard.scroll(request)
        return [(r.payload, r.vector) for r in records], after

    def count(self, collection: str, flt: qe.Filter | None = None) -> int:
        """Exact number of points (matching ``flt``)."""
        with self._shards.use(collection) as shard:
            return int(shard.count(qe.CountRequest(exact=True, filter=flt)))

    def index_state(self, collection: str) -> tuple[int, int]:
        """``(points, points not yet in an indexed segment)`` — the latter searched exactly."""
        with self._shards.use(collection) as shard:
            info = shard.info()
        points = int(info.points_count)
        return points, max(0, points - int(info.indexed_vectors_count))
