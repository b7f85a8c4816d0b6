"""Questions that ask for a list (docs/ARCHITECTURE.md "Data flow of a question" steps 4 and 9):
« Liste tous les contrats de maintenance », « Quels sont tous les baux ? ».

Retrieval returns the passages nearest to the question, never an inventory: a list built from them
may miss documents. So a list question (:func:`list_question`: a listing verb or « tous les … » and
a plural noun, :func:`~ancre.query.context.broad_topic`) is searched deeper
(:data:`LIST_DEPTH` candidates per side, all fused results kept, instead of the configured 30 and
limit), every document among those
results whose file name, subject or passage holds the question's content terms is listed
(:func:`found_documents`), and the answer says how many matched and that the list rests on what
the search returned (:func:`list_note`). The extractive mode answers with that list
(:func:`extractive_list`); a model's answer gets the note after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ancre.index.tokenize import tokenize
from ancre.models import SearchResult
from ancre.query.context import broad_topic, result_subject
from ancre.query.relevance import question_terms
from ancre.query.wording import any_word

__all__ = ["LIST_DEPTH", "DocumentList", "ListedDocument", "extractive_list", "found_documents", "list_note", "list_question"]

LIST_DEPTH = 100
"""Candidates a list question takes from each side (vector, keywords) before fusion, twice the
usual; every fused result is read for the list."""

_LIST_VERB = any_word(
    r"list(?:e|er|ez|es)", r"[ée]num[èée]r\w*", r"inventori\w*", r"recense[rz]?", r"quels\s+sont\s+tous",
    r"quelles\s+sont\s+toutes", r"tous\s+les", r"toutes\s+les",
)


def list_question(question: str) -> bool:
    """Whether ``question`` asks for a list of documents (see the module doc)."""
    return broad_topic(question) is not None and _LIST_VERB.search(question) is not None


@dataclass(frozen=True)
class ListedDocument:
    """One document of a list: file name, folder (UNC or URL) and how it is named (its title, else
    its file name in words)."""

    filename: str
    location: str
    label: str


@dataclass(frozen=True)
class DocumentList:
    """The documents a list question found (best first), and ``searched``: the passages the
    search returned, which the list rests on."""

    documents: tuple[ListedDocument, ...]
    searched: int

    @property
    def matched(self) -> int:
        """How many documents matched."""
        return len(self.documents)


def found_documents(question: str, results: Sequence[SearchResult]) -> DocumentList:
    """The documents of ``results`` (fused, readable by the asker, any order) that hold every
    content term of ``question`` in their file name, subject or one of their passages, each once
    (by file name), best first."""
    terms = question_terms(question).content
    ranked = sorted(results, key=lambda r: -r.score)
    held: dict[str, set[str]] = {}
    first: dict[str, SearchResult] = {}
    for r in ranked:
        key = r.filename.casefold()
        first.setdefault(key, r)
        doc = result_subject(r)
        held.setdefault(key, set()).update(tokenize(f"{r.filename}\n{doc.label}\n{r.text}"))
    docs = tuple(
        ListedDocument(r.filename, r.location, result_subject(r).label)
        for key, r in first.items() if terms <= held[key]
    )
    return DocumentList(docs, len(results))


def list_note(listing: DocumentList) -> str:
    """The sentence that says the list may be partial: how many documents matched among how many
    passages the search returned."""
    n = listing.matched
    docs = "1 document correspond" if n == 1 else f"{n} documents correspondent"
    return (f"Liste établie à partir de la recherche : {docs} parmi les {listing.searched} passages les plus "
            "proches de la question ; elle peut être incomplète (un document que la recherche n'a pas "
            "retourné n'y figure pas).")


def extractive_list(listing: DocumentList, folder: Callable[[str], str] | None = None) -> str:
    """The extractive answer to a list question: the documents found, one per line (file name, how
    it is named, its folder through ``folder`` when given), then :func:`list_note`."""
    fmt = folder or (lambda s: s)
    lines = [f"- {d.filename} — {d.label}" + (f" ({fmt(d.location)})" if d.location else "") for d in listing.documents]
    head = "Réponse extractive (aucun modèle de langage configuré) : voici les documents trouvés."
    return "\n\n".join([head, "\n".join(lines), f"ℹ️ {list_note(listing)}"])
