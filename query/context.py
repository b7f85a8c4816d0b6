"""Context building (docs/ARCHITECTURE.md "Data flow of a question" step 4): which authorised chunks the model gets to read.

- The **principal document** is the best result's document: up to ``principal_max`` (9)
  consecutive chunks around its best chunk.
- Then up to ``other_docs`` (6) other distinct documents, in the order of their best result,
  ``chunks_per_complement`` (4) consecutive chunks each, around their best hit.
- **Copies are dropped**: a document with the same file name as a kept one (case-insensitive, NFC:
  the same contract on the share and on SharePoint), and any chunk whose text (whitespace
  collapsed, NFC) equals a kept chunk's.
- **When no document clearly leads**, the whole context is cut to ``max_chunks`` (14) chunks.
  "Clearly leads" is defined on RRF scores: the principal document's best score beats the best
  score of every other document (other file name) by at least ``threshold`` (0.01), or it is the
  only document. With k = 60 a first place in one list is worth 1/61 ≈ 0.016 and ranks move
  scores by ~0.0003, so a 0.01 margin means "ahead by about a whole list": first in both lists
  while the runner-up is found by one only. Two documents each first in one list do not lead.

Every chunk is read again through :meth:`Store.chunks_of` *with the rights filter* — the windows,
and the hit itself: a document whose hit is no longer readable is skipped, and selection only ever
chooses among chunks that read returned.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ancre.index.store import Store
from ancre.models import SearchResult, StoredPoint
from ancre.settings.query import ContextConfig


@dataclass(frozen=True)
class Extract:
    """One chunk shown to the model. ``location`` is the UNC folder (``\\\\SRV\\Partage\\Dossier\\``)
    or SharePoint folder URL; ``score`` the chunk's RRF score when it was itself a retrieval hit,
    ``None`` for a neighbour pulled in as context."""

    filename: str
    doc_id: str
    chunk_index: int
    text: str
    location: str
    path: str
    collection: str
    score: float | None = None


@dataclass(frozen=True)
class Source:
    """A distinct document of the context. ``acl_digest`` is :meth:`Acl.digest` of the rights
    read with the extracts (for the audit log); ``score`` its best RRF score."""

    filename: str
    doc_id: str
    path: str
    location: str
    collection: str
    acl_digest: str
    score: float


@dataclass(frozen=True)
class Context:
    """The extracts in prompt order (principal document first, chunks in reading order within a
    document) and the distinct documents they come from, in the same order. ``leading`` tells
    whether the principal document clearly led (see the module doc)."""

    extracts: tuple[Extract, ...] = ()
    sources: tuple[Source, ...] = ()
    leading: bool = False

    @property
    def empty(self) -> bool:
        """No extract at all: the query must be refused without calling a model (control 1)."""
        return not self.extracts


def name_key(filename: str) -> str:
    """File-name identity for copy detection: NFC, case-folded."""
    return unicodedata.normalize("NFC", filename).casefold()


def _text_key(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def _window(points: Sequence[StoredPoint], center: int, size: int) -> list[StoredPoint]:
    """Up to ``size`` consecutive points around ``center`` (nearest first, following chunks win
    ties), in chunk order; ``[]`` when ``center`` itself was not returned."""
    by_index = {p.payload.chunk_index: p for p in points}
    if center not in by_index:
        return []
    lo = hi = center
    while lo - 1 in by_index:
        lo -= 1
    while hi + 1 in by_index:
        hi += 1
    chosen = sorted(range(lo, hi + 1), key=lambda i: (abs(i - center), i < center))[:size]
    return [by_index[i] for i in sorted(chosen)]


def build_context(
    results: Sequence[SearchResult],
    store: Store,
    principals: frozenset[str],
    cfg: ContextConfig,
) -> Context:
    """Select the context for fused ``results`` (any order; ranked here by RRF score, best first).

    Reads chunk windows with ``store.chunks_of(..., principals)``: an empty principal set yields an
    empty context. Raises :class:`~ancre.errors.StoreError` from the store.
    """
    if not results or not principals:
        return Context()
    ranked = sorted(results, key=lambda r: -r.score)
    hit_scores = {(r.collection, r.doc_id, r.chunk_index): r.score for r in ranked}
    docs: list[SearchResult] = []  # best result per document, best first
    seen_docs: set[tuple[str, str]] = set()
    for r in ranked:
        if (r.collection, r.doc_id) not in seen_docs:
            seen_docs.add((r.collection, r.doc_id))
            docs.append(r)

    extracts: list[Extract] = []
    sources: list[Source] = []
    kept_names: set[str] = set()
    kept_texts: set[str] = set()
    principal: SearchResult | None = None
    for best in docs:
        if principal is not None and len(sources) > cfg.other_docs:
            break
        if name_key(best.filename) in kept_names:
            continue
        size = cfg.principal_max if principal is None else cfg.chunks_per_complement
        wanted = range(max(0, best.chunk_index - size + 1), best.chunk_index + size)
        points = store.chunks_of(best.collection, best.doc_id, list(wanted), principals)
        window = [
            p for p in _window(points, best.chunk_index, size) if p.payload.doc_id == best.doc_id
        ]
        new = [p for p in window if _text_key(p.payload.text) not in kept_texts]
        if not new:
            continue
        principal = principal or best
        kept_names.add(name_key(best.filename))
        for p in new:
            pl = p.payload
            kept_texts.add(_text_key(pl.text))
            extracts.append(
                Extract(
                    filename=pl.filename,
                    doc_id=pl.doc_id,
                    chunk_index=pl.chunk_index,
                    text=pl.text,
                    location=pl.location,
                    path=pl.path,
                    collection=pl.collection,
                    score=hit_scores.get((best.collection, pl.doc_id, pl.chunk_index)),
                )
            )
        first = new[0].payload
        acl = first.acl()
        sources.append(
            Source(
                filename=first.filename,
                doc_id=first.doc_id,
                path=first.path,
                location=first.location,
                collection=first.collection,
                acl_digest=acl.digest(),
                score=best.score,
            )
        )
    if principal is None:
        return Context()

    rivals = [d.score for d in docs if name_key(d.filename) != name_key(principal.filename)]
    leading = not rivals or principal.score - max(rivals) >= cfg.threshold
    if not leading and len(extracts) > cfg.max_chunks:
        extracts = extracts[: cfg.max_chunks]
        shown = {(e.collection, e.doc_id) for e in extracts}
        sources = [s for s in sources if (s.collection, s.doc_id) in shown]
    return Context(tuple(extracts), tuple(sources), leading)


__all__ = ["Context", "Extract", "Source", "build_context", "name_key"]
