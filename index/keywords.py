"""What a chunk is found by on the keyword side, in one place for every keyword backend.

A chunk's **index terms** are :func:`ancre.index.tokenize.tokenize` of its file name, then of its
contextual header (whose document it is and the section: :attr:`ancre.models.Chunk.header`), then
of its text (neither is a field of its own: a question naming a file or a client finds every
chunk of that document, « code d'accès … du Garage Dubois » the section that never names it).
The BM25 snapshot (:mod:`ancre.index.bm25`), the sparse vectors of a Qdrant server
(:mod:`ancre.index.sparse_bm25`) and the embedded engine's text index
(:class:`~ancre.index.edge_store.EdgeStore`) all index these terms, so the three keyword sides
agree on what matches. A new searchable field (a title, the heading path) is added here, once.

The embedded engine indexes them as the payload field :data:`KEYWORD_FIELD`: the terms joined by
single spaces, read by a whitespace tokenizer that changes nothing (no lower-casing, folding,
stemming or stop words of its own: :func:`tokenize` already did all of that), with BM25 scoring
(qdrant-edge-py ``TextIndexParams(scoring=True)``, ranked by ``TextQuery``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ancre.index.tokenize import tokenize

KEYWORD_FIELD = "bm25_terms"
"""Payload field of the embedded store holding a chunk's index terms, space-separated."""


def chunk_terms(filename: str, text: str, header: str = "") -> list[str]:
    """Index terms of one chunk, in order (file name, header, text), duplicates kept (they are
    its term frequencies). ``[]`` for a chunk of stop words only."""
    return tokenize(filename) + tokenize(header) + tokenize(text)


def query_terms(question: str) -> list[str]:
    """Distinct index terms of a question, in order of first appearance (a term repeated in the
    question counts once, as in :meth:`ancre.index.bm25.Bm25Index.search`)."""
    return list(dict.fromkeys(tokenize(question)))


def joined(terms: Sequence[str]) -> str:
    """Terms as the value of :data:`KEYWORD_FIELD` (or of a ``TextQuery``): one space between
    terms. Terms never contain whitespace (:func:`tokenize` splits on it)."""
    return " ".join(terms)


__all__ = ["KEYWORD_FIELD", "chunk_terms", "joined", "query_terms"]
