"""BM25 as Qdrant sparse vectors (``[store] bm25 = "qdrant"``): the keyword side for an API
running on several machines with no local snapshot.

Each chunk carries a sparse vector named :data:`VECTOR_NAME` next to its dense one, written by the
same upsert as the rest of the point (so the same sync builds it). Terms are those of the BM25
snapshot (:func:`ancre.index.keywords.chunk_terms`: file name, contextual header, text); a term's index is
the first 4 bytes of its BLAKE2b digest (a vocabulary shared by every process without any file;
two terms of a million-term vocabulary collide with probability ~1e-4 each, and a collision only
merges two postings). A document's value for a term is BM25's saturated, length-normalised term
frequency ``tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))`` (k1 = 1.2, b = 0.75 as the snapshot;
``avgdl`` fixed at :data:`AVGDL` terms, the mean of ~1 000-character French chunks, since points
are written one document at a time). The collection's sparse vector has ``modifier = IDF``: Qdrant
computes ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the points that have the vector, and a
query of weight 1 per distinct term scores ``Σ idf·value`` — BM25 with Lucene's IDF, like the
snapshot (Qdrant docs, "Sparse vectors" / "IDF modifier"). The rights filter goes into the same
query, so the candidates are the user's best chunks, read fresh.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import lru_cache

from ancre.index.keywords import chunk_terms
from ancre.index.tokenize import tokenize

VECTOR_NAME = "bm25"
K1 = 1.2
B = 0.75
AVGDL = 120.0
"""Assumed mean chunk length in index terms (117 on the bench's ~1 000-character French chunks)."""


@lru_cache(maxsize=1 << 16)
def term_index(term: str) -> int:
    """The sparse-vector index of an index term: BLAKE2b, first 4 bytes, unsigned (0 … 2³²-1)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def _merge(terms: dict[int, float]) -> tuple[list[int], list[float]]:
    indices = sorted(terms)
    return indices, [terms[i] for i in indices]


def document_vector(filename: str, text: str, header: str = "") -> tuple[list[int], list[float]]:
    """``(indices, values)`` of a chunk (its index terms, :func:`~ancre.index.keywords.chunk_terms`:
    file name, contextual header, text): BM25 document-side weights, indices sorted and distinct;
    ``([], [])`` when it has no index term."""
    tokens = chunk_terms(filename, text, header)
    if not tokens:
        return [], []
    norm = K1 * (1.0 - B + B * len(tokens) / AVGDL)
    weights: dict[int, float] = {}
    for term, tf in Counter(tokens).items():
        idx = term_index(term)
        weights[idx] = weights.get(idx, 0.0) + tf * (K1 + 1.0) / (tf + norm)
    return _merge(weights)


def query_vector(question: str) -> tuple[list[int], list[float]]:
    """``(indices, values)`` of a question: weight 1 per distinct index term (Qdrant multiplies by
    the IDF); ``([], [])`` for a question of stop words only."""
    return _merge({term_index(t): 1.0 for t in tokenize(question)})


__all__ = ["AVGDL", "VECTOR_NAME", "document_vector", "query_vector", "term_index"]
