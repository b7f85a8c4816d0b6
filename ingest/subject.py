"""Whose document it is: a document's *subject*, found at indexing, and the short contextual header
each of its chunks is embedded and keyword-indexed with (docs/ARCHITECTURE.md "Data flow of
indexing").

A share written from templates holds dozens of contracts whose sections (« 3. Durée », « 5. Accès
aux locaux ») never repeat the client's name: such a chunk says nothing of whose contract it is, so
a question naming the client cannot find it, and two clients' contracts look like versions of one
document. :func:`document_subject` reads, from the extracted blocks and the item's path:

- the **title**: the document's one top-level heading that is not a numbered section (« Contrat
  de maintenance — Garage Dubois »), among its first blocks; ``""`` when it has none (its top
  level holds several section headings);
- the **parties** it names, in its first blocks: a contract's « entre X, … et Y » (the first
  capitalised name after « entre », and the first one after a later « et »), labelled fields
  (« Client : X », « Locataire : X », « Bailleur : X », « Destinataire : X », « Collaborateur : X »…,
  also as a two-cell table row « Client | X »), and a letter's addressee line (« Madame Sophie
  Dubois »); each party as written, without the article;
- the **file name split into words**: ``_``, ``-``, ``.`` and spaces, then CamelCase and
  letter/digit boundaries (``Contrat_Maintenance_GarageDubois.docx`` → « Contrat Maintenance
  Garage Dubois »), accents kept;
- the **folder** (the item's path without its file name).

:func:`chunk_header` turns it and a chunk's heading path into one line, e.g. « Document : Contrat
de maintenance — Garage Dubois · Parties : Axonix SA ; Garage Dubois Sàrl · Section : 5. Accès aux
locaux », at most :data:`MAX_HEADER_CHARS` characters. It names the document, not the copy: the
file words without copy and version marks, the folder only when it reads as a name (« CLIENTS/
Garage Dubois », not « CLIENTS » nor « ARCHIVES ») — a copy on SharePoint or in another folder gets
the same header, so the same vectors. It is part of what the chunk is embedded with and of its
index terms, never of the quoted text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from ancre.models import Block, BlockKind, Subject, nfc

__all__ = [
    "MAX_HEADER_CHARS", "chunk_header", "document_subject", "file_words", "identity_words", "is_archive_folder",
    "named_folder",
]

HEAD_BLOCKS = 40
"""How many of a document's first blocks are read for its title and parties."""
HEAD_CHARS = 6000
"""...and at most this many characters of them."""
MAX_HEADER_CHARS = 400
"""Longest contextual header (characters); longer parts are cut."""

_CAP = r"[A-ZÀ-ÖØ-Þ][\w'’.\-]*"
_LINK = r"(?:\s+(?:de\s+la|de|du|des|la|le|et)\s+|\s+d['’]|\s*&\s*|\s+)"
_NAME = rf"{_CAP}(?:{_LINK}{_CAP})*"
_ARTICLE = r"(?:l['’]|la\s+|le\s+|les\s+)?"
_CIVILITY = r"(?:(?:Madame|Monsieur|Mme|M\.|Me|Maître|Dr)\s+)?"
_BETWEEN = re.compile(rf"(?<![^\W_])entre\s*(?:les\s+soussign[ée]s\s*)?:?\s*{_ARTICLE}{_CIVILITY}(?P<name>{_NAME})")
_AND = re.compile(rf"(?<![^\W_])et\s+{_ARTICLE}{_CIVILITY}(?P<name>{_NAME})")
_LABELS = (
    r"clients?e?|cliente|mandant|mandante|locataires?|bailleur|bailleresse|destinataire|collaborat(?:eur|rice)|"
    r"employ[ée]e?|salari[ée]e?|soci[ée]t[ée]|entreprise|ma[iî]tre\s+d['’]ouvrage|b[ée]n[ée]ficiaire|"
    r"preneur|preneuse|acheteur|acheteuse|partenaire|pour|[àa]\s+l['’]attention\s+de"
)
_LABELLED = re.compile(rf"^\s*(?:{_LABELS})\s*(?::|\|)\s*{_ARTICLE}{_CIVILITY}(?P<name>{_NAME})", re.IGNORECASE)
_ADDRESSEE = re.compile(rf"^\s*(?:Madame|Monsieur)\s+(?P<name>{_NAME})\s*$")
_SECTION_NUMBER = re.compile(r"^\s*(?:\d+(?:\.\d+)*[.)]?|[IVXLC]+\.|[A-Z]\))\s")
_CAMEL = re.compile(
    r"(?<=[a-zà-öø-ÿ])(?=[A-ZÀ-ÖØ-Þ])|(?<=[A-ZÀ-ÖØ-Þ])(?=[A-ZÀ-ÖØ-Þ][a-zà-öø-ÿ])|(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])"
)
_TRAILING = re.compile(r"[\s.,;:'’\-]+$")


def file_words(filename: str) -> str:
    """``filename`` without its extension, split into words (see the module doc):
    ``Contrat_Maintenance_GarageDubois.docx`` → ``"Contrat Maintenance Garage Dubois"``,
    ``03-offre-migration.v2.pdf`` → ``"03 offre migration v 2"``."""
    name = nfc(filename)
    stem = name.rsplit(".", 1)[0] if "." in name.strip(".") else name
    words = [w for part in re.split(r"[\s_.\-]+", stem) for w in _CAMEL.split(part) if w]
    return " ".join(words)


def _clean(name: str) -> str:
    """A party name as written, without trailing punctuation and a trailing lower-case link word."""
    name = _TRAILING.sub("", " ".join(name.split()))
    name = re.sub(r"\s+(?:de\s+la|de|du|des|la|le|et|d['’])$", "", name)
    return name


def _title(blocks: Sequence[Block]) -> str:
    """The document's one top-level heading (a lower level than every other heading among its
    first blocks, and not a numbered section); ``""`` when its top level holds several headings
    (sections, no title)."""
    headings = [b for b in blocks if b.kind is BlockKind.HEADING and b.text.strip()]
    if not headings:
        return ""
    top = min(max(b.level, 1) for b in headings)
    tops = [b for b in headings if max(b.level, 1) == top]
    text = " ".join(tops[0].text.split())
    return text if len(tops) == 1 and not _SECTION_NUMBER.match(text) else ""


def _parties(blocks: Sequence[Block]) -> tuple[str, ...]:
    """The parties named in the document's first blocks (see the module doc), in order, each once."""
    found: list[str] = []
    for b in blocks:
        if b.kind is BlockKind.PAGE_BREAK:
            continue
        text = " ".join(b.text.split())
        if b.kind is BlockKind.TABLE_ROW and text.count(" | ") != 1:
            continue  # a field is a two-cell row (« Client | X »), never a table's header or data row
        m = _LABELLED.match(text) or _ADDRESSEE.match(text)
        if m:
            found.append(_clean(m.group("name")))
            continue
        between = _BETWEEN.search(text)
        if between is None:
            continue
        found.append(_clean(between.group("name")))
        second = _AND.search(text, between.end())
        if second is not None:
            found.append(_clean(second.group("name")))
    out: list[str] = []
    for p in found:
        if p and p.casefold() not in {o.casefold() for o in out}:
            out.append(p)
    return tuple(out)


def _head(blocks: Sequence[Block]) -> list[Block]:
    """The document's first blocks: at most :data:`HEAD_BLOCKS` and :data:`HEAD_CHARS` characters."""
    out: list[Block] = []
    size = 0
    for b in blocks[:HEAD_BLOCKS]:
        out.append(b)
        size += len(b.text)
        if size >= HEAD_CHARS:
            break
    return out


def document_subject(blocks: Sequence[Block], path: str) -> Subject:
    """The :class:`~ancre.models.Subject` of a document from its extracted ``blocks`` (reading
    order) and its ``path`` in its source (POSIX, relative). Pure; never raises."""
    head = _head(blocks)
    posix = PurePosixPath(nfc(path))
    folder = "" if str(posix.parent) == "." else str(posix.parent)
    return Subject(_title(head), _parties(head), file_words(posix.name), folder)


_COPY_WORDS = (
    r"(?:copie|copy|old|ancien|ancienne|archive|archiv[ée]e?|obsol[eè]te|final|finale|d[ée]finitif|d[ée]finitive|"
    r"draft|brouillon|new|nouveau|nouvelle|maj)"
)
_LEADING_MARKS = re.compile(rf"^(?:(?:copie\s+d[eu]|copy\s+of|{_COPY_WORDS})\s+)+", re.IGNORECASE)
_TRAILING_MARKS = re.compile(
    rf"(?:\s+(?:\(?{_COPY_WORDS}\)?|\(?\d{{1,2}}\)|v(?:ersion)?\s*\d+(?:\s+\d+)*|rev\s*\d+|(?:19|20)\d{{2}}(?:\s+\d{{1,2}}){{0,2}}))+$",
    re.IGNORECASE,
)
_ARCHIVE_FOLDER = re.compile(
    r"^(?:archives?|archiv\w*|old|anciens?|anciennes?|obsolete|obsol[eè]tes?|historiques?|_old)$", re.IGNORECASE
)


def is_archive_folder(name: str) -> bool:
    """Whether a folder named ``name`` holds older versions (``ARCHIVES``, ``old``, ``ancien``…)."""
    return _ARCHIVE_FOLDER.match(name) is not None


def identity_words(words: str) -> str:
    """A file name's words without its copy and version marks (« Copie de … », « … (copie) »,
    « … v 2023 », « … 2024 03 ») — a copy or an older version names the same document."""
    out = _TRAILING_MARKS.sub("", _LEADING_MARKS.sub("", words.strip()))
    return out or words.strip()


def named_folder(folder: str) -> str:
    """The last folder of ``folder`` when it reads as a name (« CLIENTS/Garage Dubois » → « Garage
    Dubois »): not a single word in capitals (« CLIENTS »), not an archive folder, not a word of
    fewer than three letters; ``""`` otherwise."""
    last = PurePosixPath(folder).name if folder else ""
    if not last or is_archive_folder(last) or (last.isupper() and " " not in last) or len(last.strip()) < 3:
        return ""
    return last.replace("_", " ").strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def chunk_header(subject: Subject, heading_path: Sequence[str] = ()) -> str:
    """The contextual header of a chunk of a document whose subject is ``subject``, under the
    headings ``heading_path`` (outermost first): one line of « Document : … · Parties : … ·
    Fichier : … · Dossier : … · Section : … », empty parts left out, at most
    :data:`MAX_HEADER_CHARS` characters. It names the document, not the file: the file words
    without copy and version marks (:func:`identity_words`), the folder only when it reads as a
    name (:func:`named_folder`) — so a copy of a file, on the share and on SharePoint or in another
    folder, has the same header, hence the same vectors, as the original. ``""`` for an empty
    subject and no heading."""
    parts: list[str] = []
    if subject.title:
        parts.append(f"Document : {_cut(subject.title, 120)}")
    if subject.parties:
        parts.append(f"Parties : {_cut(' ; '.join(subject.parties), 160)}")
    words = identity_words(subject.file_words)
    if words and words.casefold() not in subject.title.casefold():
        parts.append(f"Fichier : {_cut(words, 100)}")
    folder = named_folder(subject.folder)
    if folder:
        parts.append(f"Dossier : {_cut(folder, 80)}")
    section = next((h for h in reversed(heading_path) if h and h != subject.title), "")
    if section:
        parts.append(f"Section : {_cut(' '.join(section.split()), 80)}")
    return _cut(" · ".join(parts), MAX_HEADER_CHARS)
