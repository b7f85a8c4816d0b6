"""Whose document is it, and whom does a question ask about? (docs/ARCHITECTURE.md "Data flow of a
question" steps 4–6).

Every chunk carries its document's :class:`~ancre.models.Subject`, found at indexing
(:mod:`ancre.ingest.subject`): title, parties, file name in words, folder. Here a subject becomes
the **names** its document answers to (:func:`doc_subject`):

- each party (« Axonix SA », « Garage Dubois Sàrl »);
- each part of the title between dashes, colons and brackets, without the words that say what kind
  of document it is (« Contrat de maintenance — Garage Dubois » → « Garage Dubois »);
- the file name's words without those words, numbers and version marks (« 03 Contrat Maintenance
  Etude Rochat v 2024 » → « Etude Rochat »);
- the last folder, when it is a name (« CLIENTS/Garage Dubois/ », not « ARCHIVES »).

A name is compared by its **strong words**: folded (case, accents), without articles and links
(« l' », « de », « & »), legal forms (« SA », « Sàrl », « AG »), civilities (« Madame »), the kinds
of document (« contrat », « offre ») and numbers; its **qualifiers** (« garage », « étude »,
« fiduciaire », « cabinet »…) count only when the asked name has them. An asked name matches a
document (:class:`Level`):

- ``EXACT`` when one of its names has the same strong words and holds every qualifier asked
  (« l'étude Rochat » = « Étude Rochat & Associés »; « Garage Dubois » = « Garage Dubois Sàrl »);
- ``PARTIAL`` when they only share a strong word (« Garage Dubois » / « Dubois Transports SA »);
- ``NONE`` otherwise — a shared qualifier (« Garage ») or a name one letter apart (« Dubois » /
  « Dubuis ») is another client: never a match. Such a near miss is a :func:`lookalike`: a
  question naming « Fiduciaire Dubuy » when only « Fiduciaire Dubuis » exists asks about a client
  that has no document.

:func:`question_entities` finds the names a text speaks of: runs of capitalised words (with the
qualifier before them: « du garage Dubois »), and — case and accents aside — any name of the known
documents all of whose strong words it writes (« forfait du garage dubois »). :func:`asked_entities`
keeps those that tell documents apart: a name every document of the context answers to (the
provider « Axonix SA » in all its contracts) asks about none of them.

:func:`same_subject` tells whether two documents are about the same subject: same parties when both
name parties, else the same title name, else the same file name words; the versions of a document
(:mod:`ancre.query.versions`) are only ever found among documents of one subject.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from pathlib import PurePosixPath

from ancre.index.tokenize import STOP_WORDS, fold
from ancre.ingest.subject import file_words, named_folder
from ancre.models import Subject

__all__ = [
    "DOCUMENT_WORDS",
    "DocSubject",
    "Level",
    "Mention",
    "Name",
    "asked_entities",
    "discriminates",
    "doc_levels",
    "doc_subject",
    "lookalike",
    "mentions",
    "question_entities",
    "same_subject",
    "text_level",
]


def _folded(words: str) -> frozenset[str]:
    return frozenset(fold(w) for w in words.split())


QUALIFIERS = _folded(
    "étude garage fiduciaire cabinet société entreprise groupe bureau atelier maison établissements ets agence "
    "commune association fondation clinique pharmacie boulangerie menuiserie carrosserie hôtel restaurant café "
    "transports transport immobilier imprimerie électricité sanitaire architecture conseil consulting informatique "
    "services holding banque assurance assurances école cave domaine laboratoire physiothérapie cabinet notaire"
)
"""Words that say what kind of business a name is: they count only when the asked name has them."""
IGNORED = _folded(
    "sa sàrl sarl ag gmbh sagl snc sas ltd inc cie co & et de du des d la le les l au aux "
    "associés associé associées fils frères partenaires partners madame monsieur mme m me maître dr mlle "
    "chf eur usd fr frs ht ttc tva"
)
"""Legal forms, links, articles, civilities, currencies and tax marks: never part of a name's identity."""
DOCUMENT_WORDS = _folded(
    "contrat contrats maintenance offre offres réponse ao appel d'offres bail baux lettre lettres avenant annexe "
    "proposition devis facture convention accord mandat attestation certificat engagement résiliation confirmation "
    "commande prestation prestations service support location infogérance hébergement licence version v rev final "
    "finale signé signée scan copie draft brouillon archive archivé ancien ancienne old new nouveau nouvelle rh document "
    "note rapport grille politique conditions générales cg migration projet fiche dossier courrier confidentiel "
    "remplacée remplacé obsolète"
)
"""Words that say what kind of document it is, not whose."""

_WORD = re.compile(r"[^\W_]+")
_CAP = r"[A-ZÀ-ÖØ-Þ][\w’'.\-]*"
_LINK = r"(?:\s+(?:de\s+la|de|du|des|la|le)\s+|\s+d['’]|\s*&\s*|\s+)"
_RUN = re.compile(rf"{_CAP}(?:{_LINK}{_CAP})*")
_QUALIFIER_BEFORE = re.compile(r"(?:(?<![^\W_])(?:l['’]|la\s+|le\s+|les\s+|du\s+|de\s+la\s+|de\s+l['’]|au\s+))?([^\W\d_]+)\s+$")
_SEPARATORS = re.compile(r"\s+[—–-]\s+|\s*[—–:|/()\[\]]\s*")
_SENTENCE_END = ".!?…\n"


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(fold(text)))


@dataclass(frozen=True)
class Name:
    """A name as written (``written``), its folded words (``tokens``), its strong words (``strong``:
    neither qualifiers, links, legal forms, civilities, kinds of document nor numbers) and its
    qualifiers (``qualifiers``)."""

    written: str
    tokens: frozenset[str]
    strong: frozenset[str]
    qualifiers: frozenset[str]

    @classmethod
    def of(cls, written: str) -> Name:
        """The :class:`Name` of ``written``."""
        toks = _tokens(written)
        strong = frozenset(
            t for t in toks
            if t not in QUALIFIERS and t not in IGNORED and t not in DOCUMENT_WORDS and t not in STOP_WORDS
            and not t.isdigit() and len(t) > 1
        )
        return cls(" ".join(written.split()), frozenset(toks), strong, frozenset(t for t in toks if t in QUALIFIERS))

    def __bool__(self) -> bool:
        return bool(self.strong)

    @property
    def key(self) -> frozenset[str]:
        """Its strong words and qualifiers: what tells two subjects apart (« Garage Dubois » ≠
        « Dubois Transports »)."""
        return self.strong | self.qualifiers


class Level(IntEnum):
    """How an asked name matches a document (see the module doc)."""

    NONE = 0
    PARTIAL = 1
    EXACT = 2


def level(asked: Name, name: Name) -> Level:
    """How ``asked`` matches one name of a document."""
    if not asked.strong or not name.strong:
        return Level.NONE
    if asked.strong == name.strong and asked.qualifiers <= name.tokens:
        return Level.EXACT
    if asked.strong & name.strong:
        return Level.PARTIAL
    return Level.NONE


def _distance_at_most(a: str, b: str, limit: int) -> bool:
    """Whether the Levenshtein distance of ``a`` and ``b`` is at most ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def _looks_like(asked: Name, name: Name) -> bool:
    if not asked.strong or not name.strong or asked.strong == name.strong or len(asked.strong) != len(name.strong):
        return False
    mine, theirs = asked.strong - name.strong, name.strong - asked.strong
    return all(any(min(len(a), len(b)) >= 4 and _distance_at_most(a, b, 2) for b in theirs) for a in mine)


@dataclass(frozen=True)
class DocSubject:
    """The names a document answers to (see the module doc) and the keys :func:`same_subject`
    compares (:attr:`Name.key`): its parties', its title name's, its file name's (each
    ``frozenset()`` when it has none). ``label``: how it is named to a reader (its title, else its file name in
    words)."""

    names: tuple[Name, ...]
    parties: frozenset[frozenset[str]]
    title_name: frozenset[str]
    file_name: frozenset[str]
    label: str

    def level(self, asked: Name) -> Level:
        """How ``asked`` matches this document: the best over its names."""
        return max((level(asked, n) for n in self.names), default=Level.NONE)

    def lookalike(self, asked: Name) -> bool:
        """Whether ``asked`` is one of this document's names a letter or two apart (not equal)."""
        return self.level(asked) is Level.NONE and any(_looks_like(asked, n) for n in self.names)


def _strip_generic(text: str) -> str:
    """``text`` without the kind-of-document words, links and numbers at its start and end."""
    words = text.split()

    def generic(w: str) -> bool:
        t = _tokens(w)
        return not t or all(x in DOCUMENT_WORDS or x in STOP_WORDS or x in IGNORED or x.isdigit() for x in t)

    while words and generic(words[0]):
        words.pop(0)
    while words and (generic(words[-1]) or re.fullmatch(r"v?\d+[a-z]?", fold(words[-1]))):
        words.pop()
    return " ".join(words)


def _title_names(title: str) -> list[str]:
    """The name parts of a title: each part between separators, generic words stripped."""
    title = re.sub(r"\([^)]*\)", " ", title)
    return [p for p in (_strip_generic(part) for part in _SEPARATORS.split(title)) if p]


def _folder_name(folder: str) -> str:
    """The last folder of ``folder`` when it reads as a name (:func:`~ancre.ingest.subject.named_folder`),
    without the words that say what kind of document it holds."""
    return _strip_generic(named_folder(folder))


@lru_cache(maxsize=4096)
def _doc_subject(subject: Subject) -> DocSubject:
    parties = [Name.of(p) for p in subject.parties]
    titles = [Name.of(t) for t in _title_names(subject.title)]
    files = [Name.of(_strip_generic(subject.file_words))]
    folder = [Name.of(_folder_name(subject.folder))]
    names = tuple(n for n in [*parties, *titles, *files, *folder] if n)
    title_key = frozenset().union(*(t.key for t in titles if t)) if titles else frozenset()
    return DocSubject(
        names, frozenset(p.key for p in parties if p), frozenset(title_key), files[0].key if files[0] else frozenset(),
        subject.title or subject.file_words,
    )


def doc_subject(subject: Subject | None, filename: str, path: str = "", title: str = "") -> DocSubject:
    """The :class:`DocSubject` of a document from its stored ``subject``; for a point indexed
    before subjects (``None``), from its ``filename``, ``path`` and ``title`` (its first heading)."""
    if subject is None:
        folder = str(PurePosixPath(path).parent) if path else ""
        subject = Subject(title, (), file_words(filename), "" if folder == "." else folder)
    return _doc_subject(subject)


def same_subject(a: DocSubject, b: DocSubject) -> bool | None:
    """Whether ``a`` and ``b`` are about the same subject: the same parties when both name some,
    else the same title name when both have one, else the same file name words; ``None`` when they
    share no such clue."""
    for x, y in ((a.parties, b.parties), (a.title_name, b.title_name), (a.file_name, b.file_name)):
        if x and y:
            return x == y
    return None


def _opens(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t\"'«“(*_")
    return not before or before[-1] in _SENTENCE_END


def _qualifier_before(text: str, end: int) -> tuple[int, str] | None:
    """The qualifier word (« la société », « l'étude ») written just before ``text[end:]``, with
    where it starts, or ``None``. :data:`_QUALIFIER_BEFORE` searched over the letters, spaces and
    apostrophes that end ``text[:end]`` (and the character before them, for its look-behind) gives
    the match a search over all of ``text[:end]`` gives — a match holds nothing else — without
    rescanning the whole text for each run (quadratic on a long document)."""
    first = end
    while first > 0 and (text[first - 1].isalpha() or text[first - 1].isspace() or text[first - 1] in "'’"):
        first -= 1
    offset = max(first - 1, 0)
    q = _QUALIFIER_BEFORE.search(text, offset, end)
    if q is None or fold(q.group(1)) not in QUALIFIERS:
        return None
    return q.start(1), q.group(1)


def _capitalised_spans(text: str) -> list[tuple[int, int, str]]:
    """Runs of capitalised words of ``text`` with the qualifier written before them, and their
    spans; a run opening the text or a sentence loses its first word (« Quel », « Liste »)."""
    out: list[tuple[int, int, str]] = []
    for m in _RUN.finditer(text):
        run, start = m.group(0), m.start()
        if _opens(text, start):
            rest = run.split(None, 1)
            if len(rest) < 2:
                continue
            start += len(run) - len(rest[1])
            run = rest[1]
        q = _qualifier_before(text, start)
        if q is not None:
            run, start = f"{q[1]} {run}", q[0]
        out.append((start, m.end(), run))
    return out


def _capitalised(text: str) -> list[str]:
    return [run for _, _, run in _capitalised_spans(text)]


@dataclass(frozen=True)
class Mention:
    """A name written in a text, at ``start``–``end``."""

    start: int
    end: int
    name: Name


def mentions(text: str, known: Iterable[DocSubject] = ()) -> list[Mention]:
    """Where ``text`` writes a name, in order: its capitalised runs (see :func:`question_entities`)
    and the ``known`` documents' names whose strong words it all writes in any case (placed at the
    first of those words)."""
    out: list[Mention] = []
    for start, end, run in _capitalised_spans(text):
        n = Name.of(run)
        if n:
            out.append(Mention(start, end, n))
    covered = {(m.start, m.end) for m in out}
    folded = fold(text)
    for doc in known:
        for n in doc.names:
            spans = [re.search(rf"(?<![^\W_]){re.escape(w)}(?![^\W_])", folded) for w in n.strong]
            if not n.strong or any(s is None for s in spans):
                continue
            start = min(s.start() for s in spans if s is not None)
            end = max(s.end() for s in spans if s is not None)
            if any(a <= start < b for a, b in covered):
                continue
            covered.add((start, end))
            out.append(Mention(start, end, n))
    return sorted(out, key=lambda m: m.start)


def question_entities(text: str, known: Iterable[DocSubject] = ()) -> tuple[Name, ...]:
    """The names ``text`` speaks of (see the module doc), in order, each once: its capitalised
    runs, then the ``known`` documents' names whose strong words it all writes (any case)."""
    out: list[Name] = []
    for run in _capitalised(text):
        n = Name.of(run)
        if n and all(n.strong != o.strong for o in out):
            out.append(n)
    words = set(_tokens(text))
    covered = frozenset().union(*(n.strong for n in out)) if out else frozenset()
    for doc in known:
        for n in doc.names:
            if n.strong <= words and not n.strong <= covered and all(n.strong != o.strong for o in out):
                out.append(n)
    return tuple(out)


def text_level(asked: Name, text: str) -> Level:
    """``EXACT`` when ``text`` writes ``asked`` as a name (a note about « Baumont Industries »'s
    server room whose own subject is another), else ``NONE``."""
    if not asked or not set(asked.strong) <= set(_tokens(text)):
        return Level.NONE
    return Level.EXACT if any(level(asked, m.name) is Level.EXACT for m in mentions(text)) else Level.NONE


def doc_levels(asked: Name, docs: Sequence[DocSubject], texts: Sequence[str] | None = None) -> list[Level]:
    """How ``asked`` matches each of ``docs``: by its subject, or exactly when its ``texts[i]``
    (what is shown of it) write the name."""
    levels = [d.level(asked) for d in docs]
    if texts is not None:
        levels = [max(lv, text_level(asked, t)) if lv is not Level.EXACT else lv for lv, t in zip(levels, texts, strict=True)]
    return levels


def discriminates(levels: Sequence[Level], docs: Sequence[DocSubject]) -> bool:
    """Whether a name matching ``docs`` at ``levels`` tells them apart: not one that every one of
    several documents of different subjects answers to exactly (the provider, a party of every
    contract)."""
    distinct = len({(d.parties, d.title_name, d.file_name) for d in docs})
    return not (distinct >= 2 and levels and all(lv is Level.EXACT for lv in levels))


def asked_entities(text: str, docs: Sequence[DocSubject], texts: Sequence[str] | None = None) -> tuple[Name, ...]:
    """The names of :func:`question_entities` (over ``docs``) that tell ``docs`` apart
    (:func:`discriminates`, levels from :func:`doc_levels` with ``texts``): each matches one of
    them at least partly or is a :func:`lookalike` of one."""
    out: list[Name] = []
    for n in question_entities(text, docs):
        levels = doc_levels(n, docs, texts)
        if not discriminates(levels, docs):
            continue  # the provider, in every contract: asks about none of them
        if any(lv is not Level.NONE for lv in levels) or any(d.lookalike(n) for d in docs):
            out.append(n)
    return tuple(out)


def lookalike(asked: Name, docs: Sequence[DocSubject]) -> bool:
    """Whether ``asked`` matches none of ``docs`` but is a near miss of one of their names."""
    return all(d.level(asked) is Level.NONE for d in docs) and any(d.lookalike(asked) for d in docs)
