"""Does an extract carry what the question asks about? A lexical gate for the extractive mode.

Without a language model nothing reads the extracts, and retrieval always returns the nearest
chunks, related or not ("Quelle est la capitale de l'Australie ?" brings back maintenance
contracts). So the extractive mode answers only when the extracts *say* what the question names
and asks (:class:`~ancre.query.llm.ExtractiveAnswerer`):

1. **Distinctive terms** — what the question is about, which no other document may stand in for:
   capitalised words that do not open a sentence (``Australie``, ``Dupont``, ``Baumont``), words
   with a digit (``2026``, ``4471-ZETA``), dashed/underscored codes with a capital
   (``WD-EXCL-042``), and quoted phrases (« … », "…", “…”). Folded with
   :func:`ancre.index.tokenize.fold`, each must appear, as a whole word, in the document's text
   shown in the context or in its file name or path (which the quote cites). A document missing
   one of them is *off topic*.
2. **Content terms** — the other words of the question as index terms
   (:func:`ancre.index.tokenize.tokenize`: folded, stop words dropped, French-stemmed; compounds
   such as ``est-ce`` or ``week-end`` through their parts only), minus request phrasing (« fais », « donne », « indique », « pareil »…). An extract's *coverage* is the
   share of them its text contains; the question is answered when an on-topic extract covers at
   least :data:`MIN_COVERAGE` of them.

Calibrated on the Axonix corpus (``examples/axonix/questions.json``): every question with an
expected source has an extract of it covering ≥ 0.5 (most cover 0.6–1.0); the refusals fail on a
distinctive term (Australie, Dupont, Rochat for bruno) or on coverage (chloe's server-room code:
the Baumont contract she may read covers 1 of « code », « accès », « salle », « serveur »).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ancre.index.tokenize import STOP_WORDS, fold, tokenize

MIN_COVERAGE = 0.5
"""Share of the question's content terms that the best on-topic extract must contain."""

_FILLERS_RAW = (
    "fais fait faire pareil idem dis dit dire donne donner indique indiquer explique expliquer "
    "peux pouvez sais savoir trouve trouver liste lister résume résumer voudrais aimerais "
    "merci stp svp"
)
FILLER_TERMS: frozenset[str] = frozenset(tokenize(_FILLERS_RAW))
"""Index terms of request phrasing that says nothing about the subject."""

_WORD = re.compile(r"[^\W_]+(?:[-_./\\:@][^\W_]+)*")
"""A word or a compound code/file name (the same joiners as the BM25 tokenizer)."""
_JOINED = re.compile(r"[-_./\\:@]")
"""A compound term (``est-ce``, ``week-end``): its parts are content terms of their own."""
_QUOTED = re.compile(r"«\s*([^»]+?)\s*»|\"([^\"]+)\"|“([^”]+)”")
_SENTENCE_END = ".!?…\n"
_OPENERS = " \t\r\"'«“‘(¿¡*_-—–"


@dataclass(frozen=True)
class QuestionTerms:
    """What the gate looks for. ``distinctive``: folded terms (words, codes, phrases) that must
    appear in an on-topic document; ``content``: index terms whose share in an extract is its
    coverage."""

    distinctive: tuple[str, ...]
    content: frozenset[str]

    @property
    def empty(self) -> bool:
        """Nothing to look for (a question made only of stop words and request phrasing)."""
        return not self.distinctive and not self.content


def _opens_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens the text or a sentence (its capital then says nothing).
    An elided article counts as a word: in « L'Étude Rochat » the capital is the name's."""
    before = text[:start].rstrip(_OPENERS)
    return not before or before[-1] in _SENTENCE_END


def _is_distinctive(word: str, opens_sentence: bool) -> bool:
    if any(c.isdigit() for c in word):
        return True
    if any(j in word for j in "-_./\\:@") and any(c.isupper() for c in word):
        return True
    return word[0].isupper() and not opens_sentence and fold(word) not in STOP_WORDS


def question_terms(question: str) -> QuestionTerms:
    """The distinctive and content terms of ``question`` (see the module doc).

    ``"Quelle est la capitale de l'Australie ?"`` → distinctive ``("australie",)``, content
    ``{"capital"}``. Never raises.
    """
    distinctive: list[str] = []
    for m in _QUOTED.finditer(question):
        phrase = " ".join(fold(next(g for g in m.groups() if g is not None)).split())
        if phrase:
            distinctive.append(phrase)
    for m in _WORD.finditer(question):
        if _is_distinctive(m.group(), _opens_sentence(question, m.start())):
            distinctive.append(fold(m.group()))
    distinctive = list(dict.fromkeys(distinctive))
    named = set(tokenize(" ".join(distinctive)))
    content = frozenset(
        t
        for t in tokenize(question)
        if t not in named and t not in FILLER_TERMS and not _JOINED.search(t)
    )
    return QuestionTerms(tuple(distinctive), content)


def mentions(folded_text: str, term: str) -> bool:
    """Whether the folded ``term`` occurs in ``folded_text`` as whole words (not inside a longer
    word; ``_``, ``-``, ``.`` and spaces count as boundaries, so file names match too)."""
    pattern = r"\s+".join(re.escape(part) for part in term.split())
    return re.search(rf"(?<![^\W_]){pattern}(?![^\W_])", folded_text) is not None


def coverage(terms: QuestionTerms, text: str) -> float:
    """Share (0–1) of ``terms.content`` found among the index terms of ``text``; 1.0 when the
    question has no content term."""
    if not terms.content:
        return 1.0
    return len(terms.content & set(tokenize(text))) / len(terms.content)


__all__ = [
    "FILLER_TERMS",
    "MIN_COVERAGE",
    "QuestionTerms",
    "coverage",
    "mentions",
    "question_terms",
]
