"""The one ``Store`` protocol over Qdrant; backends in ``index/edge_store.py`` (qdrant-edge-py,
embedded default) and ``index/qdrant_store.py`` (qdrant-client: server, cluster or local mode).

Rights filter, the same everywhere (docs/ARCHITECTURE.md "Data model and the rights filter"): ``must: acl_allow ∈ P(user)``,
``must_not: acl_deny ∈ P(user)``, then, for a point whose ACL has grants (``acl_grants``), the
exact evaluation of those grants at the current time. Every read method that takes ``principals``
returns ``[]`` when the set is empty — it never builds a filter from it (an empty MatchAny must
mean *nothing*).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ancre.models import Acl, ChunkPayload, StoredPoint

PAYLOAD_INDEXES = ("acl_allow", "acl_deny", "doc_id", "chunk_index", "filename")
"""Payload fields indexed in every collection (keyword indexes; ``chunk_index`` integer)."""


@dataclass(frozen=True)
class PointWrite:
    """A point to upsert: ``id`` (UUID string), ``vector`` ``(d,)`` float32, ``payload``."""

    id: str
    vector: np.ndarray
    payload: ChunkPayload


@runtime_checkable
class Store(Protocol):
    """Vector store over the two collections ``documents`` and ``documentation``.

    All collection arguments are one of :data:`ancre.models.COLLECTIONS`.
    """

    def open(self, embedder_name: str, dim: int) -> None:
        """Create the collections (cosine, ``dim`` dims, payload indexes) or open them, recording the
        embedder. Raises :class:`~ancre.errors.EmbedderMismatchError` naming both embedders and the
        reindex command when the store was built with another name or dimension;
        :class:`~ancre.errors.StoreLockedError` when another process owns an embedded store."""
        ...

    def upsert(self, collection: str, points: Sequence[PointWrite]) -> None:
        """Insert or replace points; returns once the store confirmed the write."""
        ...

    def delete_doc(self, collection: str, doc_id: str, from_chunk_index: int = 0) -> None:
        """Delete the points of ``doc_id`` whose ``chunk_index >= from_chunk_index``."""
        ...

    def set_acl(self, collection: str, doc_id: str, acl: Acl) -> None:
        """Overwrite ``acl_allow`` / ``acl_deny`` / ``acl_grants`` on every point of ``doc_id``
        (no re-embedding)."""
        ...

    def search(
        self, collection: str, vector: np.ndarray, principals: frozenset[str], limit: int
    ) -> list[StoredPoint]:
        """Top-``limit`` points by cosine similarity to ``vector`` ``(d,)`` under the rights
        filter, best first, ``score`` set. Empty ``principals`` → ``[]``."""
        ...

    def retrieve(
        self, collection: str, ids: Sequence[str], principals: frozenset[str]
    ) -> list[StoredPoint]:
        """The points among ``ids`` that still exist *and* pass the rights filter, in one call
        (order not guaranteed). Empty ``principals`` → ``[]``."""
        ...

    def chunks_of(
        self,
        collection: str,
        doc_id: str,
        chunk_indexes: Sequence[int],
        principals: frozenset[str],
    ) -> list[StoredPoint]:
        """Points of ``doc_id`` with the given chunk indexes, under the rights filter, sorted by
        ``chunk_index``. Empty ``principals`` → ``[]``."""
        ...

    def scroll(self, collection: str, batch: int = 1024) -> Iterator[StoredPoint]:
        """Every point of the collection, unfiltered (index maintenance only: BM25 rebuild)."""
        ...

    def vectors_of(self, collection: str, doc_id: str) -> dict[str, np.ndarray]:
        """The stored vector ``(d,)`` float32 of each chunk of ``doc_id``, keyed by what was
        embedded: the chunk's header and text (:func:`~ancre.models.embedded_text`). Unfiltered,
        like :meth:`scroll`: for the sync's writer only, which reuses them for the chunks a
        changed document kept word for word (header included) instead of embedding them again —
        a point's vector is always that string's, written together. ``{}`` for an unknown
        document."""
        ...

    def count(self, collection: str) -> int:
        """Number of points in the collection."""
        ...

    def drop_all(self) -> None:
        """Delete both collections and the embedder record (``ancre reindex``). Call it on a store
        that is not open; raises :class:`~ancre.errors.StoreLockedError` when another process owns
        an embedded store."""
        ...

    def close(self) -> None:
        """Flush and release the store (and its lock)."""
        ...


@runtime_checkable
class KeywordStore(Protocol):
    """A store that keeps BM25 itself (``[store] bm25 = "qdrant"``): the edge store's text index,
    a Qdrant server's sparse vectors. The rights filter is in the query, so its hits are a fresh
    read of the store."""

    @property
    def keywords_ready(self) -> bool:
        """Whether every point is searchable by keywords (else the BM25 snapshot answers)."""
        ...

    def keyword_search(
        self, collection: str, question: str, principals: frozenset[str], limit: int
    ) -> list[StoredPoint]:
        """Top-``limit`` points by BM25 for ``question`` under the rights filter, best first,
        ``score`` > 0. Empty ``principals`` → ``[]``."""
        ...

    def keyword_term_counts(
        self, terms: Sequence[str], cap: int, principals: frozenset[str] | None = None
    ) -> tuple[int, dict[str, int]]:
        """``(points, {term: points holding it, at most cap + 1})`` over both collections: all
        points (``principals`` ``None``) or those ``principals`` may read (empty: nothing)."""
        ...


@runtime_checkable
class Maintainable(Protocol):
    """A store whose indexes are built apart from its writes (the edge store's HNSW builds)."""

    def needs_build(self) -> bool:
        """Whether :meth:`maintain` has work to do now."""
        ...

    def maintain(self, *, force: bool = False, should_stop: Callable[[], bool] | None = None) -> list[Any]:
        """Build what needs building (blocking; reads and writes go on); one report per build."""
        ...
