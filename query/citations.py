"""Finding the citations of an answer (docs/ARCHITECTURE.md "Data flow of a question" step 6, control 3).

A citation is a bracketed name of a document: the exact file name (``[03_Contrat.docx]``), the
name without extension (``[03_Contrat]``), the document id, and any of these with a ``#N`` chunk
suffix as Yevi Core writes it (``[contrat_01#0]``). Names are compared NFC and case-folded, so an
NFD ``É`` from the model matches the NFC file name.

Brackets are also ordinary text (``[km/h]``, ``[Menu]-[Sous-menu]``, ``[1]``), and file names may
contain spaces, accents, parentheses and brackets (``[Devis (v2) [final].pdf]``). So the scan goes:

1. **known names first**: every ``[name]`` / ``[name#N]`` whose name is one of the shown sources'
   names is a valid citation; its span is then blanked out;
2. in what is left, each outermost balanced ``[…]`` group on one line (doubled brackets
   ``[[x.docx]]`` unwrapped) is split on ``,`` / ``;`` (``[a.docx, b.docx]``, ``[a.docx, p. 3]``);
   a part naming a known source is valid; a part that *looks like a file* is an **invented**
   citation — it names no document that was shown; anything else is not a citation.

"Looks like a file": ends with a document extension (:data:`DOC_EXTENSIONS`), or is an id with a
chunk suffix (``name#12``, no spaces), or follows the numbered-file pattern ``22_Contrat_…``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ancre.models import nfc

DOC_EXTENSIONS = frozenset(
    {
        "doc", "docx", "docm", "dot", "dotx", "odt", "rtf", "txt", "md", "pdf",
        "xls", "xlsx", "xlsm", "xlsb", "ods", "csv", "ppt", "pptx", "pptm", "odp",
        "vsd", "vsdx", "msg", "eml", "htm", "html", "xml", "json", "yaml", "yml",
        "one", "pages", "numbers", "key", "epub", "tex", "log", "ini", "zip",
    }
)  # fmt: skip
"""Extensions that make a bracketed text a file citation (lower case, without the dot)."""

_EXT_RE = re.compile(r"^.*\S\.(" + "|".join(sorted(DOC_EXTENSIONS)) + r")$", re.IGNORECASE)
_ID_RE = re.compile(r"^\S+#\d+$")
_PREFIXED_RE = re.compile(r"^\d{1,4}_(?=[\w.\-]*[^\W\d_])[\w.\-]+$")
_CHUNK_SUFFIX_RE = re.compile(r"\s*#\s*(\d+)$")


class Named(Protocol):
    """Anything with a ``filename`` and a ``doc_id`` (context ``Source`` / ``Extract``)."""

    @property
    def filename(self) -> str: ...

    @property
    def doc_id(self) -> str: ...


@dataclass(frozen=True)
class Citation:
    """One citation found in an answer. ``name`` is as written (NFC), ``#N`` suffix included;
    ``start``/``end`` its span in :attr:`CitationScan.text`; ``filename``/``doc_id`` the shown
    source it names, ``None`` for an invented citation; ``chunk_index`` the ``#N`` suffix."""

    name: str
    start: int
    end: int
    filename: str | None
    doc_id: str | None
    chunk_index: int | None = None

    @property
    def valid(self) -> bool:
        """Names a shown source."""
        return self.filename is not None


@dataclass(frozen=True)
class CitationScan:
    """The citations of an answer, in text order. ``text`` is the answer NFC-normalised (all
    spans refer to it)."""

    text: str
    citations: tuple[Citation, ...]

    @property
    def valid(self) -> tuple[Citation, ...]:
        return tuple(c for c in self.citations if c.valid)

    @property
    def invented(self) -> tuple[str, ...]:
        """Distinct invented names, in order of first appearance."""
        return tuple(dict.fromkeys(c.name for c in self.citations if not c.valid))

    @property
    def cited(self) -> tuple[str, ...]:
        """Distinct file names of the sources validly cited, in order of first citation."""
        return tuple(dict.fromkeys(c.filename for c in self.citations if c.filename is not None))


def _key(s: str) -> str:
    return nfc(s).strip().casefold()


def _stem(filename: str) -> str:
    """File name without its last extension (``a.b.docx`` → ``a.b``; ``.profile`` unchanged)."""
    return filename.rsplit(".", 1)[0] if "." in filename.strip(".") else filename


def _labels(sources: Iterable[Named]) -> dict[str, Named]:
    """Case-folded NFC label → source: file name, file name without extension, doc id."""
    labels: dict[str, Named] = {}
    for s in sources:
        for label in (s.filename, _stem(s.filename), s.doc_id):
            if label.strip():
                labels.setdefault(_key(label), s)
    return labels


def looks_like_file(name: str) -> bool:
    """Whether a bracketed text is a file citation even though it names no shown source."""
    name = name.strip()
    return bool(_EXT_RE.match(name) or _ID_RE.match(name) or _PREFIXED_RE.match(name))


def _resolve(name: str, labels: dict[str, Named]) -> tuple[Named | None, int | None]:
    """The source ``name`` designates (``#N`` suffix and folders tolerated), and the suffix."""
    index: int | None = None
    m = _CHUNK_SUFFIX_RE.search(name)
    if m:
        index = int(m.group(1))
        name = name[: m.start()]
    for candidate in (name, re.split(r"[\\/]", name)[-1]):
        src = labels.get(_key(candidate))
        if src is not None:
            return src, index
    return None, index


def _top_groups(text: str) -> list[tuple[int, int]]:
    """``(open, close)`` positions of the outermost balanced ``[…]`` groups, each on one line."""
    pairs: list[tuple[int, int]] = []
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "\n":
            stack.clear()
        elif ch == "[":
            stack.append(i)
        elif ch == "]" and stack:
            pairs.append((stack.pop(), i))
    pairs.sort()
    top: list[tuple[int, int]] = []
    for o, c in pairs:
        if not top or o > top[-1][1]:
            top.append((o, c))
    return top


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in " \t*_`\"'«»":
        start += 1
    while end > start and text[end - 1] in " \t*_`\"'«»":
        end -= 1
    return start, end


def scan_citations(answer: str, sources: Iterable[Named]) -> CitationScan:
    """All citations of ``answer`` against the shown ``sources`` (see the module doc)."""
    text = nfc(answer)
    sources_list = list(sources)
    labels = _labels(sources_list)
    found: list[Citation] = []

    def add(start: int, end: int) -> bool:
        name = text[start:end]
        src, index = _resolve(name, labels)
        if src is None and not looks_like_file(name):
            return False
        found.append(
            Citation(
                name=name,
                start=start,
                end=end,
                filename=nfc(src.filename) if src else None,
                doc_id=src.doc_id if src else None,
                chunk_index=index,
            )
        )
        return True

    # 1. known names first, longest first (a name may contain another one, or brackets)
    masked = text
    if labels:
        written = {nfc(n).strip() for s in sources_list for n in (s.filename, _stem(s.filename), s.doc_id)}
        alternatives = "|".join(re.escape(n) for n in sorted(written, key=len, reverse=True) if n)
        known_re = re.compile(
            r"\[\s*((?:" + alternatives + r")(?:\s*#\s*\d+)?)\s*\]", re.IGNORECASE
        )
        for m in known_re.finditer(text):
            if _resolve(m.group(1), labels)[0] is None:  # IGNORECASE is not casefold: re-check
                continue
            add(m.start(1), m.end(1))
            masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end() :]

    # 2. what is left: outermost bracket groups, split on , and ;
    for o, c in _top_groups(masked):
        start, end = o + 1, c
        while True:  # unwrap doubled brackets [[x]]
            start, end = _strip_span(masked, start, end)
            if end - start >= 2 and masked[start] == "[" and masked[end - 1] == "]":
                start, end = start + 1, end - 1
            else:
                break
        if start >= end:
            continue
        whole = text[start:end]
        if _resolve(whole, labels)[0] is not None:
            add(start, end)
            continue
        parts = [_strip_span(text, start + m.start(), start + m.end()) for m in re.finditer(r"[^,;]+", whole)]
        parts = [(s, e) for s, e in parts if s < e]
        known = [p for p in parts if _resolve(text[p[0] : p[1]], labels)[0] is not None]
        filelike = [p for p in parts if looks_like_file(text[p[0] : p[1]])]
        if known or len(filelike) >= 2:
            for s, e in parts:
                add(s, e)
        elif looks_like_file(whole):
            add(start, end)
        else:
            for s, e in filelike:
                add(s, e)

    found.sort(key=lambda c: c.start)
    return CitationScan(text, tuple(found))


__all__ = ["DOC_EXTENSIONS", "Citation", "CitationScan", "Named", "looks_like_file", "scan_citations"]
