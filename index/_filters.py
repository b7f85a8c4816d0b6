"""Helpers shared by the two :class:`~ancre.index.store.Store` backends (``edge_store``,
``qdrant_store``): the backend-neutral half of the rights filter, id and vector checks, the
embedder-mismatch message and payload → :class:`~ancre.models.StoredPoint` conversion.

:class:`~ancre.index._qdrant_base.QdrantBackend` turns :func:`rights_terms` into the rights filter
once for both backends (``_rights_filter``), each backend supplying only its library's ``Filter``
and conditions; the rule itself (docs/ARCHITECTURE.md "Data model and the rights filter") is::

    must:     acl_allow MatchAny P
    must_not: acl_deny  MatchAny P

and it is never built from an empty ``P``: callers return ``[]`` instead. It is exact for a plain
ACL; for a point whose ACL has grants (``acl_grants``) it is a necessary condition, and
:func:`readable_now` decides.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ancre.errors import StoreError
from ancre.models import ChunkPayload, StoredPoint

ALLOW_FIELD = "acl_allow"
GRANTS_FIELD = "acl_grants"
DENY_FIELD = "acl_deny"
DOC_FIELD = "doc_id"
CHUNK_FIELD = "chunk_index"
INTEGER_INDEXES = frozenset({CHUNK_FIELD})
"""Fields of :data:`~ancre.index.store.PAYLOAD_INDEXES` indexed as integers (the rest: keyword)."""

REINDEX_COMMAND = "ancre reindex --config <file>"


def rights_terms(principals: frozenset[str]) -> list[str] | None:
    """The principals to put in both ``MatchAny`` conditions, sorted; ``None`` when the set is
    empty, meaning "the caller must return ``[]`` without querying" (fail closed: an empty
    ``MatchAny`` must never turn into "no filter")."""
    if not principals:
        return None
    return sorted(principals)


def readable_now(points: Iterable[StoredPoint], principals: frozenset[str]) -> list[StoredPoint]:
    """``points`` (already through the engine's rights prefilter) that ``principals`` may read
    per their stored ACL at this instant, in order: a plain ACL passes as the engine decided it;
    an ACL with grants is evaluated exactly (:meth:`~ancre.models.ChunkPayload.readable_by`), so
    an expired grant admits nobody from that moment. Empty ``principals`` → ``[]``."""
    if not principals:
        return []
    now = time.time()
    return [p for p in points if not p.payload.acl_grants or p.payload.readable_by(principals, now)]


def valid_point_ids(ids: Iterable[str]) -> list[str]:
    """Distinct ids that are UUID strings, canonicalised (lower-case, hyphenated), input order.
    Anything else cannot be a point of ours (ids are ``uuid5``) and is dropped."""
    out: dict[str, None] = {}
    for raw in ids:
        try:
            out[str(uuid.UUID(str(raw)))] = None
        except ValueError:
            continue
    return list(out)


def as_vector(vector: np.ndarray, dim: int) -> list[float]:
    """``vector`` ``(dim,)`` (any float dtype) as a list of Python floats for the client
    libraries. Raises :class:`StoreError` on a wrong shape or a non-finite value."""
    arr = np.asarray(vector, dtype=np.float32)
    if arr.shape != (dim,):
        raise StoreError(f"vector has shape {arr.shape}, the store expects ({dim},)")
    if not np.all(np.isfinite(arr)):
        raise StoreError("vector has non-finite values (NaN or inf)")
    return arr.tolist()


def mismatch_message(
    location: str, built_name: str, built_dim: int, wanted_name: str, wanted_dim: int
) -> str:
    """Message of :class:`~ancre.errors.EmbedderMismatchError`: names both embedders, both
    dimensions and the reindex command."""
    return (
        f"the index under {location} was built with embedder {built_name!r} ({built_dim} dims) "
        f"but the configuration asks for {wanted_name!r} ({wanted_dim} dims); "
        f"run `{REINDEX_COMMAND}` to rebuild it, or set embedder back to {built_name!r}"
    )


def to_stored(point_id: object, payload: Mapping[str, Any] | None, score: float | None) -> StoredPoint:
    """A library record → :class:`StoredPoint` (``id`` as a canonical UUID string). Raises
    :class:`StoreError` when the payload is missing or lacks a :class:`ChunkPayload` field."""
    try:
        chunk = ChunkPayload.from_dict(dict(payload or {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"point {point_id} has a malformed payload: {exc!r}") from exc
    return StoredPoint(id=str(point_id), payload=chunk, score=score)
