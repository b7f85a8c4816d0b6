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


def _citation(text: str, start: int, end: int, labels: dict[str, Named]) -> Citation | None:
    """The citation ``text[start:end]`` makes: of the shown source it names, invented when it
    names none but looks like a file (:func:`looks_like_file`), ``None`` when it is no citation."""
    name = text[start:end]
    src, index = _resolve(name, labels)
    if src is None and not looks_like_file(name):
        return None
    return Citation(
        name=name,
        start=start,
        end=end,
        filename=nfc(src.filename) if src else None,
        doc_id=src.doc_id if src else None,
        chunk_index=index,
    )


def _known_citations(text: str, sources: list[Named], labels: dict[str, Named]) -> tuple[list[Citation], str]:
    """Step 1 of the scan: the ``[name]`` / ``[name#N]`` citations of a shown source's name in
    ``text`` (longest names first: a name may contain another one, or brackets), and ``text``
    with each of them blanked out (same length)."""
    found: list[Citation] = []
    masked = text
    if labels:
        written = {nfc(n).strip() for s in sources for n in (s.filename, _stem(s.filename), s.doc_id)}
        alternatives = "|".join(re.escape(n) for n in sorted(written, key=len, reverse=True) if n)
        known_re = re.compile(
            r"\[\s*((?:" + alternatives + r")(?:\s*#\s*\d+)?)\s*\]", re.IGNORECASE
        )
        for m in known_re.finditer(text):
            if _resolve(m.group(1), labels)[0] is None:  # IGNORECASE is not casefold: re-check
                continue
            c = _citation(text, m.start(1), m.end(1), labels)
            if c is not None:
                found.append(c)
            masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end() :]
    return found, masked


def _unwrapped(masked: str, o: int, c: int) -> tuple[int, int]:
    """The span inside the bracket group ``masked[o:c + 1]``, doubled brackets ``[[x]]`` unwrapped
    and surrounding spaces, quotes and emphasis stripped (empty when ``start >= end``)."""
    start, end = o + 1, c
    while True:
        start, end = _strip_span(masked, start, end)
        if end - start >= 2 and masked[start] == "[" and masked[end - 1] == "]":
            start, end = start + 1, end - 1
        else:
            return start, end


def _group_citations(text: str, start: int, end: int, labels: dict[str, Named]) -> list[Citation]:
    """Step 2 of the scan for the bracket group ``text[start:end]``: itself when it names a shown
    source; else its ``,`` / ``;`` parts when one names a shown source or two look like files;
    else itself when it looks like a file; else its parts that look like files."""
    whole = text[start:end]
    if _resolve(whole, labels)[0] is not None:
        spans = [(start, end)]
    else:
        parts = [_strip_span(text, start + m.start(), start + m.end()) for m in re.finditer(r"[^,;]+", whole)]
        parts = [(s, e) for s, e in parts if s < e]
        known = [p for p in parts if _resolve(text[p[0] : p[1]], labels)[0] is not None]
        filelike = [p for p in parts if looks_like_file(text[p[0] : p[1]])]
        if known or len(filelike) >= 2:
            spans = parts
        elif looks_like_file(whole):
            spans = [(start, end)]
        else:
            spans = filelike
    return [c for s, e in spans if (c := _citation(text, s, e, labels)) is not None]


def scan_citations(answer: str, sources: Iterable[Named]) -> CitationScan:
    """All citations of ``answer`` against the shown ``sources`` (see the module doc)."""
    text = nfc(answer)
    sources_list = list(sources)
    labels = _labels(sources_list)
    # 1. known names first, longest first (a name may contain another one, or brackets)
    found, masked = _known_citations(text, sources_list, labels)
    # 2. what is left: outermost bracket groups, split on , and ;
    for o, c in _top_groups(masked):
        start, end = _unwrapped(masked, o, c)
        if start >= end:
            continue
        found.extend(_group_citations(text, start, end, labels))
    found.sort(key=lambda c: c.start)
    return CitationScan(text, tuple(found))


__all__ = ["DOC_EXTENSIONS", "Citation", "CitationScan", "Named", "looks_like_file", "scan_citations"]
