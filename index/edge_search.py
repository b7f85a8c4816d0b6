"""Reads of the embedded store's live shards (:class:`ShardReader`): the vector search with the
store's search settings, the keyword search on the engine's BM25 text index, filtered reads,
pages and counts — each one engine call on the live shard of one collection, holding that shard
(:class:`~ancre.index.edge_shards.LiveShards`) only for the call. The rights filter is built by
the caller (:class:`~ancre.index._qdrant_base.QdrantBackend`), never here.
"""

from __future__ import annotations

from typing import Any

import qdrant_edge as qe

from ancre.index.edge_config import EdgeTuning
from ancre.index.edge_shards import LiveShards
from ancre.index.keywords import KEYWORD_FIELD

PAYLOAD = qe.PayloadSelector.Exclude([KEYWORD_FIELD])
"""What reads return: the payload without the index terms (no one reads them back)."""
_TEXT_ONLY = qe.PayloadSelector.Include(["text"])
"""What :meth:`~ancre.index.store.Store.vectors_of` reads beside the vectors."""
_EXACT = qe.SearchParams(exact=True)


def search_params(tuning: EdgeTuning) -> qe.SearchParams:
    """The engine's search parameters for ``tuning``: the HNSW beam, int8 candidates rescored on
    the originals (``oversampling`` × the limit), ACORN under ``acorn_max_selectivity``."""
    return qe.SearchParams(
        hnsw_ef=tuning.hnsw_ef,
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
        self._params = search_params(tuning)

    def nearest(
        self, collection: str, vector: list[float], flt: qe.Filter, limit: int, exact: bool = False
    ) -> list[qe.ScoredPoint]:
        """Top-``limit`` points by cosine similarity under ``flt``, best first; ``exact``: by a
        full scan of the filtered points (no graph, no quantization)."""
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vector), filter=flt, with_payload=PAYLOAD, with_vector=False,
            params=_EXACT if exact else self._params,
        )
        with self._shards.use(collection) as shard:
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
