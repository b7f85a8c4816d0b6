"""Context building (docs/ARCHITECTURE.md "Data flow of a question" step 4): which authorised chunks the model gets to read.

- The **principal document** is the best result's document: up to ``principal_max`` (9)
  consecutive chunks around its best chunk.
- Then up to ``other_docs`` (6) other distinct documents, in the order of their best result,
  ``chunks_per_complement`` (4) consecutive chunks each, around their best hit.
- **Copies are dropped**: a document with the same file name as a kept one (case-insensitive, NFC:
  the same contract on the share and on SharePoint) — unless one of the two is in an archive
  folder and the other not: that one is an older version —, and any chunk whose text (whitespace
  collapsed, NFC) equals a kept chunk's.
- **When no document clearly leads**, the whole context is cut to ``max_chunks`` (14) chunks.
  "Clearly leads" is defined on RRF scores: the principal document's best score beats the best
  score of every other document (other file name) by at least ``threshold`` (0.01), or it is the
  only document. With k = 60 a first place in one list is worth 1/61 ≈ 0.016 and ranks move
  scores by ~0.0003, so a 0.01 margin means "ahead by about a whole list": first in both lists
  while the runner-up is found by one only. Two documents each first in one list do not lead.

**Broad questions** (:func:`broad_topic`: « Résume les contrats de maintenance des clients »,
« Quels sont les forfaits de tous les contrats ? », « Compare … et … ») need every document, not
one document and the edges of others: each document of the context then gets an equal share of
``max_chunks`` (at least ``chunks_per_complement``), filled with its best hit and the chunks of
its neighbourhood that state the most facts (amounts, dates, durations, names), in reading order.

**The asked entity decides** (:mod:`ancre.query.subjects`). When the question names a client, a
company or a person that tells the candidate documents apart (:func:`~ancre.query.subjects.asked_entities`),
documents are ranked by how their subject matches it before their score: exactly (the same strong
words: « Garage Dubois » = « Garage Dubois Sàrl »; or a passage that writes the name, as a note
about « Baumont Industries »'s server room), then partly (« Dubois Transports SA »), then not at all
(« Garage Dubuis », one letter apart, is another client). For a precise question (not broad)
with a document whose *subject* matches exactly, the context keeps only the documents that match
exactly — that client's document, its versions, a passage naming it —: another client's passages
are never « complements » (:attr:`Context.focused`). A passage naming the client keeps its
document but never narrows the context alone. A broad question keeps its diversity, the named
subjects first.

Documents of the context that are versions of one another (same subject, and same name up to a
version suffix, same title, or near-identical text) are grouped in :attr:`Context.versions`, the one
that looks current first (:mod:`ancre.query.versions`).

Every chunk is read again through :meth:`Store.chunks_of` *with the rights filter* — the windows,
and the hit itself: a document whose hit is no longer readable is skipped, and selection only ever
chooses among chunks that read returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ancre.index.store import Store
from ancre.index.tokenize import fold, tokenize
from ancre.models import SearchResult, StoredPoint, Subject, nfc
from ancre.query.subjects import DocSubject, Level, Name, asked_entities, doc_levels, doc_subject
from ancre.query.versions import Versioned, VersionGroup, archive_folder, version_groups
from ancre.query.wording import any_word
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
    heading_path: tuple[str, ...] = ()
    """The headings above the chunk, outermost first (``heading_path[0]``: the document's title)."""
    modified_at: float = 0.0
    """The source file's modification time as indexed, epoch seconds (``0.0``: unknown)."""
    subject: Subject | None = None
    """Whose document it is, as indexed (``None``: indexed before subjects)."""
    header: str = ""
    """The chunk's contextual header (embedded and keyword-indexed with it, never quoted)."""

    @property
    def doc(self) -> DocSubject:
        """The names its document answers to (:func:`~ancre.query.subjects.doc_subject`)."""
        return doc_subject(self.subject, self.filename, self.path, self.heading_path[0] if self.heading_path else "")


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
    whether the principal document clearly led (see the module doc); ``versions``: the groups of
    its documents that are versions of one another (:func:`find_versions`)."""

    extracts: tuple[Extract, ...] = ()
    sources: tuple[Source, ...] = ()
    leading: bool = False
    versions: tuple[VersionGroup, ...] = ()
    entities: tuple[Name, ...] = ()
    """The names the question asks about that tell its documents apart
    (:func:`~ancre.query.subjects.asked_entities`); ``()``: none."""
    focused: bool = False
    """A precise question naming a subject some documents have exactly: only those documents
    (and their versions) were kept (see the module doc, « The asked entity »)."""

    @property
    def empty(self) -> bool:
        """No extract at all: the query must be refused without calling a model (control 1)."""
        return not self.extracts


_BROAD_VERB = any_word(
    r"r[ée]sum\w*", r"list\w*", r"r[ée]capitul\w*", r"synth[èe]s\w*", r"compar\w*", r"pass\w+\s+en\s+revue",
    "tous", "toutes", "chacun", "chacune", "ensemble",
)
_PLURAL_HEAD = re.compile(
    r"(?<![^\W_])(?:les|des|tous\s+les|toutes\s+les|ces|leurs|nos|vos)\s+(?:(?:deux|trois|quatre|\d+)\s+)?([^\W\d_]{3,}[sx])(?![^\W_])",
    re.IGNORECASE,
)


def broad_topic(question: str) -> str | None:
    """The index term of the plural noun a broad question is about (« Résume les contrats de
    maintenance des clients » → ``"contrat"``), or ``None`` for a question about one thing. Broad:
    a summarising or comparing verb (« résume », « liste », « compare », « tous »…) with a plural
    noun after « les »/« des »/« tous les »…, or a question on « les … » of « tous les … »."""
    if not _BROAD_VERB.search(question):
        return None
    for m in _PLURAL_HEAD.finditer(question):
        terms = tokenize(m.group(1))
        if terms:
            return terms[0]
    return None


def _fact_weight(text: str) -> int:
    """How many figures a chunk states (digits runs and number words), to prefer the informative
    chunks of a document in a broad question's context."""
    return len(re.findall(r"\d+(?:[ '’.,]\d+)*", text)) + len(re.findall(
        r"(?<![^\W_])(?:deux|trois|quatre|cinq|six|sept|huit|neuf|dix|douze|quinze|vingt|trente|quarante|cinquante|soixante|cent)(?![^\W_])",
        fold(text)))


def find_versions(extracts: Sequence[Extract], sources: Sequence[Source]) -> tuple[VersionGroup, ...]:
    """The version groups among ``sources``, read from their ``extracts``
    (:func:`ancre.query.versions.version_groups`)."""
    docs = []
    for s in sources:
        mine = [e for e in extracts if (e.collection, e.doc_id) == (s.collection, s.doc_id)]
        title = next((e.heading_path[0] for e in mine if e.heading_path), "")
        modified = max((e.modified_at for e in mine), default=0.0)
        subject = mine[0].doc if mine else doc_subject(None, s.filename, s.path, title)
        docs.append(Versioned(s.filename, s.path, s.location, title, "\n".join(e.text for e in mine), modified, subject))
    return version_groups(docs)


def name_key(filename: str) -> str:
    """File-name identity for copy detection: NFC, case-folded."""
    return nfc(filename).casefold()


def _copy_key(r: SearchResult) -> tuple[str, bool]:
    """What makes two documents copies: the same file name (:func:`name_key`), both in an archive
    folder or both outside one — an archived file of the same name is an older version."""
    return name_key(r.filename), archive_folder(r.path) is not None


def _text_key(text: str) -> str:
    return " ".join(nfc(text).split())


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


def _best_per_doc(ranked: Sequence[SearchResult]) -> list[SearchResult]:
    """The best result of each document of ``ranked`` (best first), in that order."""
    docs: list[SearchResult] = []
    seen_docs: set[tuple[str, str]] = set()
    for r in ranked:
        if (r.collection, r.doc_id) not in seen_docs:
            seen_docs.add((r.collection, r.doc_id))
            docs.append(r)
    return docs


def _broad_window(points: Sequence[StoredPoint], best: SearchResult, size: int) -> list[StoredPoint]:
    """Up to ``size`` of ``best``'s document's ``points``: its hit, then the chunks stating the
    most facts (nearest the hit first on a tie), in chunk order; ``[]`` when the hit itself was
    not returned."""
    mine = [p for p in points if p.payload.doc_id == best.doc_id]
    hit = [p for p in mine if p.payload.chunk_index == best.chunk_index]
    rest = sorted((p for p in mine if p.payload.chunk_index != best.chunk_index),
                  key=lambda p: (-_fact_weight(p.payload.text), abs(p.payload.chunk_index - best.chunk_index)))
    return sorted(hit + rest[: size - 1], key=lambda p: p.payload.chunk_index) if hit else []


def _doc_window(
    best: SearchResult, store: Store, principals: frozenset[str], size: int, *, broad: bool
) -> list[StoredPoint]:
    """Up to ``size`` chunks of ``best``'s document around its hit, read again through
    ``store.chunks_of`` under the rights filter (twice as far each side for a broad question);
    ``[]`` when the hit is no longer readable. Raises :class:`~ancre.errors.StoreError`."""
    reach = size * 2 if broad else size
    wanted = range(max(0, best.chunk_index - reach + 1), best.chunk_index + reach)
    points = store.chunks_of(best.collection, best.doc_id, list(wanted), principals)
    if broad:
        return _broad_window(points, best, size)
    return [p for p in _window(points, best.chunk_index, size) if p.payload.doc_id == best.doc_id]


def _extract(p: StoredPoint, score: float | None) -> Extract:
    """The :class:`Extract` of chunk ``p`` (``score``: its RRF score when it was a hit)."""
    pl = p.payload
    return Extract(
        filename=pl.filename,
        doc_id=pl.doc_id,
        chunk_index=pl.chunk_index,
        text=pl.text,
        location=pl.location,
        path=pl.path,
        collection=pl.collection,
        score=score,
        heading_path=tuple(pl.heading_path),
        modified_at=pl.modified_at,
        subject=pl.subject,
        header=pl.header,
    )


def _source(p: StoredPoint, score: float) -> Source:
    """The :class:`Source` of chunk ``p``'s document, its rights as read with ``p``."""
    first = p.payload
    acl = first.acl()
    return Source(
        filename=first.filename,
        doc_id=first.doc_id,
        path=first.path,
        location=first.location,
        collection=first.collection,
        acl_digest=acl.digest(),
        score=score,
    )


def result_subject(r: SearchResult) -> DocSubject:
    """The names a result's document answers to (:func:`~ancre.query.subjects.doc_subject`)."""
    return doc_subject(r.subject, r.filename, r.path, r.heading_path[0] if r.heading_path else "")


def _by_entity(
    docs: list[SearchResult], question: str, *, broad: bool
) -> tuple[list[SearchResult], tuple[Name, ...], bool]:
    """``docs`` (best result of each document, best first) ranked by how their subject (or
    passage) matches the entities ``question`` asks about, then by score; for a precise question
    with a document whose *subject* matches exactly, only the exact matches (see the module doc).
    Returns the documents, the entities and whether the context is focused on them."""
    subjects = [result_subject(d) for d in docs]
    texts = [d.text for d in docs]
    entities = asked_entities(question, subjects, texts) if question else ()
    if not entities:
        return docs, (), False
    per_entity = [doc_levels(e, subjects, texts) for e in entities]
    levels = [max(lv[i] for lv in per_entity) for i in range(len(docs))]
    order = sorted(range(len(docs)), key=lambda i: (-levels[i], i))
    by_subject = any(s.level(e) is Level.EXACT for s in subjects for e in entities)
    if not broad and by_subject:  # a passage naming the client stays, but never decides alone
        return [docs[i] for i in order if levels[i] is Level.EXACT], entities, True
    return [docs[i] for i in order], entities, False


def build_context(
    results: Sequence[SearchResult],
    store: Store,
    principals: frozenset[str],
    cfg: ContextConfig,
    *,
    broad: bool = False,
    question: str = "",
) -> Context:
    """Select the context for fused ``results`` (any order; ranked here by RRF score, best first).
    ``broad``: every document gets an equal share (see the module doc, « Broad questions »);
    ``question``: what is asked, whose named entities rank and select the documents (see the
    module doc, « The asked entity decides »; ``""``: by score alone).

    Reads chunk windows with ``store.chunks_of(..., principals)``: an empty principal set yields an
    empty context. Raises :class:`~ancre.errors.StoreError` from the store.
    """
    if not results or not principals:
        return Context()
    ranked = sorted(results, key=lambda r: -r.score)
    hit_scores = {(r.collection, r.doc_id, r.chunk_index): r.score for r in ranked}
    docs, entities, focused = _by_entity(_best_per_doc(ranked), question, broad=broad)

    extracts: list[Extract] = []
    sources: list[Source] = []
    kept_names: set[tuple[str, bool]] = set()
    kept_texts: set[str] = set()
    principal: SearchResult | None = None
    distinct = len({name_key(d.filename) for d in docs})
    share = max(cfg.chunks_per_complement, cfg.max_chunks // max(1, min(distinct, cfg.other_docs + 1)))
    for best in docs:
        if principal is not None and len(sources) > cfg.other_docs:
            break
        if _copy_key(best) in kept_names:
            continue
        size = cfg.principal_max if principal is None else cfg.chunks_per_complement
        if broad:
            size = share
        window = _doc_window(best, store, principals, size, broad=broad)
        new = [p for p in window if _text_key(p.payload.text) not in kept_texts]
        if not new:
            continue
        principal = principal or best
        kept_names.add(_copy_key(best))
        for p in new:
            kept_texts.add(_text_key(p.payload.text))
            extracts.append(_extract(p, hit_scores.get((best.collection, p.payload.doc_id, p.payload.chunk_index))))
        sources.append(_source(new[0], best.score))
    if principal is None:
        return Context()

    rivals = [d.score for d in docs if name_key(d.filename) != name_key(principal.filename)]
    leading = not rivals or principal.score - max(rivals) >= cfg.threshold
    if not leading and len(extracts) > cfg.max_chunks and not broad:
        extracts = extracts[: cfg.max_chunks]
        shown = {(e.collection, e.doc_id) for e in extracts}
        sources = [s for s in sources if (s.collection, s.doc_id) in shown]
    return Context(
        tuple(extracts), tuple(sources), leading, find_versions(extracts, sources), entities, focused
    )


__all__ = [
    "Context", "Extract", "Source", "broad_topic", "build_context", "find_versions", "name_key", "result_subject",
]
