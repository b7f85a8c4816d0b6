"""Does an extract carry what the question asks about? A lexical gate for the extractive mode.

Without a language model nothing reads the extracts, and retrieval always returns the nearest
chunks, related or not ("Quelle est la capitale de l'Australie ?" brings back maintenance
contracts). So the extractive mode answers only when the extracts *say* what the question names
and asks (:class:`~ancre.query.llm.ExtractiveAnswerer`):

1. **Named terms** — what the question is about, which no other document may stand in for:
   capitalised words that do not open a sentence (``Australie``, ``Dupont``, ``Baumont``), words
   with a digit (``2026``, ``4471-ZETA``), dashed/underscored codes with a capital
   (``WD-EXCL-042``), and quoted phrases (« … », "…", “…”). Folded with
   :func:`ancre.index.tokenize.fold`, each must appear, as a whole word, in the document's text
   shown in the context or in its file name or path (which the quote cites).
2. **Content terms** — the question's other words as index terms
   (:func:`ancre.index.tokenize.tokenize`: folded, stop words dropped, French-stemmed; compounds
   such as ``est-ce`` through their parts only), minus question wording (:data:`FILLER_TERMS`:
   « fais », « donne », « doit », « faut », « chaque », the « an » of « par an », the pronoun « soi »…). The document
   frequencies over the chunks the user may read (:meth:`ancre.query.retrieval.Retriever.term_stats`) sort them:
   **rare** (in at least one and at most :data:`RARE_MIN_DF` chunks, or :data:`RARE_FRACTION` of
   them: ``consommation``, ``salle``, a client name typed in lower case), **common** (in more),
   **unknown** (in none: ``gagne``, ``ordinateurs`` — wording the documents put otherwise, which
   says nothing about which document is on topic).

A document is *on topic* when its shown text, file name or path holds every named term and the
rare terms weighing at least :data:`MIN_RARE_COVERAGE` of their IDF. Common words never make it
refuse. The question is answered from the on-topic extracts, ranked by IDF-weighted coverage of
the known (rare and common) content terms, then by RRF score, when it is *anchored*, or, failing
that, when all its words are known to the user's chunks and the best extract covers at least
:data:`MIN_COVERAGE` of them. It is anchored by a named term, or by its rare terms when they carry
at least :data:`MIN_RARE_SHARE` of the IDF of its rare and unknown terms together, an unknown term
weighing what BM25 gives a term in no chunk (``df = 0``, the most a term can weigh). A user who
reads few chunks finds ordinary words rare (for a trainee reading 199 chunks, « durée » is in one
of them), so a single rare term must not anchor a question whose other words the user's documents
never hold: « Quelle est la durée du congé maternité ? » (``dur`` rare; ``cong``, ``matern``
unknown: a share of 0.29) is refused rather than answered with a contract's « Durée », and so is
« quel est le code d'accès de la salle serveur » for a user who reads no such room (``acce`` rare;
``cod``, ``sall`` unknown: 0.27); « Combien gagne un technicien par an ? » (``technicien`` rare,
``gagn`` unknown: 0.45) is answered from the salary grid. Common terms weigh on neither side (their
counts are capped by the store's counting, and common words never make it refuse). Without
frequencies (no snapshot) every content term counts as common.

The frequencies are those of the chunks the user may read (the BM25 snapshot's rights mask, or
the store's rights filter), never of the whole index: a word found only in documents he may not
read is *unknown* to him, so neither a refusal nor an answer tells him that it exists anywhere;
every threshold above is a function of his counts alone.

Calibrated on the retrieval evaluation (``examples/axonix/eval.json``, docs/BENCHMARKS.md "Retrieval
evaluation"): « A combien est estimée la consommation Azure mensuelle de Sarrasin ? » is answered
from the offer (it says « par mois »: « mensuelle » is common, not required); for chloe, the
server-room code's words (``code``, ``salle``) are in no chunk she may read — unknown to her, they
require nothing in a question that names Baumont Industries, and she gets the Baumont contract's
passages, as she would if that document did not exist; the Australia, Dupont and "Rochat for
bruno" questions fail on a named term.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ancre.index.tokenize import STOP_WORDS, fold, tokenize

RARE_FRACTION = 0.01
"""A content term found in at most this share of the snapshot's chunks is rare (distinctive)."""
RARE_MIN_DF = 2
"""...or in at most this many of them (small indexes)."""
MIN_RARE_COVERAGE = 0.5
"""IDF share of the question's rare terms that an on-topic document must hold."""
MIN_COVERAGE = 0.5
"""IDF share of the content terms the best extract must hold when nothing anchors the question."""
MIN_RARE_SHARE = 1 / 3
"""IDF share of the question's rare and unknown terms that its rare terms must carry to anchor it
(an unknown term weighing the IDF of ``df = 0``)."""

TermStats = Callable[[Sequence[str]], tuple[int, Mapping[str, int]]]
"""``stats(index_terms) -> (chunks, {term: chunks containing it})``, e.g.
:meth:`ancre.query.retrieval.Retriever.term_stats`."""

_FILLERS_RAW = (
    "fais fait faire pareil idem dis dit dire donne donner indique indiquer explique expliquer "
    "peux pouvez sais savoir trouve trouver liste lister résume résumer voudrais aimerais "
    "merci stp svp "
    # modal verbs, quantifiers and question wording: how a question is put, not what it is about
    "doit doivent devoir faut falloir peut peuvent pouvoir veut veulent vouloir "
    "chaque tout tous toute toutes plusieurs quelque quelques certain certains "
    "utiliser correspond correspondre sert servir concerne concerner "
    # comparing: « compare les deux contrats »
    "compare comparer comparez comparaison deux "
    # the period of a rate (« par an »: documents write « annuel ») and a pronoun (« chez soi »)
    "an ans soi"
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
    """What the gate looks for. ``distinctive``: folded named terms (words, codes, phrases) that
    must appear in an on-topic document; ``content``: the other index terms; ``rare`` /
    ``unknown``: those of them in few / no chunks of the snapshot; ``idf``: the IDF of each known
    content term (BM25 ``ln(1 + (N - df + 0.5) / (df + 0.5))``; 1.0 each without frequencies);
    ``unknown_idf``: that of a term in no chunk (``df = 0``; 0.0 without frequencies)."""

    distinctive: tuple[str, ...]
    content: frozenset[str]
    rare: frozenset[str] = frozenset()
    unknown: frozenset[str] = frozenset()
    idf: Mapping[str, float] = field(default_factory=dict)
    unknown_idf: float = 0.0

    @property
    def empty(self) -> bool:
        """Nothing to look for (a question made only of stop words and request phrasing)."""
        return not self.distinctive and not self.content

    @property
    def rare_share(self) -> float:
        """IDF share (0–1) of the rare terms among the rare and unknown terms, an unknown term
        weighing :attr:`unknown_idf`; 0.0 without rare terms."""
        rare = self.weight(self.rare)
        total = rare + self.unknown_idf * len(self.unknown)
        return rare / total if total > 0 else 0.0

    @property
    def anchored(self) -> bool:
        """Whether a named term, or rare terms carrying at least :data:`MIN_RARE_SHARE` of the
        IDF of the rare and unknown terms, say what the question is about (see the module doc)."""
        return bool(self.distinctive) or (bool(self.rare) and self.rare_share >= MIN_RARE_SHARE)

    def weight(self, terms: frozenset[str] | set[str]) -> float:
        """Sum of the IDF of ``terms`` (unknown terms weigh 0)."""
        return sum(self.idf.get(t, 0.0) for t in terms)


def _opens_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens the text or a sentence (its capital then says nothing).
    An elided article counts as a word: in « L'Étude Rochat » the capital is the name's."""
    before = text[:start].rstrip(_OPENERS)
    return not before or before[-1] in _SENTENCE_END


def _is_distinctive(word: str, opens_sentence: bool) -> bool:
    if any(c.isdigit() for c in word):
        return True
    # a code (WD-EXCL, LABO-G9): a capital after the first letter; « Peut-on » opening a sentence is not one
    if any(j in word for j in "-_./\\:@") and any(c.isupper() for c in word[1:]):
        return True
    return word[0].isupper() and not opens_sentence and fold(word) not in STOP_WORDS


def question_terms(question: str, stats: TermStats | None = None) -> QuestionTerms:
    """The named, content and rare terms of ``question`` (see the module doc); ``stats`` gives
    the user's document frequencies (``None``: no term is rare).

    ``"Quelle est la capitale de l'Australie ?"`` → distinctive ``("australie",)``, content
    ``{"capital"}``. Never raises (but ``stats`` may).
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
    if stats is None or not content:
        return QuestionTerms(tuple(distinctive), content, idf=dict.fromkeys(content, 1.0))
    n, df = stats(sorted(content))
    limit = max(RARE_MIN_DF, RARE_FRACTION * n)
    rare = frozenset(t for t in content if 1 <= df.get(t, 0) <= limit)
    unknown = frozenset(t for t in content if df.get(t, 0) <= 0)
    idf = {t: _idf(n, df[t]) for t in content if t not in unknown}
    return QuestionTerms(tuple(distinctive), content, rare, unknown, idf, _idf(n, 0))


def _idf(n: int, df: int) -> float:
    """BM25's IDF of a term in ``df`` of ``n`` chunks."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def mentions(folded_text: str, term: str) -> bool:
    """Whether the folded ``term`` occurs in ``folded_text`` as whole words (not inside a longer
    word; ``_``, ``-``, ``.`` and spaces count as boundaries, so file names match too)."""
    pattern = r"\s+".join(re.escape(part) for part in term.split())
    return re.search(rf"(?<![^\W_]){pattern}(?![^\W_])", folded_text) is not None


def coverage(terms: QuestionTerms, text: str) -> float:
    """IDF-weighted share (0–1) of the known content terms found among the index terms of
    ``text``; 1.0 when the question has no known content term."""
    total = terms.weight(terms.content - terms.unknown)
    if total <= 0:
        return 1.0
    return terms.weight(terms.content & set(tokenize(text))) / total


def on_topic(terms: QuestionTerms, text: str) -> bool:
    """Whether a document whose shown text, file name and path are ``text`` is on topic: every
    named term as whole words, and at least :data:`MIN_RARE_COVERAGE` of the rare terms' IDF."""
    folded = fold(text)
    if not all(mentions(folded, t) for t in terms.distinctive):
        return False
    if not terms.rare:
        return True
    held = terms.weight(terms.rare & set(tokenize(text)))
    return held >= MIN_RARE_COVERAGE * terms.weight(terms.rare)


__all__ = [
    "FILLER_TERMS",
    "MIN_COVERAGE",
    "MIN_RARE_COVERAGE",
    "MIN_RARE_SHARE",
    "RARE_FRACTION",
    "RARE_MIN_DF",
    "QuestionTerms",
    "TermStats",
    "coverage",
    "mentions",
    "on_topic",
    "question_terms",
]
