"""The :class:`~ancre.index.store.Store` logic both Qdrant backends share: :class:`QdrantBackend`.

The two backends (:class:`~ancre.index.edge_store.EdgeStore` over ``qdrant-edge-py``,
:class:`~ancre.index.qdrant_store.QdrantStore` over ``qdrant-client``) run the same Qdrant engine
through two libraries whose classes differ but mean the same. The rules live here once:

- the rights filter (docs/ARCHITECTURE.md "Data model and the rights filter"): ``must: acl_allow MatchAny P``, ``must_not:
  acl_deny MatchAny P``, never built from an empty ``P`` — every read method returns ``[]`` before
  touching the engine (:func:`~ancre.index._filters.rights_terms`). For a point whose ACL has
  grants (``acl_grants``: an ordered DACL compiled to several grants, an expiring link) that
  filter is only the prefilter: every read method then evaluates the grants exactly, at the
  current time, before returning the point (:func:`~ancre.index._filters.readable_now`), and a
  search asks the engine again for more when that check dropped some;
- id and vector checks before a write, the ``doc_id`` / ``chunk_index`` filters of deletes and
  ACL updates, result conversion to :class:`~ancre.models.StoredPoint`;
- any library failure raised as :class:`~ancre.errors.StoreError` (:func:`engine_errors`).

A backend supplies the library half: four condition builders, :meth:`QdrantBackend._filter`, and
the engine calls (``_write``, ``_delete``, ``_set_payload``, ``_nearest``, ``_read``, ``_page``,
``_vector_page``, ``_count``), each a single call of its library.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from ancre.errors import AncreError, StoreError
from ancre.index._filters import (
    ALLOW_FIELD,
    CHUNK_FIELD,
    DENY_FIELD,
    DOC_FIELD,
    as_vector,
    readable_now,
    rights_terms,
    to_stored,
    valid_point_ids,
)
from ancre.index.store import PointWrite
from ancre.models import COLLECTIONS, Acl, ChunkPayload, StoredPoint, embedded_text

_MAX_OVERFETCH = 64
"""A search whose exact grant check dropped hits asks the engine again for up to this many times
``limit`` hits before it settles for fewer."""


@contextlib.contextmanager
def engine_errors(engine: str, action: str) -> Iterator[None]:
    """Raise any library failure (HTTP/gRPC errors, timeouts, the edge engine's bare
    ``Exception``, local mode's ``ValueError``) as :class:`StoreError` ``"<engine>: <action>
    failed: …"``; ancre errors pass through unchanged."""
    try:
        yield
    except AncreError:
        raise
    except Exception as exc:  # the libraries raise bare Exception / their own hierarchies
        raise StoreError(f"{engine}: {action} failed: {exc}") from exc


class QdrantBackend(ABC):
    """Base of the two Qdrant :class:`~ancre.index.store.Store` backends (see the module doc).

    Subclasses set :attr:`ENGINE`, keep ``_dim`` (the open store's dimension, ``0`` while not
    open) and implement the library hooks below. Every Store method checks the collection name
    and that the store is open (:class:`StoreError` otherwise).
    """

    ENGINE: ClassVar[str]
    """The engine as named in :class:`StoreError` messages."""

    _dim: int

    # ---------------------------------------------------------------- library hooks

    @property
    @abstractmethod
    def _where(self) -> str:
        """Where the store is, for messages (``"at <url>"``, ``"under <dir>"``)."""

    @staticmethod
    @abstractmethod
    def _filter(must: list[Any], must_not: list[Any] | None = None) -> Any:
        """The library's ``Filter(must=…, must_not=…)``."""

    @staticmethod
    @abstractmethod
    def _match_any(field: str, values: list[Any]) -> Any:
        """Condition: payload ``field`` holds one of ``values``."""

    @staticmethod
    @abstractmethod
    def _match_value(field: str, value: str) -> Any:
        """Condition: payload ``field`` equals ``value``."""

    @staticmethod
    @abstractmethod
    def _at_least(field: str, value: int) -> Any:
        """Condition: integer payload ``field`` ≥ ``value``."""

    @staticmethod
    @abstractmethod
    def _has_id(ids: list[str]) -> Any:
        """Condition: the point id is one of ``ids``."""

    @abstractmethod
    def _write(self, collection: str, rows: list[tuple[str, list[float], ChunkPayload]]) -> None:
        """Upsert ``(id, vector, payload)`` rows, durably (returns once the engine confirmed)."""

    @abstractmethod
    def _delete(self, collection: str, flt: Any) -> None:
        """Delete the points matching ``flt``, durably."""

    @abstractmethod
    def _set_payload(self, collection: str, flt: Any, payload: dict[str, Any]) -> None:
        """Set ``payload`` keys on the points matching ``flt``, durably."""

    @abstractmethod
    def _nearest(
        self, collection: str, vector: list[float], flt: Any, limit: int, exact: bool = False
    ) -> Sequence[Any]:
        """Top-``limit`` hits (``.id``, ``.payload``, ``.score``) by cosine similarity under
        ``flt``, best first; ``exact``: by a full scan, whatever indexes the engine has."""

    @abstractmethod
    def _read(self, collection: str, flt: Any, limit: int) -> Sequence[Any]:
        """Up to ``limit`` records (``.id``, ``.payload``) matching ``flt``, in one call."""

    @abstractmethod
    def _page(self, collection: str, offset: Any, batch: int) -> tuple[Sequence[Any], Any]:
        """One unfiltered page of ``batch`` records from ``offset`` (``None``: the start) and the
        next offset (``None`` after the last page)."""

    @abstractmethod
    def _vector_page(self, collection: str, flt: Any, offset: Any, batch: int) -> tuple[list[tuple[Any, Any]], Any]:
        """One page of ``batch`` points matching ``flt`` from ``offset`` (``None``: the start) as
        ``(payload dict with "text", vector)`` pairs — the vector as the library returns it: the
        dense list, or vectors by name where the dense one is ``""`` —, and the next offset
        (``None`` after the last page)."""

    @abstractmethod
    def _count(self, collection: str) -> int:
        """Exact number of points."""

    # ---------------------------------------------------------------- filters

    def _rights_filter(self, principals: frozenset[str], *must: Any) -> Any | None:
        """The rights filter plus extra ``must`` conditions; ``None`` for an empty principal set
        (the caller then returns ``[]`` without touching the engine)."""
        terms = rights_terms(principals)
        if terms is None:
            return None
        return self._filter(
            [*must, self._match_any(ALLOW_FIELD, terms)], [self._match_any(DENY_FIELD, terms)]
        )

    def _doc_filter(self, doc_id: str, from_chunk_index: int = 0) -> Any:
        """The points of ``doc_id`` with ``chunk_index >= from_chunk_index``."""
        must = [self._match_value(DOC_FIELD, doc_id)]
        if from_chunk_index > 0:
            must.append(self._at_least(CHUNK_FIELD, from_chunk_index))
        return self._filter(must)

    # ---------------------------------------------------------------- Store: writes

    def upsert(self, collection: str, points: Sequence[PointWrite]) -> None:
        """Insert or replace ``points`` (same id = replaced); returns once the engine confirmed
        the write. Raises :class:`StoreError` on a non-UUID id, a vector of the wrong shape or
        with non-finite values, or an engine error."""
        self._check(collection)
        rows: list[tuple[str, list[float], ChunkPayload]] = []
        for p in points:
            ids = valid_point_ids([p.id])
            if not ids:
                raise StoreError(f"point id {p.id!r} is not a UUID string")
            rows.append((ids[0], as_vector(p.vector, self._dim), p.payload))
        with self._errors(f"upsert into {collection}"):
            self._write(collection, rows)

    def delete_doc(self, collection: str, doc_id: str, from_chunk_index: int = 0) -> None:
        """Delete the points of ``doc_id`` with ``chunk_index >= from_chunk_index``, by filter."""
        self._check(collection)
        with self._errors(f"delete {doc_id} from {collection}"):
            self._delete(collection, self._doc_filter(doc_id, from_chunk_index))

    def set_acl(self, collection: str, doc_id: str, acl: Acl) -> None:
        """Overwrite ``acl_allow``/``acl_deny``/``acl_grants`` on every point of ``doc_id`` (by
        filter; vectors and text untouched)."""
        self._check(collection)
        payload = ChunkPayload.acl_fields(acl)
        with self._errors(f"set ACL of {doc_id} in {collection}"):
            self._set_payload(collection, self._doc_filter(doc_id), payload)

    # ---------------------------------------------------------------- Store: reads

    def search(
        self, collection: str, vector: np.ndarray, principals: frozenset[str], limit: int, *, exact: bool = False
    ) -> list[StoredPoint]:
        """Top-``limit`` by cosine similarity to ``vector`` ``(d,)`` under the rights filter,
        best first, ``score`` in [-1, 1]. Empty ``principals`` → ``[]``. ``exact``: by a full
        scan of the filtered points (no graph, no quantization: the reference the fast path is
        measured against)."""
        self._check(collection)
        flt = self._rights_filter(principals)
        if flt is None or limit <= 0:
            return []
        query = as_vector(vector, self._dim)
        asked = limit
        while True:
            with self._errors(f"search {collection}"):
                hits = self._nearest(collection, query, flt, asked, exact)
            points = [to_stored(h.id, h.payload, float(h.score)) for h in hits]
            kept = readable_now(points, principals)
            if len(kept) >= limit or len(points) < asked or asked >= limit * _MAX_OVERFETCH:
                return kept[:limit]
            asked = min(asked * 4, limit * _MAX_OVERFETCH)

    def retrieve(
        self, collection: str, ids: Sequence[str], principals: frozenset[str]
    ) -> list[StoredPoint]:
        """The points among ``ids`` that exist and pass the rights filter, in one engine call
        (filtered on ``HasId`` + rights). Non-UUID ids are ignored. Empty ``principals`` → ``[]``."""
        self._check(collection)
        wanted = valid_point_ids(ids)
        flt = self._rights_filter(principals, self._has_id(wanted))
        if flt is None or not wanted:
            return []
        return self._read_once(collection, flt, len(wanted), principals)

    def chunks_of(
        self, collection: str, doc_id: str, chunk_indexes: Sequence[int], principals: frozenset[str]
    ) -> list[StoredPoint]:
        """See :meth:`~ancre.index.store.Store.chunks_of`: one engine call filtered on ``doc_id``,
        the chunk indexes and the rights, sorted by ``chunk_index``."""
        self._check(collection)
        wanted = sorted({int(i) for i in chunk_indexes})
        flt = self._rights_filter(
            principals,
            self._match_value(DOC_FIELD, doc_id),
            self._match_any(CHUNK_FIELD, wanted),
        )
        if flt is None or not wanted:
            return []
        points = self._read_once(collection, flt, len(wanted), principals)
        return sorted(points, key=lambda p: p.payload.chunk_index)

    def scroll(self, collection: str, batch: int = 1024) -> Iterator[StoredPoint]:
        """Every point of ``collection`` (unfiltered, payload only), ``batch`` per engine call.
        For index maintenance only (BM25 rebuild)."""
        self._check(collection)
        offset: Any = None
        while True:
            with self._errors(f"scroll {collection}"):
                records, offset = self._page(collection, offset, batch)
            for r in records:
                yield to_stored(r.id, r.payload, None)
            if offset is None:
                return

    def vectors_of(self, collection: str, doc_id: str) -> dict[str, np.ndarray]:
        """See :meth:`~ancre.index.store.Store.vectors_of`: the points of ``doc_id`` (filtered on
        ``doc_id`` only), 1,024 per engine call."""
        self._check(collection)
        flt = self._filter([self._match_value(DOC_FIELD, doc_id)])
        out: dict[str, np.ndarray] = {}
        offset: Any = None
        while True:
            with self._errors(f"read the vectors of {doc_id} in {collection}"):
                rows, offset = self._vector_page(collection, flt, offset, 1024)
            for payload, vector in rows:
                text = (payload or {}).get("text")
                dense = vector.get("") if isinstance(vector, dict) else vector  # "": the unnamed dense vector
                if isinstance(text, str) and dense is not None:
                    key = embedded_text(str((payload or {}).get("header") or ""), text)
                    out[key] = np.asarray(dense, dtype=np.float32).reshape(self._dim)
            if offset is None:
                return out

    def count(self, collection: str) -> int:
        """Exact number of points in ``collection``."""
        self._check(collection)
        with self._errors(f"count {collection}"):
            return int(self._count(collection))

    # ---------------------------------------------------------------- internals

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        return engine_errors(self.ENGINE, action)

    def _check(self, collection: str) -> None:
        """Raise :class:`StoreError` for a collection not in :data:`~ancre.models.COLLECTIONS`
        or a store that is not open."""
        if collection not in COLLECTIONS:
            raise StoreError(f"unknown collection {collection!r}; expected one of {COLLECTIONS}")
        if not self._dim:
            raise StoreError(f"store {self._where} is not open")

    def _read_once(
        self, collection: str, flt: Any, limit: int, principals: frozenset[str]
    ) -> list[StoredPoint]:
        with self._errors(f"read {collection}"):
            records = self._read(collection, flt, limit)
        return readable_now([to_stored(r.id, r.payload, None) for r in records], principals)
