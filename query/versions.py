"""Versions of one document in a context (docs/ARCHITECTURE.md "Data flow of a question" step 4):
which documents shown together are versions of one another, and which one looks current.

A share keeps old versions next to new ones (``ARCHIVES/03_Contrat_Maintenance_Etude_Rochat_v2024.docx``
beside ``DIRECTION/03_Contrat_Maintenance_Etude_Rochat.docx``): both answer « Quelle est la durée du
contrat Rochat ? », one with 24 months, the other with 36. An answer must never pick one silently.

**Versions of one another** (:func:`version_groups`), for two documents of a context **about the
same subject** (:func:`ancre.query.subjects.same_subject`: the same parties, else the same title
name, else the same file name words — a different client's contract is never a version, however
alike the two texts):

- the *same name up to a version or date suffix*: the file name without extension, folded, with
  ``_v2024``, ``-v1.2``, ``_version 3``, ``_2024-01-15``, ``_old``, ``_ancien``, `` (2)``, « copie
  de » … removed, is the same (``contrat_01`` and ``contrat_02`` stay apart: a bare number is
  not a version);
- the *same title*: the first heading of the document (its chunks' ``heading_path[0]``) without a
  parenthesised or dashed version remark (« Contrat de maintenance — Étude Rochat (version 2024,
  remplacée) » = « Contrat de maintenance — Étude Rochat »);
- *near-identical text*: the word-trigram Jaccard similarity of their shown extracts is at least
  :data:`NEAR_IDENTICAL` (two contracts written from one template differ in names and numbers:
  about 0.65 on the Axonix corpus; two versions: about 0.78 and more) — unless their titles
  differ, or, when their subjects give no clue, each names (in its file name and as a capitalised
  word of its text) a subject the other never writes (two clients' contracts from one template:
  their « Durée » sections alone are near-identical, their titles and subjects are not).

**Which looks current** (:func:`_rank`), each clue giving a reason in French:

- « remplacée », « obsolète », « caduque », « ancienne version », « n'est plus en vigueur » in its
  title, file name or text: not current; « annule et remplace », « version en vigueur »: current;
- a folder named like an archive (``ARCHIVES``, ``Archive``, ``old``, ``ancien``, ``obsolete``,
  ``historique``): not current;
- a higher version or a later date in its file name;
- the latest date its text mentions (« prend effet le 1er janvier 2026 » beats 2024);
- the file's modification time, the weakest clue (a copy or a touched file moves it): only
  between documents the clues above leave tied, when each has a known time and the latest is
  more than :data:`MTIME_MARGIN` after the others.

The document with the best score is the current one; on a tie none is named (the answer then says
that it cannot tell).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

from ancre.index.tokenize import fold
from ancre.query.subjects import DocSubject, same_subject
from ancre.query.wording import any_word

NEAR_IDENTICAL = 0.72
"""Word-trigram Jaccard similarity from which two documents' shown texts are versions."""

MTIME_MARGIN = 86_400.0
"""Seconds by which a file's modification time must follow the others' to count as a clue (one
day: files copied or restored together differ by seconds)."""

_SUFFIXES = (
    re.compile(r"[\s_.\-]*\(\d+\)$"),
    re.compile(r"[\s_.\-]+(?:v|ver|version|rev|revision|r)[\s_.\-]*\d+(?:[._\-]\d+)*[a-z]?$"),
    re.compile(r"[\s_.\-]+(?:19|20)\d{2}(?:[\s_.\-]?\d{2}){0,2}$"),
    re.compile(r"[\s_.\-]+\d{2}[._\-]\d{2}[._\-](?:19|20)\d{2}$"),
    re.compile(r"[\s_.\-]+(?:old|ancien|ancienne|archive|archived|obsolete|final|finale|definitif|definitive|"
               r"copie|copy|draft|brouillon|new|nouveau|nouvelle|maj)$"),
)
_PREFIXES = re.compile(r"^(?:copie de|copy of|copie|old)[\s_.\-]+")
_TITLE_REMARK = re.compile(r"\s*(?:\([^)]*\)|[—–-]\s*(?:version|v\d|\d{4}|remplac|obsol|archiv)[^—–]*)\s*$", re.IGNORECASE)
_SUPERSEDED = any_word(
    r"remplac[ée]e?s?", r"obsol[èe]tes?", "caduc", "caduques?", r"p[ée]rim[ée]e?s?", "ancienne version",
    "n['’]est plus en vigueur", "plus en vigueur", "superseded", r"archiv[ée]e?s?",
)
_SUPERSEDES = re.compile(r"annule et remplace|version en vigueur|version actuelle", re.IGNORECASE)
_ARCHIVE_DIR = re.compile(
    r"^(?:archives?|archiv\w*|old|anciens?|anciennes?|obsolete|obsol[eè]tes?|historiques?|_old)$", re.IGNORECASE
)
_NAME_VERSION = re.compile(r"(?:v|version|rev)[\s_.\-]*(\d+(?:[._]\d+)*)|((?:19|20)\d{2})", re.IGNORECASE)
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")


@dataclass(frozen=True)
class Versioned:
    """One document as :func:`version_groups` reads it: ``filename``, ``path`` (in its source,
    POSIX), ``location`` (its folder: UNC or URL), ``title`` (first heading, ``""`` if none) and
    ``text`` (its extracts shown, in order)."""

    filename: str
    path: str
    location: str
    title: str
    text: str
    modified_at: float = 0.0
    """The file's modification time as indexed, epoch seconds (``0.0``: unknown)."""
    subject: DocSubject | None = None
    """Whose document it is (:func:`ancre.query.subjects.doc_subject`); ``None``: unknown."""


@dataclass(frozen=True)
class VersionGroup:
    """Documents of one context that are versions of one another. ``documents``: their file
    names, the one that looks current first; ``locations``: their folders, in the same order;
    ``current``: the file name that looks current (``None``: the clues do not tell);
    ``reasons``: why, in French (« « remplacée » dans le titre de 03_…_v2024.docx »,
    « 03_…_v2024.docx est dans un dossier d'archives (ARCHIVES) », « date la plus récente : 2026 »);
    ``related_by``: ``"nom"``, ``"titre"`` or ``"texte"``."""

    documents: tuple[str, ...]
    locations: tuple[str, ...]
    current: str | None
    reasons: tuple[str, ...]
    related_by: str
    paths: tuple[str, ...] = ()
    """Their paths in their sources, in the same order (a file and its archived copy may share a
    name)."""

    @property
    def others(self) -> tuple[str, ...]:
        """The versions that do not look current (file names)."""
        return self.documents[1:] if self.current is not None else self.documents

    @property
    def current_path(self) -> str | None:
        """The path of the version that looks current (``None``: the clues do not tell)."""
        return self.paths[0] if self.current is not None and self.paths else None

    def role(self, filename: str, path: str = "") -> str:
        """``"current"``, ``"replaced"`` or ``"unknown"`` for the member ``filename`` at ``path``
        (the path tells two members of one name apart)."""
        if self.current is None:
            return "unknown"
        if path and self.paths:
            return "current" if path == self.paths[0] else "replaced"
        return "current" if filename == self.current else "replaced"


def name_key(filename: str) -> str:
    """The file name without extension and version/date suffixes, folded
    (``03_Contrat_Maintenance_Etude_Rochat_v2024.docx`` → ``03_contrat_maintenance_etude_rochat``)."""
    stem = fold(filename.rsplit(".", 1)[0] if "." in filename.strip(".") else filename).strip()
    stem = _PREFIXES.sub("", stem)
    changed = True
    while changed:
        changed = False
        for rx in _SUFFIXES:
            new = rx.sub("", stem)
            if new != stem and new:
                stem, changed = new, True
    return stem


def title_key(title: str) -> str:
    """A title without a trailing version remark, folded, whitespace collapsed."""
    t = title.strip()
    while True:
        new = _TITLE_REMARK.sub("", t)
        if new == t:
            break
        t = new
    return " ".join(fold(t).split())


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[^\W_]+", fold(text))
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def similarity(a: str, b: str) -> float:
    """Word-trigram Jaccard similarity of two texts (0–1)."""
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y) if x and y else 0.0


def _related(a: Versioned, b: Versioned) -> str | None:
    if fold(a.filename) == fold(b.filename) and (_folder(a.path) is None) == (_folder(b.path) is None):
        return None  # copies, not versions (the context keeps one); an archived file of that name is one
    same = same_subject(a.subject, b.subject) if a.subject is not None and b.subject is not None else None
    if same is False:
        return None  # another subject (another client) is never a version
    if name_key(a.filename) == name_key(b.filename):
        return "nom"
    ta, tb = title_key(a.title), title_key(b.title)
    if ta and ta == tb and len(ta) >= 8:
        return "titre"
    if ta and tb:
        return None  # two titles that differ: two documents (« … — Baumont Industries » / « … — Étude Rochat »)
    if same is None and _names_apart(a, b):
        return None
    if len(a.text) >= 200 and len(b.text) >= 200 and similarity(a.text, b.text) >= NEAR_IDENTICAL:
        return "texte"
    return None


def _subject_words(doc: Versioned) -> set[str]:
    """Words of the file name that the document's own text writes as a name (capitalised):
    ``Baumont``, ``Rochat`` — not ``contrat``, ``signé``."""
    capitalised = {fold(w) for w in re.findall(r"(?<![^\W\d_])[A-ZÀ-Ý][^\W\d_]{3,}", doc.text)}
    return set(re.findall(r"[a-z]{4,}", name_key(doc.filename))) & capitalised


def _names_apart(a: Versioned, b: Versioned) -> bool:
    """Whether each document names, in its file name and its text, a subject the other never
    writes (``Contrat Baumont.docx`` writing « Baumont » / ``Contrat Rochat.docx`` writing
    « Rochat »): siblings written from one template, not versions."""
    ta, tb = fold(f"{a.filename}\n{a.text}"), fold(f"{b.filename}\n{b.text}")
    return any(w not in tb for w in _subject_words(a)) and any(w not in ta for w in _subject_words(b))


def archive_folder(path: str) -> str | None:
    """The archive folder (``ARCHIVES``, ``old``, ``ancien``…) ``path`` lies in, ``None`` if none."""
    return _folder(path)


def _folder(path: str) -> str | None:
    for part in PurePosixPath(path).parts[:-1]:
        if _ARCHIVE_DIR.match(part):
            return part
    return None


def _name_version(filename: str) -> tuple[float, ...]:
    stem = filename.rsplit(".", 1)[0]
    found = list(_NAME_VERSION.finditer(stem))
    if not found:
        return ()
    m = found[-1]
    raw = m.group(1) or m.group(2)
    return tuple(float(x) for x in re.split(r"[._]", raw) if x)


def _latest_year(doc: Versioned) -> int | None:
    years = [int(y) for y in _YEAR.findall(doc.text)]
    return max(years) if years else None


def _shown_name(d: Versioned, docs: Sequence[Versioned]) -> str:
    """How a document is named in a reason: its file name, with its folder when another of
    ``docs`` has the same name (a file and its archived copy of the same name)."""
    if sum(1 for x in docs if fold(x.filename) == fold(d.filename)) < 2:
        return d.filename
    folder = str(PurePosixPath(d.path).parent)
    return f"{d.filename} ({folder if folder != '.' else 'racine'})"


def _stated_clues(docs: Sequence[Versioned], score: list[float], reasons: list[str]) -> None:
    """What each document says of itself: « remplacée » and its kin (-3), « en vigueur » (+1),
    an archive folder (-2)."""
    for i, d in enumerate(docs):
        name = _shown_name(d, docs)
        head = f"{d.title}\n{d.filename}"
        m = _SUPERSEDED.search(head) or _SUPERSEDED.search(re.sub(r"archiv\w*", "", d.text, flags=re.IGNORECASE))
        if m:
            score[i] -= 3
            where = "le titre" if _SUPERSEDED.search(d.title) else "le nom" if _SUPERSEDED.search(d.filename) else "le texte"
            reasons.append(f"« {m.group(0)} » dans {where} de {name}")
        if _SUPERSEDES.search(d.text):
            score[i] += 1
            reasons.append(f"{name} se dit en vigueur")
        folder = _folder(d.path)
        if folder is not None:
            score[i] -= 2
            reasons.append(f"{name} est dans un dossier d'archives ({folder})")


def _numbered_clues(docs: Sequence[Versioned], score: list[float], reasons: list[str]) -> None:
    """The highest version or date in the file names (+1, when every name has one), and the
    latest year the texts mention (+1)."""
    versions = [_name_version(d.filename) for d in docs]
    best = max(versions)
    if best and versions.count(best) == 1 and all(versions):
        i = versions.index(best)
        score[i] += 1
        reasons.append(f"numéro de version ou date le plus élevé dans le nom : {_shown_name(docs[i], docs)}")
    years = [_latest_year(d) for d in docs]
    known = [y for y in years if y is not None]
    if len(known) >= 2 and len(set(known)) > 1 and known.count(max(known)) == 1:
        i = years.index(max(known))
        score[i] += 1
        others = ", ".join(str(y) for y in sorted(known, reverse=True)[1:])
        reasons.append(f"date la plus récente dans le texte : {max(known)} ({_shown_name(docs[i], docs)}), contre {others}")


def _rank(docs: Sequence[Versioned]) -> tuple[int | None, list[str], list[Versioned]]:
    """The current document's index in ``docs`` (or ``None``), the reasons, and the documents
    ordered current first (see the module doc, « Which looks current »)."""
    score = [0.0] * len(docs)
    reasons: list[str] = []
    _stated_clues(docs, score, reasons)
    _numbered_clues(docs, score, reasons)
    top_score = max(score)
    tied = [i for i in range(len(docs)) if score[i] == top_score]
    if len(tied) >= 2 and all(docs[i].modified_at > 0 for i in tied):
        latest = max(tied, key=lambda i: docs[i].modified_at)
        if all(docs[latest].modified_at - docs[i].modified_at > MTIME_MARGIN for i in tied if i != latest):
            score[latest] += 0.5  # breaks the tie only: every other clue counts whole points
            when = datetime.fromtimestamp(docs[latest].modified_at, UTC).strftime("%d.%m.%Y")
            reasons.append(f"modifié le plus récemment : {_shown_name(docs[latest], docs)} ({when})")
    order = sorted(range(len(docs)), key=lambda i: -score[i])
    if len(order) >= 2 and score[order[0]] > score[order[1]]:
        return order[0], reasons, [docs[i] for i in order]
    return None, reasons, list(docs)


def version_groups(docs: Sequence[Versioned]) -> tuple[VersionGroup, ...]:
    """The groups of ``docs`` (a context's documents, in context order) that are versions of one
    another (see the module doc), each with the one that looks current first. Pure; never
    raises."""
    parent = list(range(len(docs)))
    how: dict[int, str] = {}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(docs)):
        for j in range(i + 1, len(docs)):
            rel = _related(docs[i], docs[j])
            if rel is not None:
                ri, rj = root(i), root(j)
                if ri != rj:
                    parent[rj] = ri
                    how.setdefault(ri, rel)
    groups: dict[int, list[int]] = {}
    for i in range(len(docs)):
        groups.setdefault(root(i), []).append(i)
    out: list[VersionGroup] = []
    for r, members in groups.items():
        if len(members) < 2:
            continue
        current, reasons, ordered = _rank([docs[i] for i in members])
        out.append(
            VersionGroup(
                tuple(d.filename for d in ordered), tuple(d.location for d in ordered),
                ordered[0].filename if current is not None else None, tuple(reasons), how.get(r, "nom"),
                tuple(d.path for d in ordered),
            )
        )
    return tuple(out)


def version_note(group: VersionGroup, folder: Callable[[str], str] | None = None) -> str:
    """One French sentence announcing ``group`` (``folder`` formats a location; default as is):
    « Deux versions du même document : 03_….docx (\\\\SRV\\…\\DIRECTION\\) semble la version en vigueur
    (raisons) ; 03_…_v2024.docx (…\\ARCHIVES\\) est une version antérieure. »"""
    fmt = folder or (lambda s: s)
    n = len(group.documents)
    count = {2: "Deux", 3: "Trois", 4: "Quatre"}.get(n, str(n))
    parts = [f"{d} ({fmt(loc)})" if loc else d for d, loc in zip(group.documents, group.locations, strict=True)]
    if group.current is None:
        return (
            f"{count} versions du même document : {', '.join(parts)} ; rien n'indique laquelle est en vigueur, "
            "vérifiez avant de vous en servir."
        )
    why = f" ({' ; '.join(group.reasons)})" if group.reasons else ""
    older = parts[1:]
    tail = "est une version antérieure" if len(older) == 1 else "sont des versions antérieures"
    return f"{count} versions du même document : {parts[0]} semble la version en vigueur{why} ; {', '.join(older)} {tail}."

__all__ = [
    "MTIME_MARGIN", "NEAR_IDENTICAL", "VersionGroup", "Versioned", "archive_folder", "name_key", "similarity",
    "title_key", "version_groups", "version_note",
]
