"""The keyword side of a question runs beside its embedding and vector search (query/retrieval.py):
the store's keyword search starts before the query embedding returns, its errors reach the
caller, and an embedder that fails does not leave the question's keyword search behind."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ancre.errors import EmbedderError, StoreError
from ancre.index.bm25 import Bm25Manager
from ancre.index.edge_store import EdgeStore
from ancre.index.store import PointWrite
from ancre.models import ChunkPayload, StoredPoint, point_id
from ancre.query.retrieval import Retriever
from ancre.settings import QueryConfig

DIM = 8
READER = "sid:S-1-5-21-1-1001"
WAIT_S = 10.0
"""How long the gated embedder waits for the keyword search to start (a bound, not a timing
assertion: the old code, which searched keywords after the embedding, waits it out and fails)."""


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _point(doc: str, text: str) -> PointWrite:
    payload = ChunkPayload(
        source="src", doc_id=doc, path=f"dir/{doc}.md", filename=f"{doc}.md", location="\\\\SRV\\P\\dir\\",
        chunk_index=0, text=text, acl_allow=(READER,), acl_deny=(), content_hash=f"h-{doc}",
        indexed_at=1_700_000_000.0, heading_path=(),
    )
    return PointWrite(id=point_id(doc, 0), vector=_vec(zlib.crc32(doc.encode())), payload=payload)


class _SignallingStore(EdgeStore):
    """An :class:`EdgeStore` that sets ``started`` when a keyword search begins, and raises
    ``fail`` from it when set."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.started = threading.Event()
        self.fail: Exception | None = None

    def keyword_search(self, collection: str, question: str, principals: frozenset[str], limit: int) -> list[StoredPoint]:
        self.started.set()
        if self.fail is not None:
            raise self.fail
        return super().keyword_search(collection, question, principals, limit)


class _GatedEmbedder:
    """Returns a fixed vector once the store's keyword search has started (or ``WAIT_S`` passed),
    recording which; raises ``fail`` instead when set."""

    name = "test-embedder:v1"
    dim = DIM

    def __init__(self, store: _SignallingStore) -> None:
        self.store = store
        self.saw_keyword_search: list[bool] = []
        self.fail: Exception | None = None

    def embed_query(self, text: str) -> np.ndarray:
        self.saw_keyword_search.append(self.store.started.wait(WAIT_S))
        if self.fail is not None:
            raise self.fail
        return _vec(zlib.crc32(b"contrat"))

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


@pytest.fixture
def store(tmp_path: Path) -> Iterator[_SignallingStore]:
    s = _SignallingStore(tmp_path / "data")
    s.open("test-embedder:v1", DIM)
    s.upsert("documents", [_point("contrat", "Le contrat de maintenance RX-1000"), _point("note", "Une note sans rapport")])
    yield s
    s.close()


def _retriever(store: _SignallingStore, embedder: _GatedEmbedder, tmp_path: Path) -> Retriever:
    return Retriever(store, embedder, Bm25Manager(tmp_path / "bm25"), QueryConfig(), keyword_in_store=True)  # type: ignore[arg-type]


def test_the_keyword_search_starts_before_the_query_embedding_returns(store: _SignallingStore, tmp_path: Path) -> None:
    embedder = _GatedEmbedder(store)
    got = _retriever(store, embedder, tmp_path).retrieve("contrat RX-1000", frozenset({READER}))
    assert embedder.saw_keyword_search == [True]
    top = got.results[0]
    assert top.doc_id == "contrat" and set(top.found_by) == {"vector", "bm25"}


def test_a_keyword_search_error_reaches_the_caller(store: _SignallingStore, tmp_path: Path) -> None:
    store.fail = StoreError("keyword search documents: engine gone")
    with pytest.raises(StoreError, match="engine gone"):
        _retriever(store, _GatedEmbedder(store), tmp_path).retrieve("contrat", frozenset({READER}))


def test_an_embedding_error_reaches_the_caller_and_the_next_question_is_answered(
    store: _SignallingStore, tmp_path: Path
) -> None:
    embedder = _GatedEmbedder(store)
    retriever = _retriever(store, embedder, tmp_path)
    embedder.fail = EmbedderError("ollama: connection refused")
    with pytest.raises(EmbedderError, match="connection refused"):
        retriever.retrieve("contrat", frozenset({READER}))
    embedder.fail = None
    assert retriever.retrieve("contrat", frozenset({READER})).results[0].doc_id == "contrat"


def test_an_empty_principal_set_searches_nothing(store: _SignallingStore, tmp_path: Path) -> None:
    embedder = _GatedEmbedder(store)
    assert _retriever(store, embedder, tmp_path).retrieve("contrat", frozenset()).results == ()
    assert embedder.saw_keyword_search == [] and not store.started.is_set()
