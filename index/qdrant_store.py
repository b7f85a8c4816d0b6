"""The :class:`~ancre.index.store.Store` backend over ``qdrant-client``: a Qdrant server or cluster
(production), or qdrant-client's local mode (tests only: it speaks the server API but filters in
Python and ignores payload indexes).

The embedder is recorded in each collection's own metadata (``create_collection(metadata=…)``,
Qdrant server ≥ 1.16 and local mode): ``{"ancre_embedder": "e5-local:…", "ancre_dim": 384}``.
Writes use ``wait=True``: they return once the server applied them (its WAL makes them durable).

With ``sparse_bm25=True`` (``[store] bm25 = "qdrant"``) each collection also has the sparse vector
``bm25`` with ``modifier = IDF``, every upsert writes it (:mod:`ancre.index.sparse_bm25`), and
:meth:`QdrantStore.keyword_search` is the keyword side of retrieval, rights filter in the query.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client import models as qm

from ancre.errors import EmbedderMismatchError, StoreError
from ancre.index import sparse_bm25
from ancre.index._filters import INTEGER_INDEXES, REINDEX_COMMAND, mismatch_message, readable_now, to_stored
from ancre.index._qdrant_base import _MAX_OVERFETCH, QdrantBackend, engine_errors
from ancre.index.store import PAYLOAD_INDEXES
from ancre.models import COLLECTIONS, ChunkPayload, StoredPoint

META_EMBEDDER = "ancre_embedder"
META_DIM = "ancre_dim"
_UPSERT_BATCH = 256
"""Points per upsert request (keeps requests well under the server's 32 MB default limit)."""


class QdrantStore(QdrantBackend):
    """:class:`~ancre.index.store.Store` over a :class:`QdrantClient` (which it owns and closes);
    the Store methods and the rights filter are :class:`~ancre.index._qdrant_base.QdrantBackend`'s.

    Every method but :meth:`open` raises :class:`StoreError` before :meth:`open`; any client
    failure (unreachable server, timeout, HTTP error) is raised as :class:`StoreError`.
    """

    ENGINE = "Qdrant"

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        """Failures as :class:`StoreError` naming the server (``Qdrant at http://… (store.url)``)."""
        return engine_errors(f"{self.ENGINE} at {self.location}", action)

    def __init__(
        self, client: QdrantClient, location: str | None = None, *, sparse_bm25: bool = False
    ) -> None:
        """``location`` names the store in messages (URL or path); taken from the client if absent.
        ``sparse_bm25``: keep BM25 as sparse vectors (see the module doc)."""
        self.client = client
        self.sparse_bm25 = sparse_bm25
        opts = getattr(client, "init_options", {}) or {}
        self.location = location or str(
            opts.get("url") or opts.get("path") or opts.get("host") or opts.get("location") or "Qdrant"
        )
        self._dim = 0

    @classmethod
    def from_url(
        cls, url: str, api_key: str | None = None, timeout_s: float = 30.0, *, sparse_bm25: bool = False
    ) -> QdrantStore:
        """A store on the Qdrant server at ``url`` (REST, e.g. ``http://127.0.0.1:6333``);
        ``timeout_s`` per request in seconds (rounded up to whole seconds, the client's unit).
        Connects lazily: an unreachable server surfaces at :meth:`open` as :class:`StoreError`."""
        client = QdrantClient(
            url=url, api_key=api_key, timeout=max(1, math.ceil(timeout_s)), check_compatibility=False
        )
        return cls(client, location=f"{url} (store.url)", sparse_bm25=sparse_bm25)

    @classmethod
    def local(cls, path: Path, *, sparse_bm25: bool = False) -> QdrantStore:
        """qdrant-client local mode persisted under ``path`` (tests only; one client per path)."""
        return cls(QdrantClient(path=str(path)), location=str(path), sparse_bm25=sparse_bm25)

    # ---------------------------------------------------------------- lifecycle

    def open(self, embedder_name: str, dim: int) -> None:
        """Create each collection (cosine, ``dim`` dims, payload indexes, embedder in metadata)
        or check the existing one. Raises :class:`EmbedderMismatchError` when a collection was
        built with another embedder name or dimension, :class:`StoreError` when it carries no
        embedder record (made outside ancre, or a server without collection metadata)."""
        if dim <= 0:
            raise StoreError(f"invalid embedding dimension {dim}")
        for name in COLLECTIONS:
            with self._errors(f"open collection {name}"):
                if not self.client.collection_exists(name):
                    self._create(name, embedder_name, dim)
                info = self.client.get_collection(name)
            meta = info.config.metadata or {}
            if META_EMBEDDER not in meta or META_DIM not in meta:
                raise StoreError(
                    f"collection {name!r} at {self.location} has no ancre embedder record "
                    f"(created outside ancre, or a Qdrant server older than 1.16 without collection "
                    f"metadata); run `{REINDEX_COMMAND}` to rebuild it"
                )
            built_name, built_dim = str(meta[META_EMBEDDER]), int(meta[META_DIM])
            if (built_name, built_dim) != (embedder_name, dim):
                raise EmbedderMismatchError(
                    mismatch_message(
                        f"{self.location} (collection {name!r})",
                        built_name,
                        built_dim,
                        embedder_name,
                        dim,
                    )
                )
            has_sparse = sparse_bm25.VECTOR_NAME in (info.config.params.sparse_vectors or {})
            if has_sparse != self.sparse_bm25:
                raise StoreError(
                    f"collection {name!r} at {self.location} was built "
                    f"{'with' if has_sparse else 'without'} BM25 in Qdrant but the configuration "
                    f"says store.bm25 = {'qdrant' if self.sparse_bm25 else 'snapshot'!r}; set it back, "
                    f"or run `{REINDEX_COMMAND}` to rebuild the index"
                )
            with self._errors(f"index payload of {name}"):
                for field in PAYLOAD_INDEXES:
                    if field not in (info.payload_schema or {}):
                        self._create_index(name, field)
        self._dim = dim

    def drop_all(self) -> None:
        """Delete both collections (and with them the embedder record). Raises :class:`StoreError`."""
        for name in COLLECTIONS:
            with self._errors(f"drop collection {name}"):
                if self.client.collection_exists(name):
                    self.client.delete_collection(name)
        self._dim = 0

    def close(self) -> None:
        """Close the client (local mode: release its directory). Idempotent."""
        self._dim = 0
        with self._errors("close"):
            self.client.close()

    # ---------------------------------------------------------------- reads beyond Store

    @property
    def keywords_ready(self) -> bool:
        """Whether the collections keep BM25 (``sparse_bm25``): every point then has its vector."""
        return self.sparse_bm25

    def keyword_search(
        self, collection: str, question: str, principals: frozenset[str], limit: int
    ) -> list[StoredPoint]:
        """Top-``limit`` points by BM25 (sparse vector ``bm25``, IDF computed by Qdrant) under
        the rights filter, in one query, best first, ``score`` set; only points sharing a term
        with ``question``; points whose grants refuse ``principals`` now are dropped and more are
        asked for, as :meth:`search` does. ``[]`` for empty ``principals``, a question of stop words, or a store
        opened without ``sparse_bm25`` (raises :class:`StoreError` then)."""
        self._check(collection)
        if not self.sparse_bm25:
            raise StoreError(f"store at {self.location} keeps no BM25 (store.bm25 = 'snapshot')")
        flt = self._rights_filter(principals)
        indices, values = sparse_bm25.query_vector(question)
        if flt is None or limit <= 0 or not indices:
            return []
        asked = limit
        while True:
            with self._errors(f"keyword search {collection}"):
                hits = self.client.query_points(
                    collection,
                    query=qm.SparseVector(indices=indices, values=values),
                    using=sparse_bm25.VECTOR_NAME,
                    query_filter=flt,
                    limit=asked,
                    with_payload=True,
                ).points
            kept = readable_now([to_stored(h.id, h.payload, float(h.score)) for h in hits if h.score > 0], principals)
            if len(kept) >= limit or len(hits) < asked or asked >= limit * _MAX_OVERFETCH:
                return kept[:limit]
            asked = min(asked * 4, limit * _MAX_OVERFETCH)

    def keyword_term_counts(
        self, terms: Sequence[str], cap: int, principals: frozenset[str] | None = None
    ) -> tuple[int, dict[str, int]]:
        """``(points, {term: points holding it, counted up to cap + 1})`` over both collections —
        all of them (``principals`` ``None``), or only those ``principals`` may read (the rights
        filter's allow/deny prefilter: an ACL's time-limited grants are not evaluated for a count;
        an empty set counts nothing) — the extractive gate's document frequencies, as the
        snapshot's :meth:`~ancre.index.bm25.Bm25Index.term_stats`: one sparse query per term and
        collection."""
        flt = None if principals is None else self._rights_filter(principals)
        if principals is not None and flt is None:
            return 0, dict.fromkeys(terms, 0)
        if flt is None:
            n = sum(self.count(c) for c in COLLECTIONS)
        else:
            n = 0
            for coll in COLLECTIONS:
                self._check(coll)
                with self._errors(f"count {coll}"):
                    n += int(self.client.count(coll, count_filter=flt, exact=True).count)
        out: dict[str, int] = {}
        for term in terms:
            q = qm.SparseVector(indices=[sparse_bm25.term_index(term)], values=[1.0])
            found = 0
            for coll in COLLECTIONS:
                self._check(coll)
                with self._errors(f"count term in {coll}"):
                    hits = self.client.query_points(
                        coll, query=q, using=sparse_bm25.VECTOR_NAME, query_filter=flt, limit=cap + 1,
                        with_payload=False,
                    ).points
                found += sum(1 for h in hits if h.score > 0)
            out[term] = min(found, cap + 1)
        return n, out

    # ---------------------------------------------------------------- internals

    @property
    def _where(self) -> str:
        return f"at {self.location}"

    @staticmethod
    def _filter(must: list[Any], must_not: list[Any] | None = None) -> qm.Filter:
        return qm.Filter(must=must, must_not=must_not)

    @staticmethod
    def _match_any(field: str, values: list[Any]) -> qm.FieldCondition:
        return qm.FieldCondition(key=field, match=qm.MatchAny(any=values))

    @staticmethod
    def _match_value(field: str, value: str) -> qm.FieldCondition:
        return qm.FieldCondition(key=field, match=qm.MatchValue(value=value))

    @staticmethod
    def _at_least(field: str, value: int) -> qm.FieldCondition:
        return qm.FieldCondition(key=field, range=qm.Range(gte=value))

    @staticmethod
    def _has_id(ids: list[str]) -> qm.HasIdCondition:
        return qm.HasIdCondition(has_id=list(ids))

    def _write(self, collection: str, rows: list[tuple[str, list[float], ChunkPayload]]) -> None:
        """In requests of 256 points, ``wait=True``; with ``sparse_bm25`` each point also gets
        its BM25 sparse vector."""
        structs: list[qm.PointStruct] = []
        for pid, dense, payload in rows:
            vector: list[float] | dict[str, list[float] | qm.SparseVector] = dense
            if self.sparse_bm25:
                indices, values = sparse_bm25.document_vector(payload.filename, payload.text, payload.header)
                vector = {"": dense, sparse_bm25.VECTOR_NAME: qm.SparseVector(indices=indices, values=values)}
            structs.append(qm.PointStruct(id=pid, vector=vector, payload=payload.to_dict()))
        for i in range(0, len(structs), _UPSERT_BATCH):
            self.client.upsert(collection, points=structs[i : i + _UPSERT_BATCH], wait=True)

    def _delete(self, collection: str, flt: qm.Filter) -> None:
        self.client.delete(collection, points_selector=qm.FilterSelector(filter=flt), wait=True)

    def _set_payload(self, collection: str, flt: qm.Filter, payload: dict[str, Any]) -> None:
        self.client.set_payload(collection, payload=payload, points=flt, wait=True)

    def _nearest(
        self, collection: str, vector: list[float], flt: qm.Filter, limit: int, exact: bool = False
    ) -> list[qm.ScoredPoint]:
        return self.client.query_points(
            collection, query=vector, query_filter=flt, limit=limit, with_payload=True,
            search_params=qm.SearchParams(exact=True) if exact else None,
        ).points

    def _read(self, collection: str, flt: qm.Filter, limit: int) -> list[qm.Record]:
        records, _ = self.client.scroll(
            collection, scroll_filter=flt, limit=limit, with_payload=True, with_vectors=False
        )
        return records

    def _page(
        self, collection: str, offset: qm.ExtendedPointId | None, batch: int
    ) -> tuple[list[qm.Record], qm.ExtendedPointId | None]:
        return self.client.scroll(
            collection, limit=batch, offset=offset, with_payload=True, with_vectors=False
        )

    def _vector_page(
        self, collection: str, flt: qm.Filter, offset: qm.ExtendedPointId | None, batch: int
    ) -> tuple[list[tuple[Any, Any]], qm.ExtendedPointId | None]:
        records, after = self.client.scroll(
            collection, scroll_filter=flt, limit=batch, offset=offset, with_payload=["text", "header"], with_vectors=True
        )
        return [(r.payload, r.vector) for r in records], after

    def _count(self, collection: str) -> int:
        return int(self.client.count(collection, exact=True).count)

    def _create(self, name: str, embedder_name: str, dim: int) -> None:
        try:
            sparse = (
                {sparse_bm25.VECTOR_NAME: qm.SparseVectorParams(modifier=qm.Modifier.IDF)}
                if self.sparse_bm25
                else None
            )
            self.client.create_collection(
                name,
                vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                sparse_vectors_config=sparse,
                metadata={META_EMBEDDER: embedder_name, META_DIM: dim},
            )
        except Exception:
            if not self.client.collection_exists(name):  # else: another process created it first
                raise
            return
        for field in PAYLOAD_INDEXES:
            self._create_index(name, field)

    def _create_index(self, name: str, field: str) -> None:
        integer = field in INTEGER_INDEXES
        schema = qm.PayloadSchemaType.INTEGER if integer else qm.PayloadSchemaType.KEYWORD
        self.client.create_payload_index(name, field_name=field, field_schema=schema, wait=True)
